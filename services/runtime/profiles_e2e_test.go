package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/services/runtime"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakeanthropic"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodel"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakeresponses"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/providerflow"
	"github.com/toolplane/toolplane/services/runtime/runtimeschema"
)

// awkwardMCP is a streamable-HTTP MCP server (mcp-go, 127.0.0.1) with the
// input schemas providers refuse as they come: a root union, {} and an
// object without properties. Every tool answers with the JSON of the
// arguments it received.
func awkwardMCP(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("awkward", "1.0.0", server.WithToolCapabilities(true))
	echoArgs := func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := json.Marshal(r.GetArguments())
		return mcp.NewToolResultText("args=" + string(b)), nil
	}
	for name, schema := range map[string]string{
		// lookup's object branches cannot be merged (minProperties), so it is
		// wrapped into "input"; its string branch can never be MCP
		// arguments and is dropped.
		"lookup":  `{"anyOf": [{"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}, {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "minProperties": 1}, {"type": "string"}]}`,
		"anyargs": `{}`,
		"noprops": `{"type": "object"}`,
	} {
		s.AddTool(mcp.NewToolWithRawSchema(name, "Awkward fixture "+name+".", json.RawMessage(schema)), echoArgs)
	}
	// report answers with structuredContent alone, 5 MB of it.
	s.AddTool(mcp.NewToolWithRawSchema("report", "A 5 MB structured-only report.", json.RawMessage(`{"type": "object", "properties": {}}`)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			rows := make([]any, 0, 100000)
			for i := 0; len(rows) < 100000; i++ {
				rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("row %08d of the quarterly report", i)})
			}
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]any{"rows": rows}}, nil
		})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func startAwkwardLoop(t *testing.T, models []runtime.ModelConfig, mutate ...func(*app.Config)) *loopSuite {
	t.Helper()
	lc := runtime.LoopConfig{Models: models}
	runtime.SetLoopConfigForTest(&lc)
	t.Cleanup(func() { runtime.SetLoopConfigForTest(nil) })
	dir := t.TempDir()
	s := &loopSuite{t: t, dataDir: filepath.Join(dir, "data"), ext: filepath.Join(dir, "ext.json"),
		// The fixture server is on loopback, which catalog.egress refuses by default.
		mutate: func(c *app.Config) {
			c.Catalog.Egress.Allow = []string{"127.0.0.0/8", "::1"}
			for _, m := range mutate {
				m(c)
			}
		}}
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"fx": map[string]any{"type": "http", "url": awkwardMCP(t)}}})
	if err := os.WriteFile(s.ext, ext, 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// TestRunTurnAwkwardSchemasPerProvider: RunTurn against the strict
// Anthropic Messages fake and the OpenAI-compatible fake; the promoted
// root-union tool is bound as an object and called with the wrapped
// arguments, which reach the MCP tool unwrapped.
func TestRunTurnAwkwardSchemasPerProvider(t *testing.T) {
	an := fakeanthropic.New(
		fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{Name: "tool_search", Input: `{"query":"select:fx_lookup,fx_anyargs,fx_noprops"}`}}},
		fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{Name: "fx_lookup", Input: `{"input":{"id":"42"}}`}, {Name: "fx_noprops", Input: `{}`}}},
		fakeanthropic.Reply{Text: "Found 42."},
	)
	defer an.Close()
	oa := fakemodel.New(
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "tool_search", Args: `{"query":"select:fx_lookup,fx_anyargs,fx_noprops"}`}}},
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "fx_lookup", Args: `{"input":{"id":"42"}}`}, {Name: "fx_noprops", Args: `{}`}}},
		fakemodel.Reply{Content: "Found 42."},
	)
	defer oa.Close()
	stream := true
	s := startAwkwardLoop(t, []runtime.ModelConfig{
		{Name: "claude", Provider: runtime.ProviderAnthropic, BaseURL: an.BaseURL(), Stream: &stream},
		{Name: "gpt", Provider: runtime.ProviderOpenAI, BaseURL: oa.BaseURL(), Stream: &stream},
	})
	c := s.rt()
	ctx := context.Background()
	for _, model := range []string{"claude", "gpt"} {
		th := s.thread(c)
		st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "look up 42", Model: model})
		if err != nil {
			t.Fatal(err)
		}
		evs := collect(t, st)
		if lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
			t.Fatalf("%s: events %v", model, evs)
		}
		ms, err := c.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th})
		if err != nil {
			t.Fatal(err)
		}
		var results []string
		for _, m := range ms.GetMessages() {
			if m.GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_TOOL && m.GetName() != "tool_search" {
				results = append(results, m.GetName()+" "+m.GetContent())
			}
		}
		if strings.Join(results, " | ") != `fx_lookup args={"id":"42"} | fx_noprops args={}` {
			t.Fatalf("%s: tool results %q, want the union's arguments unwrapped", model, results)
		}
	}
	if p := an.Problems(); len(p) > 0 {
		t.Fatalf("the Messages API fake refused requests: %v", p)
	}
	if p := oa.Problems(); len(p) > 0 {
		t.Fatalf("the OpenAI fake refused requests: %v", p)
	}
	// Native tool search on the Messages API: the deferred tools go out
	// with defer_loading from the first request, tool_search answers with
	// tool_reference blocks, and the tool definitions (the cached prefix)
	// are the same before and after the promotion.
	areqs := an.Requests()
	deferred := map[string]bool{}
	for _, tool := range areqs[0].Tools {
		if tool.DeferLoading {
			deferred[tool.Name] = true
		}
	}
	if !deferred["fx_lookup"] || !deferred["fx_anyargs"] || !deferred["fx_noprops"] || deferred["tool_search"] {
		t.Fatalf("defer_loading in the first request: %v", deferred)
	}
	tj := func(r fakeanthropic.Request) string { b, _ := json.Marshal(r.Tools); return string(b) }
	if tj(areqs[0]) != tj(areqs[1]) || tj(areqs[1]) != tj(areqs[2]) {
		t.Fatalf("the tool definitions changed with the promotion:\n%s\n%s", tj(areqs[0]), tj(areqs[2]))
	}
	var refs []string
	for _, b := range areqs[1].Messages[len(areqs[1].Messages)-1].Content {
		for _, rb := range b.ResultBlocks() {
			if rb.Type == "tool_reference" {
				refs = append(refs, rb.ToolName)
			}
		}
	}
	if strings.Join(refs, ",") != "fx_anyargs,fx_lookup,fx_noprops" {
		t.Fatalf("tool_search result references %v", refs)
	}
	// What each provider was sent for the promoted tools passes its
	// profile's validator.
	for _, tool := range areqs[1].Tools {
		m := map[string]any{"name": tool.Name, "description": tool.Description, "input_schema": tool.InputSchema}
		if errs := runtimeschema.Check(runtimeschema.AnthropicMessages, m); len(errs) > 0 {
			t.Errorf("anthropic tool %s: %v", tool.Name, errs)
		}
	}
	oreqs := oa.Requests()
	var names []string
	for _, tool := range oreqs[1].Tools {
		names = append(names, tool.Function.Name)
		m := map[string]any{"type": "function", "function": map[string]any{"name": tool.Function.Name, "parameters": tool.Function.Parameters, "strict": false}}
		if errs := runtimeschema.Check(runtimeschema.OpenAIChat, m); len(errs) > 0 {
			t.Errorf("openai tool %s: %v", tool.Function.Name, errs)
		}
		if tool.Function.Name == "fx_lookup" {
			if _, ok := tool.Function.Parameters["properties"].(map[string]any)["input"]; !ok {
				t.Errorf("fx_lookup parameters not wrapped: %v", tool.Function.Parameters)
			}
		}
	}
	if !strings.Contains(strings.Join(names, ","), "fx_lookup") {
		t.Fatalf("fx_lookup not bound after promotion: %v", names)
	}

	// AssembleTools for each profile after promotion: every bound form is
	// valid for its profile; nothing is left out.
	th := s.thread(c)
	if _, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, ToolCall: &runtimev1.ToolCall{Id: "s1", Name: "tool_search",
		RawArguments: `{"query":"select:fx_lookup,fx_anyargs,fx_noprops"}`}}); err != nil {
		t.Fatal(err)
	}
	for p, id := range map[runtimev1.ToolProfile]runtimeschema.ID{
		runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_CHAT: runtimeschema.OpenAIChat, runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES: runtimeschema.OpenAIResponses,
		runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES: runtimeschema.AnthropicMessages, runtimev1.ToolProfile_TOOL_PROFILE_GEMINI: runtimeschema.Gemini,
		runtimev1.ToolProfile_TOOL_PROFILE_MCP: runtimeschema.MCP} {
		resp, err := c.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, Profile: p})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetReport().GetLeftOut()) > 0 {
			t.Errorf("%v: left out %v", p, resp.GetReport().GetLeftOut())
		}
		seen := 0
		for _, ts := range resp.GetTools() {
			if p == runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES && ts.GetName() == "tool_search" {
				// Native tool search: the client-executed tool_search tool.
				if f := ts.GetBound().AsMap(); f["type"] != "tool_search" || f["execution"] != "client" {
					t.Errorf("openai_responses tool_search form %v", f)
				}
				continue
			}
			if errs := runtimeschema.Check(id, ts.GetBound().AsMap()); len(errs) > 0 {
				t.Errorf("%v %s: %v", p, ts.GetName(), errs)
			}
			if strings.HasPrefix(ts.GetName(), "fx_") {
				seen++
			}
		}
		want := 3 // the promoted ones
		if p == runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES || p == runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES {
			want = 4 // and fx_report, deferred, with defer_loading
		}
		if seen != want {
			t.Errorf("%v: %d fixture tools bound, want %d", p, seen, want)
		}
	}
	// ExecuteToolCall with the profile the caller's model saw maps the
	// arguments back; an unknown profile is refused naming the field.
	res, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, Profile: runtimev1.ToolProfile_TOOL_PROFILE_GEMINI,
		ToolCall: &runtimev1.ToolCall{Id: "c1", Name: "fx_lookup", RawArguments: `{"input":{"id":"7"}}`}})
	if err != nil || res.GetResult().GetContent()[0].GetText() != `args={"id":"7"}` {
		t.Fatalf("gemini call: %v %v", res, err)
	}
	// The string branch is not offered, so {"input": "abc"} (which MCP
	// could never carry unwrapped) is refused by the argument check, the
	// tool not run.
	res, err = c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, Profile: runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES,
		ToolCall: &runtimev1.ToolCall{Id: "c2", Name: "fx_lookup", RawArguments: `{"input":"abc"}`}})
	if err != nil || !strings.Contains(res.GetResult().GetContent()[0].GetText(), "at /input") || strings.Contains(res.GetResult().GetContent()[0].GetText(), "args=") {
		t.Fatalf("a string for the union: %v %v", res, err)
	}
	if _, err := c.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, Profile: 99}); err == nil || !strings.Contains(err.Error(), "profile") {
		t.Fatalf("unknown profile: %v", err)
	}
}

// TestRunTurnResponses: RunTurn on the OpenAI Responses adapter against the
// strict Responses fake: native tool search (deferred functions with
// defer_loading, a client-executed tool_search answered by the
// tool_search_output item), the promoted root-union tool called with
// wrapped arguments that reach the MCP tool unwrapped, and the tools array
// unchanged by the promotion.
func TestRunTurnResponses(t *testing.T) {
	fk := fakeresponses.New(
		fakeresponses.Reply{ToolSearch: `{"query":"select:fx_lookup,fx_noprops"}`},
		fakeresponses.Reply{Calls: []fakeresponses.Call{{Name: "fx_lookup", Args: `{"input":{"id":"42"}}`}, {Name: "fx_noprops", Args: `{}`}}},
		fakeresponses.Reply{From: func(r fakeresponses.Request) fakeresponses.Reply {
			return fakeresponses.Reply{Text: "Found: " + r.LastOutput(), InputTokens: 10, OutputTokens: 3}
		}},
	)
	defer fk.Close()
	s := startAwkwardLoop(t, []runtime.ModelConfig{{Name: "resp", Provider: runtime.ProviderOpenAIResponses, BaseURL: fk.BaseURL()}})
	c := s.rt()
	ctx := context.Background()
	th := s.thread(c)
	st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "look up 42", Model: "resp"})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, st)
	if lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("events %v (fake problems %v)", evs, fk.Problems())
	}
	if p := fk.Problems(); len(p) > 0 {
		t.Fatalf("the Responses fake refused requests: %v", p)
	}
	reqs := fk.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	deferred := map[string]bool{}
	search := false
	for _, tool := range reqs[0].Tools {
		if tool.DeferLoading {
			deferred[tool.Name] = true
		}
		search = search || (tool.Type == "tool_search" && tool.Execution == "client")
	}
	if !search || !deferred["fx_lookup"] || !deferred["fx_noprops"] || !deferred["fx_report"] {
		t.Fatalf("first request's tools: search %v, deferred %v", search, deferred)
	}
	tj := func(r fakeresponses.Request) string { b, _ := json.Marshal(r.Tools); return string(b) }
	if tj(reqs[0]) != tj(reqs[1]) || tj(reqs[1]) != tj(reqs[2]) {
		t.Fatalf("the tools array changed with the promotion:\n%s\n%s", tj(reqs[0]), tj(reqs[2]))
	}
	if got := strings.Join(reqs[1].Loaded(), ","); got != "fx_lookup,fx_noprops" {
		t.Fatalf("tool_search_output loaded %q", got)
	}
	ms, err := c.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th})
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, m := range ms.GetMessages() {
		if m.GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_TOOL && m.GetName() != "tool_search" {
			results = append(results, m.GetName()+" "+m.GetContent())
		}
	}
	if strings.Join(results, " | ") != `fx_lookup args={"id":"42"} | fx_noprops args={}` {
		t.Fatalf("tool results %q, want the union's arguments unwrapped", results)
	}
	t.Logf("largest Responses request: %d bytes", max(reqs[0].Bytes, reqs[1].Bytes, reqs[2].Bytes))
}

// grpcBackend is providerflow's Backend over the runtime's gRPC client.
type grpcBackend struct{ s *loopSuite }

func (b grpcBackend) NewThread(context.Context) (string, error) { return b.s.thread(b.s.rt()), nil }
func (b grpcBackend) Assemble(ctx context.Context, th string, p runtimev1.ToolProfile) (*runtimev1.AssembleToolsResponse, error) {
	return b.s.rt().AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, Profile: p, UserMessage: "look up 42"})
}
func (b grpcBackend) Execute(ctx context.Context, th string, p runtimev1.ToolProfile, call *runtimev1.ToolCall) (*runtimev1.ToolResult, error) {
	r, err := b.s.rt().ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, Profile: p, ToolCall: call})
	return r.GetResult(), err
}

// TestProviderFlows: an application calling each provider itself
// (AssembleTools + ExecuteToolCall, providerflow) against the strict fake of
// that provider: the tool search in the provider's native form, the
// promoted root-union tool called with wrapped arguments that reach the MCP
// tool unwrapped, and the promotion recorded in the thread whatever the
// profile (a later openai_chat assembly binds the tool).
func TestProviderFlows(t *testing.T) {
	s := startAwkwardLoop(t, nil)
	ctx := context.Background()
	sc := providerflow.Script{Prompt: "look up 42", Query: "select:fx_lookup", Tool: "fx_lookup", Args: `{"input":{"id":"42"}}`}
	largest := 0
	for _, p := range providerflow.Providers {
		tr, err := providerflow.Run(ctx, grpcBackend{s}, p, sc)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		largest = max(largest, tr.LargestRequest)
		want := `The tool said: args={"id":"42"}`
		if p == "openai_chat" {
			want = "done" // fakemodel's scripted answer
		}
		if tr.ToolResult != `args={"id":"42"}` || tr.Answer != want {
			t.Fatalf("%s: tool result %q, answer %q", p, tr.ToolResult, tr.Answer)
		}
		var out map[string]any
		_ = json.Unmarshal(tr.SearchOutput, &out)
		switch p {
		case "openai_responses":
			tools, _ := out["tools"].([]any)
			if out["type"] != "tool_search_output" || out["call_id"] != "call_ts_0" || out["execution"] != "client" || len(tools) != 1 {
				t.Fatalf("tool_search_output %s", tr.SearchOutput)
			}
			f := tools[0].(map[string]any)
			if f["name"] != "fx_lookup" || f["defer_loading"] != true || f["parameters"].(map[string]any)["type"] != "object" {
				t.Fatalf("loaded function %v", f)
			}
			if !slices.Contains(tr.Bound, "fx_lookup (deferred)") || !slices.Contains(tr.Bound, "tool_search") {
				t.Fatalf("first request's tools %v", tr.Bound)
			}
		case "openai_chat":
			// tool_search shows the schema the model can call (the
			// profile's form: the root union wrapped), not the catalog's.
			var text string
			var found []map[string]any
			_ = json.Unmarshal(tr.SearchOutput, &text)
			if err := json.Unmarshal([]byte(text), &found); err != nil || len(found) != 1 {
				t.Fatalf("tool_search text %q: %v", text, err)
			}
			params, _ := found[0]["parameters"].(map[string]any)
			if _, wrapped := params["properties"].(map[string]any)["input"]; !wrapped || params["type"] != "object" || params["anyOf"] != nil {
				t.Fatalf("tool_search shows %v, want the bound (wrapped) schema", params)
			}
		case "anthropic_messages":
			if string(tr.SearchOutput) != `{"content":[{"tool_name":"fx_lookup","type":"tool_reference"}]}` {
				t.Fatalf("tool_reference output %s", tr.SearchOutput)
			}
		}
		// The promotion is in the thread: an openai_chat assembly binds it.
		asm, err := s.rt().AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: tr.Thread, Profile: runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_CHAT})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ts := range asm.GetTools() {
			names = append(names, ts.GetName())
		}
		if !slices.Contains(names, "fx_lookup") {
			t.Fatalf("%s: promotion not recorded; openai_chat binds %v", p, names)
		}
	}
	t.Logf("largest provider request in the flows: %d bytes", largest)
	// A tool_search refused before the search ran (arguments not JSON) is
	// still answered with a tool_search_output, loading nothing.
	th := s.thread(s.rt())
	r, err := s.rt().ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, Profile: runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES,
		ToolCall: &runtimev1.ToolCall{Id: "call_x", Name: "tool_search", RawArguments: `{not json`}})
	po := r.GetResult().GetProviderOutput().AsMap()
	if err != nil || r.GetResult().GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR || po["type"] != "tool_search_output" || po["call_id"] != "call_x" || len(po["tools"].([]any)) != 0 {
		t.Fatalf("refused tool_search: %v %v", r, err)
	}
}

// TestArgumentsCheckedAgainstBoundSchema: a call whose arguments fail the
// schema the model saw is refused naming the JSON pointer, and the tool is
// not run; runtime.limits.tool_arguments.validate_schema: false lets it
// through to the MCP server.
func TestArgumentsCheckedAgainstBoundSchema(t *testing.T) {
	call := func(s *loopSuite, p runtimev1.ToolProfile, args string) *runtimev1.ToolResult {
		t.Helper()
		c := s.rt()
		ctx := context.Background()
		th := s.thread(c)
		if _, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, ToolCall: &runtimev1.ToolCall{Id: "s", Name: "tool_search", RawArguments: `{"query":"select:fx_lookup"}`}}); err != nil {
			t.Fatal(err)
		}
		r, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, Profile: p, ToolCall: &runtimev1.ToolCall{Id: "c", Name: "fx_lookup", RawArguments: args}})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetResult()
	}
	text := func(r *runtimev1.ToolResult) string { return r.GetContent()[0].GetText() }
	s := startAwkwardLoop(t, nil)
	for p, want := range map[runtimev1.ToolProfile]string{
		runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES: "at /input/id: got number, want string",
		runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES:   "at /input",
		// Gemini's form is checked after mapping, against the tool's own schema.
		runtimev1.ToolProfile_TOOL_PROFILE_GEMINI: "at /id: got number, want string",
	} {
		r := call(s, p, `{"input":{"id":7}}`)
		if r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR || r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS ||
			!strings.Contains(text(r), "do not match its input schema "+want) || strings.Contains(text(r), "args=") {
			t.Errorf("%v: %v", p, r)
		}
	}
	// A valid call passes, under every profile and the v0.1.0 shape.
	if r := call(s, runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES, `{"input":{"id":"7"}}`); text(r) != `args={"id":"7"}` {
		t.Fatalf("valid call: %v", r)
	}
	if r := call(s, runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED, `{"id":"7"}`); text(r) != `args={"id":"7"}` {
		t.Fatalf("the tool's own shape: %v", r)
	}
	if r := call(s, runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED, `{"id":7}`); !strings.Contains(text(r), "at /id: got number, want string") {
		t.Fatalf("the tool's own shape, wrong type: %v", r)
	}
	// Not promoted: refused as such, the arguments not checked first.
	c := s.rt()
	th := s.thread(c)
	r, err := c.ExecuteToolCall(context.Background(), &runtimev1.ExecuteToolCallRequest{ThreadId: th, Profile: runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES,
		ToolCall: &runtimev1.ToolCall{Id: "c", Name: "fx_lookup", RawArguments: `{"input":{"id":7}}`}})
	if err != nil || r.GetResult().GetReasonCode() != "deferred.not_promoted" {
		t.Fatalf("unpromoted call: %v %v", r, err)
	}
	off := false
	s2 := startAwkwardLoop(t, nil, func(c *app.Config) { c.Runtime.Limits.ToolArguments.ValidateSchema = &off })
	if r := call(s2, runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES, `{"input":{"id":7}}`); text(r) != `args={"id":7}` {
		t.Fatalf("validate_schema: false: %v", r)
	}
}

var nextPage = regexp.MustCompile(`\n\[read_file returns at most (\d+) characters per call: this is [^\]]+\. Call read_file with start_line=(\d+)(?: and start_char=(\d+))? to read on\.\]$`)

// readPaged reads a file with read_file page by page, as a model would,
// following each page's note (start_line, and start_char inside a long
// line), checking that no page is over the budget, and returns the whole
// text.
func readPaged(t testing.TB, c runtimev1.RuntimeServiceClient, thread, path string, budget int) (string, int) {
	t.Helper()
	var all strings.Builder
	start, char, pages := 1, 0, 0
	for {
		pages++
		if pages > 10000 {
			t.Fatal("read_file paging does not end")
		}
		args := map[string]any{"path": path, "start_line": start}
		if char > 0 {
			args["start_char"] = char
		}
		r := call(t, c, thread, "read_file", args)
		if r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatalf("page %d (start_line=%d start_char=%d) refused: %s", pages, start, char, text(r))
		}
		page := text(r)
		if n := utf8.RuneCountInString(page); n > budget {
			t.Fatalf("page %d is %d characters, over the budget %d", pages, n, budget)
		}
		m := nextPage.FindStringSubmatch(page)
		if m == nil {
			all.WriteString(page)
			return all.String(), pages
		}
		all.WriteString(strings.TrimSuffix(page, m[0]))
		next, _ := strconv.Atoi(m[2])
		nextChar, _ := strconv.Atoi(m[3])
		if next < start || next == start && nextChar <= char {
			t.Fatalf("next page %d/%d does not advance from %d/%d", next, nextChar, start, char)
		}
		start, char = next, nextChar
	}
}

var savedAt = regexp.MustCompile(`saved at (/mnt/user-data/outputs/\.tool-results/\S+?\.txt)\.`)

// TestRunTurnBoundedResults: a 5 MB structured-only result and a 20 MiB
// read-back in one RunTurn against the strict Anthropic fake; no model
// request grows past the budget's order of magnitude.
func TestRunTurnBoundedResults(t *testing.T) {
	var savedPath string
	lastResult := func(r fakeanthropic.Request) string {
		m := r.Messages[len(r.Messages)-1]
		for _, b := range m.Content {
			for _, rb := range b.ResultBlocks() {
				if rb.Text != nil {
					return *rb.Text
				}
			}
		}
		return ""
	}
	an := fakeanthropic.New(
		fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{Name: "tool_search", Input: `{"query":"select:fx_report"}`}}},
		fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{Name: "fx_report", Input: `{}`}}},
		fakeanthropic.Reply{From: func(r fakeanthropic.Request) fakeanthropic.Reply {
			m := savedAt.FindStringSubmatch(lastResult(r))
			if m == nil {
				return fakeanthropic.Reply{Text: "no path in: " + lastResult(r)[:200]}
			}
			savedPath = m[1]
			return fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{Name: "read_file", Input: `{"path":"` + m[1] + `"}`}}}
		}},
		fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{Name: "read_file", Input: `{"path":"/mnt/user-data/workspace/big.txt"}`}}},
		fakeanthropic.Reply{Text: "Read both."},
	)
	defer an.Close()
	stream := false
	s := startAwkwardLoop(t, []runtime.ModelConfig{{Name: "claude", Provider: runtime.ProviderAnthropic, BaseURL: an.BaseURL(), Stream: &stream}})
	c := s.rt()
	ctx := context.Background()
	th := s.thread(c)
	ws := filepath.Join(s.dataDir, "runtime", "threads", th, "user-data", "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	var big strings.Builder
	for i := 1; big.Len() < 20<<20; i++ {
		fmt.Fprintf(&big, "line %07d of a twenty mebibyte workspace file\n", i)
	}
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(big.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "get the report, read it back, and read big.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if evs := collect(t, st); lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("events %v", evs)
	}
	if p := an.Problems(); len(p) > 0 {
		t.Fatalf("the fake refused requests: %v", p)
	}
	reqs := an.Requests()
	if len(reqs) != 5 || savedPath == "" {
		t.Fatalf("%d requests, saved path %q", len(reqs), savedPath)
	}
	largest := 0
	for _, r := range reqs {
		largest = max(largest, r.Bytes)
	}
	t.Logf("largest model request: %d bytes (5 MB structured result, 20 MiB read-back)", largest)
	if largest > 100<<10 {
		t.Fatalf("largest model request %d bytes: a result escaped the budget", largest)
	}
	// The read-backs are pages: the first page of each file with the next start_line.
	for i, want := range []string{"Call read_file with start_line=", "line 0000001 of a twenty mebibyte"} {
		if got := lastResult(reqs[3+i]); !strings.Contains(got, want) || !strings.Contains(got, "read_file returns at most 12000 characters per call") {
			t.Fatalf("read-back %d: %.300q", i, got)
		}
	}
}

// sdkScript lists the front door's tools with the official TypeScript SDK
// (its listTools validates every tool's inputSchema), promotes the
// fixture tools with tool_search, lists again and calls the union tool
// with the wrapped arguments.
const sdkScript = `
const [sdk, url, token] = process.argv.slice(2);
const { Client } = await import(sdk + "/dist/esm/client/index.js");
const { StreamableHTTPClientTransport } = await import(sdk + "/dist/esm/client/streamableHttp.js");
const client = new Client({ name: "profiles-test", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: "Bearer " + token } } }));
const before = await client.listTools();
await client.callTool({ name: "tool_search", arguments: { query: "select:fx_lookup,fx_anyargs,fx_noprops" } });
const after = await client.listTools();
const lookup = after.tools.find((t) => t.name === "fx_lookup");
const res = await client.callTool({ name: "fx_lookup", arguments: { id: "9" } });
console.log(JSON.stringify({ before: before.tools.map((t) => t.name), after: after.tools.map((t) => t.name), lookup: lookup.inputSchema, result: res.content[0].text }));
await client.close();
`

// TestFrontDoorOfficialSDK: after promotion of a root-union tool, the
// official TypeScript SDK still lists the front door's tools (the mcp
// profile fixed the root) and the wrapped call reaches the tool unwrapped.
func TestFrontDoorOfficialSDK(t *testing.T) {
	// NPMServer checks node and the install (…/sdk/dist/index.js is absent:
	// the SDK is a library), so look the package up by its package.json.
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	sdk := filepath.Join(root, ".tools", "npm", "node_modules", "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the official TypeScript SDK is not installed: %v", err)
		}
		t.Skip("the official TypeScript SDK is not installed")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not found")
	}
	s := startAwkwardLoop(t, nil)
	dir := t.TempDir()
	script := filepath.Join(dir, "list.mjs")
	if err := os.WriteFile(script, []byte(sdkScript), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", script, sdk, "http://"+s.httpAddr+"/mcp", loopUserToken).CombinedOutput()
	if err != nil {
		t.Fatalf("the official SDK failed: %v\n%s", err, out)
	}
	var got struct {
		Before, After []string
		Lookup        map[string]any
		Result        string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !slices.Contains(got.Before, "tool_search") || slices.Contains(got.Before, "fx_lookup") {
		t.Fatalf("before promotion: %v", got.Before)
	}
	for _, n := range []string{"fx_lookup", "fx_anyargs", "fx_noprops"} {
		if !slices.Contains(got.After, n) {
			t.Fatalf("after promotion %v lacks %s", got.After, n)
		}
	}
	// mcp fixes only the root: the union's object branches stay as they
	// are under type object, not wrapped; the string branch is gone.
	if bs, _ := got.Lookup["anyOf"].([]any); got.Lookup["type"] != "object" || got.Lookup["properties"].(map[string]any)["input"] != nil || len(bs) != 2 {
		t.Fatalf("fx_lookup listed as %v", got.Lookup)
	}
	if got.Result != `args={"id":"9"}` {
		t.Fatalf("call result %q", got.Result)
	}
}

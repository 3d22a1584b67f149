package runtimemcp

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

func TestMain(m *testing.M) {
	// The catalog keeps one OS-thread-locked spawner goroutine for the process (catalogmcp/process.go).
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/toolplane/toolplane/services/catalog/catalogmcp.onSpawnThread.func1.1"))
}

// fakeRuntime is a RuntimeService with two tool kinds: bound (tool_search,
// echo, slow) and one deferred MCP tool (everything__add) that works only
// after tool_search promoted it. Threads belong to the Authorization value
// that created them; another value gets NOT_FOUND, like the real runtime.
type fakeRuntime struct {
	runtimev1.UnimplementedRuntimeServiceServer
	mu       sync.Mutex
	threads  map[string]*fakeThread
	order    []string
	creates  int
	auths    []string
	noStream bool
	// hideEcho drops echo from every assembly (an upstream removal).
	hideEcho bool
}

type fakeThread struct {
	owner, agent string
	metadata     map[string]string
	promoted     []string
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{threads: map[string]*fakeThread{}} }

func authOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (f *fakeRuntime) get(ctx context.Context, id string) (*fakeThread, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auths = append(f.auths, authOf(ctx))
	t, ok := f.threads[id]
	if !ok || t.owner != authOf(ctx) {
		return nil, status.Errorf(codes.NotFound, "thread %q not found", id)
	}
	return t, nil
}

func (f *fakeRuntime) CreateThread(ctx context.Context, req *runtimev1.CreateThreadRequest) (*runtimev1.CreateThreadResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	id := uuid.NewString()
	f.threads[id] = &fakeThread{owner: authOf(ctx), agent: req.GetAgent(), metadata: req.GetMetadata()}
	f.order = append([]string{id}, f.order...)
	return &runtimev1.CreateThreadResponse{Thread: &runtimev1.Thread{ThreadId: id, Agent: req.GetAgent(), Metadata: req.GetMetadata()}}, nil
}

func (f *fakeRuntime) ListThreads(ctx context.Context, _ *runtimev1.ListThreadsRequest) (*runtimev1.ListThreadsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &runtimev1.ListThreadsResponse{}
	for _, id := range f.order {
		if t := f.threads[id]; t.owner == authOf(ctx) {
			res.Threads = append(res.Threads, &runtimev1.Thread{ThreadId: id, Agent: t.agent, Metadata: t.metadata})
		}
	}
	return res, nil
}

func schemaTool(name, desc string, schema map[string]any) *runtimev1.ToolSchema {
	an, err := structpb.NewStruct(map[string]any{"name": name, "description": desc, "input_schema": schema})
	if err != nil {
		panic(err)
	}
	return &runtimev1.ToolSchema{Name: name, Anthropic: an, Source: "mcp"}
}

func (f *fakeRuntime) AssembleTools(ctx context.Context, req *runtimev1.AssembleToolsRequest) (*runtimev1.AssembleToolsResponse, error) {
	t, err := f.get(ctx, req.GetThreadId())
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &runtimev1.AssembleToolsResponse{CatalogHash: "h1"}
	res.Tools = append(res.Tools,
		schemaTool("tool_search", "Search deferred tools.", map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}))
	if !f.hideEcho {
		res.Tools = append(res.Tools, schemaTool("echo", "Echo a message.", map[string]any{
			"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
			"$defs":                map[string]any{"msg": map[string]any{"type": "string"}},
			"properties":           map[string]any{"message": map[string]any{"$ref": "#/$defs/msg"}},
			"additionalProperties": false,
		}))
	}
	if slices.Contains(t.promoted, "everything__add") {
		res.Tools = append(res.Tools, schemaTool("everything__add", "Add two numbers.", map[string]any{"type": "object"}))
	} else {
		res.Deferred = []string{"everything__add"}
		res.PromptSections = []*runtimev1.PromptSection{{Name: "deferred_tools", Text: "<available-deferred-tools>\neverything__add\n</available-deferred-tools>"}}
	}
	return res, nil
}

func text(s string) []*typev1.ContentBlock {
	return []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: s}}
}

func (f *fakeRuntime) execute(ctx context.Context, threadID string, call *runtimev1.ToolCall, send func(*typev1.Notification) error) (*runtimev1.ToolResult, error) {
	t, err := f.get(ctx, threadID)
	if err != nil {
		return nil, err
	}
	ok := &runtimev1.ToolResult{ToolCallId: call.GetId(), Name: call.GetName(), Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS}
	switch call.GetName() {
	case "tool_search":
		f.mu.Lock()
		t.promoted = append(t.promoted, "everything__add")
		f.mu.Unlock()
		ok.Content = text(`[{"name":"everything__add"}]`)
		ok.Promoted = &runtimev1.Promoted{CatalogHash: "h1", Names: []string{"everything__add"}}
		return ok, nil
	case "echo":
		if call.GetArguments() == nil {
			return &runtimev1.ToolResult{ToolCallId: call.GetId(), Name: "echo", Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR,
				ErrorKind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS, Content: text("Error: arguments of echo must be a JSON object, got " + call.GetRawArguments())}, nil
		}
		ok.Content = append(text("Echo: "+call.GetArguments().AsMap()["message"].(string)),
			&typev1.ContentBlock{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_IMAGE, Data: "aGk=", MimeType: "image/png"})
		return ok, nil
	case "everything__add":
		f.mu.Lock()
		promoted := slices.Contains(t.promoted, "everything__add")
		f.mu.Unlock()
		if !promoted {
			return &runtimev1.ToolResult{ToolCallId: call.GetId(), Name: call.GetName(), Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR,
				ErrorKind: runtimev1.ErrorKind_ERROR_KIND_POLICY, ReasonCode: "deferred.not_promoted",
				Content: text("Error: Tool 'everything__add' is deferred and has not been loaded. Call tool_search first.")}, nil
		}
		if send != nil {
			for i := 1; i <= 2; i++ {
				p, _ := structpb.NewStruct(map[string]any{"progressToken": "upstream-token", "progress": float64(i), "total": 2})
				if err := send(&typev1.Notification{Method: "notifications/progress", Params: p}); err != nil {
					return nil, err
				}
			}
			l, _ := structpb.NewStruct(map[string]any{"level": "info", "data": "adding"})
			if err := send(&typev1.Notification{Method: "notifications/message", Params: l}); err != nil {
				return nil, err
			}
		}
		ok.Content = text("The sum is 3.")
		return ok, nil
	}
	return &runtimev1.ToolResult{ToolCallId: call.GetId(), Name: call.GetName(), Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR,
		ErrorKind: runtimev1.ErrorKind_ERROR_KIND_POLICY, ReasonCode: "tool.unknown", Content: text("Error: " + call.GetName() + " is not a valid tool.")}, nil
}

func (f *fakeRuntime) ExecuteToolCall(ctx context.Context, req *runtimev1.ExecuteToolCallRequest) (*runtimev1.ExecuteToolCallResponse, error) {
	r, err := f.execute(ctx, req.GetThreadId(), req.GetToolCall(), nil)
	if err != nil {
		return nil, err
	}
	return &runtimev1.ExecuteToolCallResponse{Result: r}, nil
}

func (f *fakeRuntime) ExecuteToolCallStream(req *runtimev1.ExecuteToolCallStreamRequest, stream grpc.ServerStreamingServer[runtimev1.ExecuteToolCallStreamResponse]) error {
	if f.noStream {
		return status.Error(codes.Unimplemented, "no stream")
	}
	r, err := f.execute(stream.Context(), req.GetThreadId(), req.GetToolCall(), func(n *typev1.Notification) error {
		return stream.Send(&runtimev1.ExecuteToolCallStreamResponse{Event: &runtimev1.ExecuteToolCallStreamResponse_Notification{Notification: n}})
	})
	if err != nil {
		return err
	}
	return stream.Send(&runtimev1.ExecuteToolCallStreamResponse{Event: &runtimev1.ExecuteToolCallStreamResponse_Result{Result: r}})
}

// startRuntime serves f on 127.0.0.1 and returns a client of it.
func startRuntime(t *testing.T, f *fakeRuntime) runtimev1.RuntimeServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	runtimev1.RegisterRuntimeServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(); gs.Stop() })
	return runtimev1.NewRuntimeServiceClient(conn)
}

// startFrontDoor serves the front door over rt on 127.0.0.1 at /mcp.
func startFrontDoor(t *testing.T, rt runtimev1.RuntimeServiceClient, opts Options) string {
	t.Helper()
	url, _ := startServer(t, rt, opts)
	return url
}

// startServer is startFrontDoor returning the Server too.
func startServer(t *testing.T, rt runtimev1.RuntimeServiceClient, opts Options) (string, *Server) {
	t.Helper()
	mux := http.NewServeMux()
	s := New(rt, opts)
	mux.Handle("/mcp", s.HTTPHandler())
	hs := httptest.NewServer(mux)
	t.Cleanup(func() { hs.Close(); _ = s.Close() })
	return hs.URL + "/mcp", s
}

type notes struct {
	mu  sync.Mutex
	all []mcp.JSONRPCNotification
}

func (n *notes) add(x mcp.JSONRPCNotification) { n.mu.Lock(); n.all = append(n.all, x); n.mu.Unlock() }
func (n *notes) methods() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, x := range n.all {
		out = append(out, x.Method)
	}
	return out
}

func connect(t *testing.T, url string, headers map[string]string, legacy bool) (*client.Client, *mcp.InitializeResult, *notes) {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.ClientOption
	if legacy {
		opts = append(opts, client.WithLegacyProtocolOnly())
	}
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n := &notes{}
	c.OnNotification(n.add)
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "frontdoor-test", Version: "0"}
	ir, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, ir, n
}

func names(tools []mcp.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

func textOf(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func call(t *testing.T, c *client.Client, name string, args any, meta *mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args, Meta: meta}})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func list(t *testing.T, c *client.Client) []mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return res.Tools
}

// The walk-through of issue 9 over a session-based protocol version: the
// session is one thread; deferred tools are named but not listed; calling
// one is refused with the runtime's text; tool_search promotes and sends
// list_changed; the promoted tool is listed and its progress and log
// notifications reach the client with the client's own progress token.
func TestSessionWalkThrough(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{Agent: "coder"})
	c, ir, n := connect(t, url, map[string]string{"Authorization": "Bearer alice"}, true)

	if ir.ProtocolVersion != mcp.LATEST_LEGACY_PROTOCOL_VERSION {
		t.Errorf("protocol %q, want %q", ir.ProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	if !strings.Contains(ir.Instructions, "everything__add") || !strings.Contains(ir.Instructions, "tool_search") {
		t.Errorf("instructions do not name the deferred tool and tool_search: %q", ir.Instructions)
	}
	tools := list(t, c)
	if got := names(tools); !slices.Equal(got, []string{"echo", "tool_search"}) {
		t.Fatalf("tools/list = %v, want [echo tool_search]", got)
	}
	for _, tl := range tools {
		if tl.Name == "tool_search" && !strings.Contains(tl.Description, "everything__add") {
			t.Errorf("tool_search description lacks the deferred names: %q", tl.Description)
		}
		if tl.Name == "echo" && (tl.InputSchema.Defs["msg"] == nil || tl.InputSchema.AdditionalProperties != false) {
			t.Errorf("echo schema lost $defs or additionalProperties: %+v", tl.InputSchema)
		}
	}

	res := call(t, c, "everything__add", map[string]any{"a": 1, "b": 2}, nil)
	if !res.IsError || !strings.Contains(textOf(t, res), "Call tool_search first") {
		t.Fatalf("deferred call: isError=%v text=%q", res.IsError, textOf(t, res))
	}
	if res.Meta == nil || res.Meta.AdditionalFields[MetaErrorKind] != "POLICY" || res.Meta.AdditionalFields[MetaReasonCode] != "deferred.not_promoted" {
		t.Errorf("deferred call meta = %+v", res.Meta)
	}

	res = call(t, c, "tool_search", map[string]any{"query": "add"}, nil)
	if res.IsError {
		t.Fatalf("tool_search failed: %q", textOf(t, res))
	}
	waitFor(t, func() bool { return slices.Contains(n.methods(), "notifications/tools/list_changed") }, "list_changed after tool_search")
	if got := names(list(t, c)); !slices.Equal(got, []string{"echo", "everything__add", "tool_search"}) {
		t.Fatalf("tools/list after promotion = %v", got)
	}

	res = call(t, c, "everything__add", map[string]any{"a": 1, "b": 2}, &mcp.Meta{ProgressToken: "client-tok"})
	if res.IsError || textOf(t, res) != "The sum is 3." {
		t.Fatalf("promoted call: isError=%v text=%q", res.IsError, textOf(t, res))
	}
	waitFor(t, func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		progress, logs := 0, 0
		for _, x := range n.all {
			switch x.Method {
			case "notifications/progress":
				if x.Params.AdditionalFields["progressToken"] == "client-tok" {
					progress++
				}
			case "notifications/message":
				if x.Params.AdditionalFields["data"] == "adding" {
					logs++
				}
			}
		}
		return progress == 2 && logs == 1
	}, "2 progress notifications with the client's token and 1 log message")

	res = call(t, c, "echo", map[string]any{"message": "hi"}, nil)
	if len(res.Content) != 2 || textOf(t, res) != "Echo: hi" {
		t.Fatalf("echo content = %+v", res.Content)
	}
	if img, ok := mcp.AsImageContent(res.Content[1]); !ok || img.Data != "aGk=" || img.MIMEType != "image/png" {
		t.Errorf("echo image block = %+v", res.Content[1])
	}
	res = call(t, c, "echo", []any{"not", "an", "object"}, nil)
	if !res.IsError || !strings.Contains(textOf(t, res), `["not","an","object"]`) {
		t.Errorf("non-object arguments: isError=%v text=%q", res.IsError, textOf(t, res))
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.creates != 1 {
		t.Errorf("CreateThread called %d times for one session, want 1", f.creates)
	}
	for _, th := range f.threads {
		if th.agent != "coder" || th.metadata[MetadataBinding] != "session" {
			t.Errorf("thread agent=%q metadata=%v", th.agent, th.metadata)
		}
	}
	for _, a := range f.auths {
		if a != "Bearer alice" {
			t.Fatalf("runtime saw Authorization %q, want the caller's", a)
		}
	}
}

// Two MCP sessions are two threads: a promotion in one is not in the other.
func TestSessionsAreSeparateThreads(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{})
	c1, _, _ := connect(t, url, map[string]string{"Authorization": "Bearer alice"}, true)
	c2, _, _ := connect(t, url, map[string]string{"Authorization": "Bearer alice"}, true)
	call(t, c1, "tool_search", map[string]any{"query": "add"}, nil)
	if got := names(list(t, c1)); !slices.Contains(got, "everything__add") {
		t.Fatalf("session 1 lost its promotion: %v", got)
	}
	if got := names(list(t, c2)); slices.Contains(got, "everything__add") {
		t.Fatalf("session 2 sees session 1's promotion: %v", got)
	}
	if f.creates != 2 {
		t.Errorf("creates = %d, want 2", f.creates)
	}
}

// Sessionless (2026-07-28) requests share one stable thread per credential
// and agent, found again by a restarted front door; another credential gets
// its own thread.
func TestSessionlessStableThread(t *testing.T) {
	f := newFakeRuntime()
	rt := startRuntime(t, f)
	url := startFrontDoor(t, rt, Options{})
	c1, ir, _ := connect(t, url, map[string]string{"Authorization": "Bearer bob"}, false)
	if ir.ProtocolVersion != mcp.LATEST_PROTOCOL_VERSION {
		t.Fatalf("negotiated %q, want the sessionless %q", ir.ProtocolVersion, mcp.LATEST_PROTOCOL_VERSION)
	}
	call(t, c1, "tool_search", map[string]any{"query": "add"}, nil)
	if got := names(list(t, c1)); !slices.Contains(got, "everything__add") {
		t.Fatalf("promotion lost between sessionless requests: %v", got)
	}
	c2, _, _ := connect(t, url, map[string]string{"Authorization": "Bearer bob"}, false)
	if got := names(list(t, c2)); !slices.Contains(got, "everything__add") {
		t.Fatalf("second client of the same credential: %v", got)
	}
	// A restarted front door finds the same thread through its metadata.
	url2 := startFrontDoor(t, rt, Options{})
	c3, _, _ := connect(t, url2, map[string]string{"Authorization": "Bearer bob"}, false)
	if got := names(list(t, c3)); !slices.Contains(got, "everything__add") {
		t.Fatalf("restarted front door: %v", got)
	}
	c4, _, _ := connect(t, url, map[string]string{"Authorization": "Bearer carol"}, false)
	if got := names(list(t, c4)); slices.Contains(got, "everything__add") {
		t.Fatalf("another credential sees bob's promotion: %v", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.creates != 2 {
		t.Errorf("creates = %d, want 2 (one per credential)", f.creates)
	}
}

// A client may name its thread; the runtime's ownership check applies.
func TestNamedThread(t *testing.T) {
	f := newFakeRuntime()
	rt := startRuntime(t, f)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer alice")
	th, err := rt.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := th.GetThread().GetThreadId()
	url := startFrontDoor(t, rt, Options{})
	c, _, _ := connect(t, url, map[string]string{"Authorization": "Bearer alice", HeaderThread: id}, false)
	call(t, c, "tool_search", map[string]any{"query": "add"}, nil)
	f.mu.Lock()
	promoted := slices.Clone(f.threads[id].promoted)
	f.mu.Unlock()
	if !slices.Contains(promoted, "everything__add") {
		t.Fatalf("named thread not used: promoted=%v", promoted)
	}
	// _meta names the thread per request and wins over the header.
	c2, _, _ := connect(t, url, map[string]string{"Authorization": "Bearer alice"}, true)
	res := call(t, c2, "everything__add", map[string]any{}, &mcp.Meta{AdditionalFields: map[string]any{MetaThreadKey: id}})
	if res.IsError {
		t.Fatalf("call on the named (promoted) thread refused: %q", textOf(t, res))
	}

	// Another principal naming alice's thread is refused.
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer mallory", HeaderThread: id}))
	if err != nil {
		t.Fatal(err)
	}
	cm := client.NewClient(tr)
	defer cm.Close()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cm.Start(cctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cm.Initialize(cctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = cm.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "everything__add", Arguments: map[string]any{}}})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("mallory on alice's thread: err=%v, want not found", err)
	}
}

// Without ExecuteToolCallStream the front door falls back to ExecuteToolCall.
func TestUnaryFallback(t *testing.T) {
	f := newFakeRuntime()
	f.noStream = true
	url := startFrontDoor(t, startRuntime(t, f), Options{})
	c, _, _ := connect(t, url, nil, true)
	res := call(t, c, "echo", map[string]any{"message": "x"}, nil)
	if res.IsError || textOf(t, res) != "Echo: x" {
		t.Fatalf("fallback: isError=%v text=%q", res.IsError, textOf(t, res))
	}
}

// The runtime being down is a JSON-RPC error, not an empty success.
func TestRuntimeUnavailable(t *testing.T) {
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	url := startFrontDoor(t, runtimev1.NewRuntimeServiceClient(conn), Options{CallTimeout: 2 * time.Second})
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithLegacyProtocolOnly())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c.Initialize(ctx, mcp.InitializeRequest{})
	if err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("initialize with the runtime down: err=%v, want unavailable", err)
	}
}

// DNS-rebinding protection: a loopback connection with a foreign Host is 403.
func TestDNSRebindingRejected(t *testing.T) {
	url := startFrontDoor(t, startRuntime(t, newFakeRuntime()), Options{})
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Host = "evil.example.com"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
}

// Over stdio the process is one session and one thread.
func TestStdio(t *testing.T) {
	f := newFakeRuntime()
	s := New(startRuntime(t, f), Options{Agent: "coder"})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(ctx, inR, outW) }()

	c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader(""))))
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if err := c.Start(cctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(cctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	call(t, c, "tool_search", map[string]any{"query": "add"}, nil)
	res := call(t, c, "everything__add", map[string]any{}, nil)
	if res.IsError {
		t.Fatalf("promoted call over stdio refused: %q", textOf(t, res))
	}
	if got := names(list(t, c)); !slices.Equal(got, []string{"echo", "everything__add", "tool_search"}) {
		t.Fatalf("stdio tools/list = %v", got)
	}
	_ = c.Close()
	cancel()
	_ = inW.Close()
	_ = outW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return")
	}
	if f.creates != 1 {
		t.Errorf("creates = %d, want 1", f.creates)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestContentConversion(t *testing.T) {
	blocks := []*typev1.ContentBlock{
		{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: "t"},
		{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_AUDIO, Data: "UklG", MimeType: "audio/wav"},
		{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE_LINK, Uri: "file:///a", Name: "a", MimeType: "text/plain"},
		{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE, Uri: "test://r", MimeType: "text/plain", Text: "body"},
		{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE, Uri: "test://b", MimeType: "image/png", Blob: "AAA="},
	}
	res, err := resultFrom(&runtimev1.ToolResult{Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS, Content: blocks})
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := mcp.AsAudioContent(res.Content[1]); !ok || a.Data != "UklG" || a.MIMEType != "audio/wav" {
		t.Errorf("audio = %+v", res.Content[1])
	}
	if l, ok := res.Content[2].(mcp.ResourceLink); !ok || l.URI != "file:///a" || l.Name != "a" {
		t.Errorf("resource link = %#v", res.Content[2])
	}
	er, ok := mcp.AsEmbeddedResource(res.Content[3])
	if !ok {
		t.Fatalf("embedded = %#v", res.Content[3])
	}
	if tr, ok := er.Resource.(mcp.TextResourceContents); !ok || tr.Text != "body" || tr.URI != "test://r" {
		t.Errorf("embedded text = %#v", er.Resource)
	}
	eb, _ := mcp.AsEmbeddedResource(res.Content[4])
	if br, ok := eb.Resource.(mcp.BlobResourceContents); !ok || br.Blob != "AAA=" {
		t.Errorf("embedded blob = %#v", eb.Resource)
	}
	if res.IsError || res.Meta != nil {
		t.Errorf("success result has isError=%v meta=%v", res.IsError, res.Meta)
	}
	if _, err := resultFrom(nil); err == nil {
		t.Error("nil result accepted")
	}
	if _, err := contentFrom(&typev1.ContentBlock{Type: 99}); err == nil {
		t.Error("unknown content type accepted")
	}
}

// Schemas go out byte-for-byte in meaning: JSON Schema 2020-12 keywords the
// mcp-go client would drop ($schema) are on the wire.
func TestToolsFromKeepsSchema(t *testing.T) {
	f := newFakeRuntime()
	f.threads["t"] = &fakeThread{}
	a, err := f.AssembleTools(context.Background(), &runtimev1.AssembleToolsRequest{ThreadId: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range toolsFrom(a) {
		b, err := json.Marshal(tl)
		if err != nil {
			t.Fatal(err)
		}
		if tl.Name != "echo" {
			continue
		}
		for _, k := range []string{`"$schema":"https://json-schema.org/draft/2020-12/schema"`, `"$defs"`, `"additionalProperties":false`, `"$ref":"#/$defs/msg"`} {
			if !strings.Contains(string(b), k) {
				t.Errorf("echo schema lost %s: %s", k, b)
			}
		}
	}
}

// A session whose thread disappeared (deleted, retention) gets a new one on
// its next listing instead of failing forever.
func TestDeletedThreadRebinds(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{})
	c, _, _ := connect(t, url, map[string]string{"Authorization": "Bearer alice"}, true)
	call(t, c, "tool_search", map[string]any{"query": "add"}, nil)
	f.mu.Lock()
	if f.creates != 1 {
		t.Fatalf("creates = %d", f.creates)
	}
	for id := range f.threads {
		delete(f.threads, id)
	}
	f.mu.Unlock()
	got := names(list(t, c))
	if !slices.Equal(got, []string{"echo", "tool_search"}) {
		t.Fatalf("tools/list after the thread was deleted = %v, want a fresh thread's tools", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.creates != 2 {
		t.Errorf("creates = %d, want 2 (one rebind)", f.creates)
	}
}

// Front-door overhead over loopback HTTP with a fake runtime (gRPC on
// loopback too): one tools/list (AssembleTools) and one tools/call
// (ExecuteToolCallStream with two progress and one log notification relayed).
func BenchmarkFrontDoor(b *testing.B) {
	f := newFakeRuntime()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	runtimev1.RegisterRuntimeServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	s := New(runtimev1.NewRuntimeServiceClient(conn), Options{})
	defer s.Close()
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.HTTPHandler())
	hs := httptest.NewServer(mux)
	defer hs.Close()
	tr, err := transport.NewStreamableHTTP(hs.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer bench"}))
	if err != nil {
		b.Fatal(err)
	}
	c := client.NewClient(tr, client.WithLegacyProtocolOnly())
	defer c.Close()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "tool_search", Arguments: map[string]any{}}}); err != nil {
		b.Fatal(err)
	}
	b.Run("tools/list", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tools/call+notifications", func(b *testing.B) {
		for b.Loop() {
			res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "everything__add", Arguments: map[string]any{}, Meta: &mcp.Meta{ProgressToken: "p"}}})
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
}

// Relayed log messages honour the client's logging level: none below an
// explicit logging/setLevel, and none for a sessionless request that did not
// declare a level (2026-07-28, SEP-2575).
func TestLogLevel(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{})
	countLogs := func(n *notes) int {
		n.mu.Lock()
		defer n.mu.Unlock()
		k := 0
		for _, x := range n.all {
			if x.Method == "notifications/message" {
				k++
			}
		}
		return k
	}
	c, _, n := connect(t, url, map[string]string{"Authorization": "Bearer lee"}, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}); err != nil {
		t.Fatal(err)
	}
	call(t, c, "tool_search", map[string]any{}, nil)
	call(t, c, "everything__add", map[string]any{}, &mcp.Meta{ProgressToken: "p"})
	waitFor(t, func() bool { return slices.Contains(n.methods(), "notifications/progress") }, "progress")
	if k := countLogs(n); k != 0 {
		t.Errorf("%d info messages relayed to a session at level warning", k)
	}

	m, _, mn := connect(t, url, map[string]string{"Authorization": "Bearer lee"}, false)
	call(t, m, "tool_search", map[string]any{}, nil)
	call(t, m, "everything__add", map[string]any{}, nil)
	time.Sleep(100 * time.Millisecond)
	if k := countLogs(mn); k != 0 {
		t.Errorf("%d log messages relayed to a sessionless request that declared no level", k)
	}
}

// Every protocol version mcp-go offers is served: the session-based ones
// through initialize (one thread per session), 2026-07-28 sessionless.
func TestProtocolVersions(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{})
	for _, v := range mcp.ValidProtocolVersions {
		t.Run(v, func(t *testing.T) {
			tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer v-" + v}))
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewClient(tr, client.WithProtocolVersion(v))
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			ir, err := c.Initialize(ctx, mcp.InitializeRequest{})
			if err != nil {
				t.Fatalf("initialize: %v", err)
			}
			if ir.ProtocolVersion != v {
				t.Errorf("negotiated %q, want %q", ir.ProtocolVersion, v)
			}
			if got := names(list(t, c)); !slices.Contains(got, "tool_search") {
				t.Errorf("tools/list = %v", got)
			}
			if res := call(t, c, "echo", map[string]any{"message": v}, nil); textOf(t, res) != "Echo: "+v {
				t.Errorf("tools/call = %q", textOf(t, res))
			}
		})
	}
}

// Concurrent sessionless requests of one credential still bind one thread.
func TestConcurrentSessionlessOneThread(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer crowd"}))
			if err != nil {
				errs <- err
				return
			}
			c := client.NewClient(tr)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Start(ctx); err != nil {
				errs <- err
				return
			}
			if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
				errs <- err
				return
			}
			if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.creates != 1 {
		t.Errorf("16 concurrent sessionless clients created %d threads, want 1", f.creates)
	}
}

// A session id presented with another credential neither reaches nor resets
// the owner's thread binding.
func TestSessionIDWithAnotherCredential(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{})
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer alice"}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithLegacyProtocolOnly())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	call(t, c, "tool_search", map[string]any{}, nil)
	sid := tr.GetSessionId()
	if sid == "" {
		t.Fatal("no session id")
	}
	// mallory replays alice's session id.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"everything__add","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	req.Header.Set("Authorization", "Bearer mallory")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "The sum is 3.") {
		t.Fatalf("mallory ran a tool promoted in alice's thread: %s", body)
	}
	// alice's binding is intact: her promoted tool still runs.
	if res := call(t, c, "everything__add", map[string]any{}, nil); res.IsError {
		t.Fatalf("alice's promotion lost after mallory's replay: %q", textOf(t, res))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, th := range f.threads {
		if th.owner == "Bearer mallory" && slices.Contains(th.promoted, "everything__add") {
			t.Errorf("mallory's thread %s has alice's promotion", id)
		}
	}
}

// With RequireAuthorization a request without a bearer token is 401 with a
// Bearer challenge, before any runtime call; with a token it is served.
func TestRequireAuthorization(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{RequireAuthorization: true})
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no token: status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	f.mu.Lock()
	creates := f.creates
	f.mu.Unlock()
	if creates != 0 {
		t.Errorf("a thread was created for an unauthenticated request")
	}
	c, _, _ := connect(t, url, map[string]string{"Authorization": "Bearer alice"}, true)
	if got := names(list(t, c)); !slices.Contains(got, "tool_search") {
		t.Fatalf("with a token: tools/list = %v", got)
	}
}

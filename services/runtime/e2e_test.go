package runtime_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/services/runtime/runtimesqlite"
)

// eventually retries f for up to 3 s (policy and catalog changes reach the
// runtime through watch streams).
func eventually(t *testing.T, f func() (*runtimev1.AssembleToolsResponse, bool)) *runtimev1.AssembleToolsResponse {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		r, ok := f()
		if ok {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached: %v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func section(r *runtimev1.AssembleToolsResponse, name string) string {
	for _, s := range r.GetPromptSections() {
		if s.GetName() == name {
			return s.GetText()
		}
	}
	return ""
}

// TestPipelineEndToEnd drives assembly and the tool-call chain over gRPC:
// catalog with real npm MCP servers and a static server, the runtime, and
// authz/skills fakes reached through their gRPC clients.
func TestPipelineEndToEnd(t *testing.T) {
	s := newSuite(t, nil)
	s.sk.Put("graph-reader", "Read the knowledge graph", true, []string{"memory_read_graph"}, "---\nname: graph-reader\n---\nUse memory_read_graph only.")
	s.sk.Put("off-skill", "A disabled skill", false, nil, "body")
	s.sk.Put("secret-skill", "A forbidden skill", true, nil, "body")
	s.sk.Put("free-skill", "A skill without allowed-tools", true, nil, "Do anything.")
	alice := s.rt(aliceToken)
	ctx := context.Background()

	t.Run("AssembleBindsToolSearchAndNonDeferredAndListsDeferred", func(t *testing.T) {
		th := newThread(t, alice, nil)
		// Servers READY in ListServers are in the runtime's catalog view once
		// its WatchCatalog stream has delivered their tools.
		start := time.Now()
		var r *runtimev1.AssembleToolsResponse
		for deadline := start.Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			r = assemble(t, alice, th, "hello")
			d := r.GetDeferred()
			if slices.Contains(d, "memory_create_entities") && slices.Contains(d, "everything_echo") && slices.Contains(d, "bulk_tool_007") || time.Now().After(deadline) {
				break
			}
		}
		t.Logf("deferred set complete after %v", time.Since(start).Round(time.Millisecond))
		got := names(r.GetTools())
		for _, want := range []string{"tool_search", "read_file", "ls", "glob", "grep", "write_file", "str_replace", "ask_clarification", "present_files", "describe_skill", "review_skill_package"} {
			if !got[want] {
				t.Errorf("%s not bound; bound: %v", want, got)
			}
		}
		for n := range got {
			if strings.HasPrefix(n, "memory_") || strings.HasPrefix(n, "everything_") || strings.HasPrefix(n, "bulk_") || n == "bash" {
				t.Errorf("%s bound but should be deferred or hidden", n)
			}
		}
		if !slices.Contains(r.GetDeferred(), "memory_create_entities") || !slices.Contains(r.GetDeferred(), "everything_echo") || !slices.Contains(r.GetDeferred(), "bulk_tool_007") {
			t.Fatalf("deferred names missing: %v", r.GetDeferred())
		}
		if !slices.IsSorted(r.GetDeferred()) {
			t.Error("deferred names not sorted")
		}
		if r.GetCatalogHash() == "" || len(r.GetCatalogHash()) != 16 {
			t.Errorf("catalog hash %q", r.GetCatalogHash())
		}
		sec := section(r, "deferred_tools")
		if !strings.Contains(sec, "<available-deferred-tools>") || !strings.Contains(sec, "\nmemory_create_entities\n") {
			t.Errorf("deferred section: %q", sec)
		}
		for _, ts := range r.GetTools() {
			if ts.GetOpenai().GetFields()["type"].GetStringValue() != "function" || ts.GetAnthropic().GetFields()["input_schema"] == nil {
				t.Errorf("%s: schemas not in both formats", ts.GetName())
			}
		}
	})

	t.Run("DeferredCallRefusedUntilSearchThenWorks", func(t *testing.T) {
		th := newThread(t, alice, nil)
		entity := map[string]any{"entities": []any{map[string]any{"name": "Refused-Entity", "entityType": "test", "observations": []any{"x"}}}}
		r := call(t, alice, th, "memory_create_entities", entity)
		if r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR || r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_POLICY ||
			r.GetReasonCode() != "deferred.not_promoted" || !strings.HasPrefix(text(r), "Error: Tool 'memory_create_entities'") || !strings.Contains(text(r), "tool_search") {
			t.Fatalf("deferred call not refused as expected: %v", r)
		}
		sr := call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_create_entities,memory_read_graph"})
		if sr.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || len(sr.GetPromoted().GetNames()) != 2 {
			t.Fatalf("tool_search: %v", sr)
		}
		a := assemble(t, alice, th, "")
		if bound := names(a.GetTools()); !bound["memory_create_entities"] || !bound["memory_read_graph"] {
			t.Fatalf("promoted tools not bound: %v", bound)
		}
		if sr.GetPromoted().GetCatalogHash() != a.GetCatalogHash() {
			t.Fatalf("promoted under %s, assembly hash %s", sr.GetPromoted().GetCatalogHash(), a.GetCatalogHash())
		}
		g := call(t, alice, th, "memory_read_graph", map[string]any{})
		if g.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || strings.Contains(text(g), "Refused-Entity") {
			t.Fatalf("the refused call reached the MCP server or read failed: %v", g)
		}
		ok := call(t, alice, th, "memory_create_entities", map[string]any{"entities": []any{map[string]any{"name": "Made-Entity", "entityType": "test", "observations": []any{"y"}}}})
		if ok.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatalf("call after promotion: %v", ok)
		}
		if g := call(t, alice, th, "memory_read_graph", map[string]any{}); !strings.Contains(text(g), "Made-Entity") {
			t.Fatalf("entity not created: %s", text(g))
		}
		// The conversation records every call.
		msgs, err := alice.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th})
		if err != nil || len(msgs.GetMessages()) != 5 {
			t.Fatalf("messages: %d, %v", len(msgs.GetMessages()), err)
		}
	})

	t.Run("UnknownAndMalformedCalls", func(t *testing.T) {
		th := newThread(t, alice, nil)
		r := call(t, alice, th, "no_such_tool", map[string]any{})
		if r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_POLICY || !strings.Contains(text(r), "not available") || r.GetReasonCode() != "tool.unknown" {
			t.Fatalf("unknown tool: %v", r)
		}
		resp, err := alice.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, ToolCall: &runtimev1.ToolCall{Name: "", Id: "x"}})
		if err != nil || resp.GetResult().GetName() != "unknown_tool" || resp.GetResult().GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR {
			t.Fatalf("empty name: %v %v", resp, err)
		}
		resp, err = alice.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, ToolCall: &runtimev1.ToolCall{Name: "ls", Id: "y", RawArguments: `{"path": "/mnt/`}})
		if err != nil || resp.GetResult().GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS || !strings.Contains(text(resp.GetResult()), "not a valid JSON object") {
			t.Fatalf("malformed args: %v %v", resp, err)
		}
	})

	t.Run("AuthzDeniesAtAssemblyAndAtCall", func(t *testing.T) {
		th := newThread(t, alice, nil)
		s.az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_TOOL, "everything_get-sum")
		// The policy change reaches the runtime through WatchPolicy.
		r := eventually(t, func() (*runtimev1.AssembleToolsResponse, bool) {
			r := assemble(t, alice, th, "")
			return r, !slices.Contains(r.GetDeferred(), "everything_get-sum")
		})
		if slices.Contains(r.GetDeferred(), "everything_get-sum") || names(r.GetTools())["everything_get-sum"] {
			t.Fatal("denied tool still listed")
		}
		// A user is not told the names it may never see (report.denied is
		// for admins only, docs/architecture.md §5).
		if len(r.GetReport().GetDenied()) != 0 {
			t.Errorf("report.denied shown to a user: %v", r.GetReport().GetDenied())
		}
		if sr := call(t, alice, th, "tool_search", map[string]any{"query": "select:everything_get-sum"}); len(sr.GetPromoted().GetNames()) != 0 {
			t.Fatalf("tool_search found a denied tool: %v", sr)
		}
		call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_read_graph"})
		s.az.DenyCall("memory_read_graph")
		d := call(t, alice, th, "memory_read_graph", map[string]any{})
		if d.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_POLICY || !strings.HasPrefix(text(d), "Guardrail denied:") || d.GetReasonCode() != "authz.denied" {
			t.Fatalf("call not denied: %v", d)
		}
	})

	t.Run("ActiveSkillNarrowsSchemasPromotionsAndSearch", func(t *testing.T) {
		th := newThread(t, alice, nil)
		call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_create_entities,memory_read_graph"})
		r := assemble(t, alice, th, "/graph-reader show me the graph")
		if r.GetSkipModel() || r.GetActivatedSkill().GetName() != "graph-reader" || r.GetActivatedSkill().GetSource() != runtimev1.SkillActivationSource_SKILL_ACTIVATION_SOURCE_SLASH {
			t.Fatalf("slash activation: %v", r)
		}
		if !strings.Contains(section(r, "skill_activation"), "Use memory_read_graph only.") {
			t.Errorf("activation section: %q", section(r, "skill_activation"))
		}
		got := names(r.GetTools())
		if !got["memory_read_graph"] || !got["read_file"] || !got["tool_search"] || got["memory_create_entities"] || got["ls"] || got["write_file"] {
			t.Fatalf("skill policy did not narrow the bound tools: %v", got)
		}
		if !slices.Contains(r.GetReport().GetSkillFiltered(), "memory_create_entities") {
			t.Errorf("report.skill_filtered: %v", r.GetReport().GetSkillFiltered())
		}
		sr := call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_create_entities,memory_read_graph,memory_open_nodes"})
		if fmt.Sprint(sr.GetPromoted().GetNames()) != "[memory_read_graph]" || strings.Contains(text(sr), "memory_create_entities") {
			t.Fatalf("tool_search not narrowed: %v", sr)
		}
		d := call(t, alice, th, "memory_create_entities", map[string]any{"entities": []any{}})
		if d.GetReasonCode() != "skill_policy.denied" || !strings.HasPrefix(text(d), "Error: Tool 'memory_create_entities'") {
			t.Fatalf("skill policy did not refuse: %v", d)
		}
		g, err := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(g.GetThread().GetPromoted().GetNames(), "memory_create_entities") {
			t.Errorf("promotions made before the skill were lost: %v", g.GetThread().GetPromoted())
		}
		// A promotion made under the skill is stored under the thread's hash
		// and still holds once another (unrestricted) skill replaces it.
		th2 := newThread(t, alice, nil)
		assemble(t, alice, th2, "/graph-reader go")
		if sr := call(t, alice, th2, "tool_search", map[string]any{"query": "select:memory_read_graph"}); len(sr.GetPromoted().GetNames()) != 1 {
			t.Fatalf("tool_search under the skill: %v", sr)
		}
		free := assemble(t, alice, th2, "/free-skill anything")
		if b := names(free.GetTools()); free.GetActivatedSkill().GetName() != "free-skill" || !b["memory_read_graph"] || !b["ls"] {
			t.Fatalf("after switching to an unrestricted skill: %v", b)
		}
		for msg, want := range map[string]string{
			"/no-such-skill do it": "not installed",
			"/off-skill go":        "disabled",
		} {
			r := assemble(t, alice, th, msg)
			if !r.GetSkipModel() || !strings.Contains(r.GetDirectAnswer(), want) {
				t.Errorf("%q: skip=%v answer=%q", msg, r.GetSkipModel(), r.GetDirectAnswer())
			}
		}
		s.az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_SKILL, "secret-skill")
		eventually(t, func() (*runtimev1.AssembleToolsResponse, bool) {
			r := assemble(t, alice, th, "/secret-skill x")
			return r, r.GetSkipModel() && strings.Contains(r.GetDirectAnswer(), "not available to you")
		})
		if r := assemble(t, alice, th, "/help me"); r.GetSkipModel() || r.GetActivatedSkill() != nil {
			t.Errorf("reserved name activated something: %v", r)
		}
	})

	t.Run("ReadingSkillMDActivatesAndClaimsDoNot", func(t *testing.T) {
		th := newThread(t, alice, map[string]string{"active_skills": "graph-reader", "activated_skill": "graph-reader"})
		r := assemble(t, alice, th, "hi")
		if r.GetActivatedSkill() != nil || !names(r.GetTools())["ls"] {
			t.Fatalf("metadata claimed an activation: %v", r)
		}
		w := call(t, alice, th, "write_file", map[string]any{"path": "/mnt/user-data/workspace/a.md", "content": "x", "active_skills": []any{"graph-reader"}, "skill": "graph-reader"})
		if w.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatal(text(w))
		}
		g, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
		if len(g.GetThread().GetActiveSkills()) != 0 {
			t.Fatalf("a request claimed activation: %v", g.GetThread().GetActiveSkills())
		}
		rd := call(t, alice, th, "read_file", map[string]any{"path": "/mnt/skills/public/graph-reader/SKILL.md"})
		if rd.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !strings.Contains(text(rd), "Use memory_read_graph only.") {
			t.Fatalf("read SKILL.md: %v", rd)
		}
		g, _ = alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
		as := g.GetThread().GetActiveSkills()
		if len(as) != 1 || as[0].GetName() != "graph-reader" || as[0].GetSource() != runtimev1.SkillActivationSource_SKILL_ACTIVATION_SOURCE_READ || as[0].GetDigest() == "" {
			t.Fatalf("reading SKILL.md did not activate: %v", as)
		}
		if names(assemble(t, alice, th, "").GetTools())["ls"] {
			t.Error("the read-activated skill did not narrow the tools")
		}
		if r := call(t, alice, th, "read_file", map[string]any{"path": "/mnt/skills/public/off-skill/SKILL.md"}); r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS {
			t.Errorf("disabled skill readable: %v", r)
		}
	})

	t.Run("ReadBeforeWriteAndWorkspaceConfinement", func(t *testing.T) {
		th := newThread(t, alice, nil)
		p := "/mnt/user-data/workspace/notes.txt"
		if r := call(t, alice, th, "write_file", map[string]any{"path": p, "content": "one\ntwo\n"}); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatal(text(r))
		}
		r := call(t, alice, th, "write_file", map[string]any{"path": p, "content": "over"})
		if r.GetReasonCode() != "read_before_write.unread" || !strings.HasPrefix(text(r), "Error: write_file blocked") {
			t.Fatalf("overwrite without read: %v", r)
		}
		call(t, alice, th, "read_file", map[string]any{"path": p})
		if r := call(t, alice, th, "str_replace", map[string]any{"path": p, "old_str": "two", "new_str": "2"}); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatal(text(r))
		}
		if r := call(t, alice, th, "str_replace", map[string]any{"path": p, "old_str": "one", "new_str": "1"}); r.GetReasonCode() != "read_before_write.unread" {
			t.Fatalf("a write refreshed the read mark: %v", r)
		}
		call(t, alice, th, "read_file", map[string]any{"path": p, "start_line": 2, "end_line": 2})
		if r := call(t, alice, th, "str_replace", map[string]any{"path": p, "old_str": "one", "new_str": "1"}); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatal(text(r))
		}
		if r := call(t, alice, th, "read_file", map[string]any{"path": p}); text(r) != "1\n2\n" {
			t.Fatalf("content %q", text(r))
		}
		// glob and grep (file:read) through the whole chain, in virtual paths.
		if r := call(t, alice, th, "glob", map[string]any{"pattern": "**/*.txt"}); text(r) != p {
			t.Fatalf("glob = %q", text(r))
		}
		if r := call(t, alice, th, "grep", map[string]any{"pattern": "^2$"}); text(r) != p+":2: 2" {
			t.Fatalf("grep = %q", text(r))
		}
		for _, bad := range []string{"/mnt/user-data/workspace/../../../etc/passwd", "/etc/passwd", "/mnt/user-data/workspace/../../runtime.db"} {
			if r := call(t, alice, th, "read_file", map[string]any{"path": bad}); r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS {
				t.Errorf("%s readable: %v", bad, text(r))
			}
		}
		if r := call(t, alice, th, "write_file", map[string]any{"path": "/mnt/user-data/uploads/x", "content": "x"}); r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS {
			t.Errorf("uploads writable: %v", text(r))
		}
		// Symlinks planted in the workspace cannot lead outside it.
		ws := filepath.Join(s.dataDir, "runtime", "threads", th, "user-data", "workspace")
		if err := os.Symlink("/etc/hostname", filepath.Join(ws, "link")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(s.dataDir), filepath.Join(ws, "dirlink")); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/mnt/user-data/workspace/link", "/mnt/user-data/workspace/dirlink/runtime.db"} {
			if r := call(t, alice, th, "read_file", map[string]any{"path": p}); r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS || !strings.Contains(text(r), "outside") {
				t.Errorf("%s through a symlink: %v", p, text(r))
			}
		}
		if r := call(t, alice, th, "write_file", map[string]any{"path": "/mnt/user-data/workspace/dirlink/evil.txt", "content": "x"}); r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS {
			t.Errorf("write through a symlink: %v", text(r))
		}
		if _, err := os.Stat(filepath.Join(s.dataDir, "evil.txt")); err == nil {
			t.Error("a write escaped the workspace")
		}
	})

	t.Run("OutputBudgetAndReadBack", func(t *testing.T) {
		th := newThread(t, alice, nil)
		call(t, alice, th, "tool_search", map[string]any{"query": "select:everything_echo"})
		var big strings.Builder
		for i := 0; big.Len() < 30000; i++ {
			fmt.Fprintf(&big, "line %05d of a long echo\n", i)
		}
		r := call(t, alice, th, "everything_echo", map[string]any{"message": big.String()})
		out := text(r)
		if r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || len(out) > 5000 || !strings.Contains(out, "/mnt/user-data/outputs/.tool-results/everything_echo-") || len(r.GetArtifacts()) != 1 {
			t.Fatalf("output not externalised (%d chars): %.300s", len(out), out)
		}
		path := r.GetArtifacts()[0].GetPath()
		// Read back page by page: every page within the budget, the pages
		// together the whole echo.
		back, pages := readPaged(t, alice, th, path, 12000)
		if !strings.Contains(back, big.String()) || pages < 3 {
			t.Fatalf("read back %d chars in %d pages, want the full %d-char echo", len(back), pages, big.Len())
		}
		page := call(t, alice, th, "read_file", map[string]any{"path": path, "start_line": 101, "end_line": 102})
		if strings.Count(text(page), "\n") != 2 || !strings.Contains(text(page), "line 00100") {
			t.Fatalf("paged read: %q", text(page))
		}
		g, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
		if len(g.GetThread().GetArtifacts()) != 1 {
			t.Errorf("artifact not recorded on the thread: %v", g.GetThread().GetArtifacts())
		}
	})

	t.Run("HundredConcurrentToolSearchesKeepEveryPromotion", func(t *testing.T) {
		th := newThread(t, alice, nil)
		var wg sync.WaitGroup
		errs := make(chan string, 100)
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := alice.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, ToolCall: &runtimev1.ToolCall{
					Id: fmt.Sprintf("c%d", i), Name: "tool_search", Arguments: args(t, map[string]any{"query": fmt.Sprintf("select:bulk_tool_%03d", i)})}})
				if err != nil || len(resp.GetResult().GetPromoted().GetNames()) != 1 {
					errs <- fmt.Sprint(resp, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatal(e)
		}
		g, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
		if n := len(g.GetThread().GetPromoted().GetNames()); n != 100 {
			t.Fatalf("promotions kept: %d, want 100", n)
		}
	})

	t.Run("AnotherPrincipalCannotSeeOrUseAThread", func(t *testing.T) {
		th := newThread(t, alice, nil)
		bob := s.rt(bobToken)
		if _, err := bob.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th}); status.Code(err) != codes.NotFound {
			t.Errorf("GetThread by bob: %v", err)
		}
		if _, err := bob.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th}); status.Code(err) != codes.NotFound {
			t.Errorf("AssembleTools by bob: %v", err)
		}
		if _, err := bob.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, ToolCall: &runtimev1.ToolCall{Name: "ls", Id: "1"}}); status.Code(err) != codes.NotFound {
			t.Errorf("ExecuteToolCall by bob: %v", err)
		}
		if _, err := bob.DeleteThread(ctx, &runtimev1.DeleteThreadRequest{ThreadId: th}); status.Code(err) != codes.NotFound {
			t.Errorf("DeleteThread by bob: %v", err)
		}
		list, err := bob.ListThreads(ctx, &runtimev1.ListThreadsRequest{})
		if err != nil || len(list.GetThreads()) != 0 {
			t.Errorf("bob lists %d threads, %v", len(list.GetThreads()), err)
		}
		if _, err := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th}); err != nil {
			t.Errorf("owner lost the thread: %v", err)
		}
		// The REST mirror applies the same ownership.
		for tok, want := range map[string]int{aliceToken: 200, bobToken: 404} {
			req, _ := http.NewRequest("POST", "http://"+s.httpAddr+"/v1/threads/"+th+":assemble", strings.NewReader(`{"userMessage": "hi"}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || (want == 200 && !strings.Contains(string(body), `"catalog_hash"`)) {
				t.Errorf("REST assemble with %s: %d %.300s", tok[:5], resp.StatusCode, body)
			}
		}
	})

	t.Run("AuthzUnreachableRunsNoToolCall", func(t *testing.T) {
		th := newThread(t, alice, nil)
		call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_create_entities"})
		s.az.SetDown(true)
		defer s.az.SetDown(false)
		r := call(t, alice, th, "memory_create_entities", map[string]any{"entities": []any{map[string]any{"name": "While-Down", "entityType": "t", "observations": []any{"z"}}}})
		if r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_POLICY || r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR {
			t.Fatalf("call ran while authz was down: %v", r)
		}
		if r := call(t, alice, th, "ls", map[string]any{"path": "/mnt/user-data/workspace"}); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR {
			t.Fatalf("built-in ran while authz was down: %v", r)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th})
			if status.Code(err) == codes.FailedPrecondition {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("assembly did not fail closed: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		s.az.SetDown(false)
		call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_read_graph"})
		if g := call(t, alice, th, "memory_read_graph", map[string]any{}); strings.Contains(text(g), "While-Down") {
			t.Fatal("the refused call reached the MCP server")
		}
	})

	// An unrelated catalog change (a server disabled) changes the hash of
	// the deferred set but not the promoted tool's definition: the promotion
	// stays bound (docs/architecture.md §3.1).
	t.Run("CatalogDriftKeepsPromotions", func(t *testing.T) {
		th := newThread(t, alice, nil)
		call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_open_nodes"})
		before := assemble(t, alice, th, "")
		if !names(before.GetTools())["memory_open_nodes"] {
			t.Fatal("not promoted")
		}
		cat := catalogv1.NewCatalogServiceClient(s.dial(adminToken))
		off := false
		if _, err := cat.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "everything", Server: &catalogv1.ServerUpdate{Enabled: &off}}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			on := true
			_, _ = cat.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "everything", Server: &catalogv1.ServerUpdate{Enabled: &on}})
			s.waitServers()
		}()
		deadline := time.Now().Add(10 * time.Second)
		var after *runtimev1.AssembleToolsResponse
		for {
			after = assemble(t, alice, th, "")
			if after.GetCatalogHash() != before.GetCatalogHash() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("assembly hash did not change after the catalog changed")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !names(after.GetTools())["memory_open_nodes"] {
			t.Fatal("an unrelated catalog change dropped the promotion")
		}
		if len(after.GetReport().GetDroppedPromotions()) != 0 {
			t.Fatalf("dropped: %v", after.GetReport().GetDroppedPromotions())
		}
		if r := call(t, alice, th, "memory_open_nodes", map[string]any{"names": []any{}}); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatalf("call of the kept promotion: %v", r)
		}
		sr := call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_open_nodes"})
		if sr.GetPromoted().GetCatalogHash() != after.GetCatalogHash() || len(sr.GetPromoted().GetTools()) != 1 || len(sr.GetPromoted().GetTools()[0].GetDefinitionHash()) != 64 {
			t.Fatalf("promoted %v, want one tool with its definition hash under the new hash %s", sr.GetPromoted(), after.GetCatalogHash())
		}
	})

	t.Run("RestartKeepsThreadState", func(t *testing.T) {
		th := newThread(t, alice, nil)
		call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_open_nodes"})
		call(t, alice, th, "write_file", map[string]any{"path": "/mnt/user-data/workspace/k.txt", "content": "k"})
		call(t, alice, th, "read_file", map[string]any{"path": "/mnt/user-data/workspace/k.txt"})
		before, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
		s.restart()
		alice = s.rt(aliceToken)
		after, err := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(after.GetThread().GetPromoted()) != fmt.Sprint(before.GetThread().GetPromoted()) || !slices.Contains(after.GetThread().GetReadFiles(), "/mnt/user-data/workspace/k.txt") {
			t.Fatalf("state lost: before %v after %v", before.GetThread(), after.GetThread())
		}
		msgs, _ := alice.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th})
		if len(msgs.GetMessages()) != 3 {
			t.Fatalf("messages after restart: %d", len(msgs.GetMessages()))
		}
		if !names(assemble(t, alice, th, "").GetTools())["memory_open_nodes"] {
			t.Error("promotion not effective after restart")
		}
		if r := call(t, alice, th, "write_file", map[string]any{"path": "/mnt/user-data/workspace/k.txt", "content": "k2"}); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Errorf("read mark lost across restart: %v", text(r))
		}
		if _, err := alice.DeleteThread(ctx, &runtimev1.DeleteThreadRequest{ThreadId: th}); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th}); status.Code(err) != codes.NotFound {
			t.Fatalf("deleted thread: %v", err)
		}
	})
}

// TestAuthzFailOpenListing: with runtime.authz.fail_open_listing, an
// unreachable authz lets assembly proceed, recorded in the report, the
// thread's events and the metrics; tool calls still fail closed.
func TestAuthzFailOpenListing(t *testing.T) {
	s := newSuite(t, func(c *app.Config) { c.Runtime.Authz.FailOpenListing = true })
	alice := s.rt(aliceToken)
	th := newThread(t, alice, nil)
	s.az.SetDown(true)
	time.Sleep(100 * time.Millisecond)
	r := assemble(t, alice, th, "")
	if !r.GetReport().GetAuthzFailOpen() || len(r.GetDeferred()) == 0 {
		t.Fatalf("fail-open listing not reported: %v", r.GetReport())
	}
	if res := call(t, alice, th, "ls", map[string]any{"path": "/mnt/user-data"}); res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR {
		t.Fatalf("a call ran while authz was down: %v", res)
	}
	if !strings.Contains(s.metricsText(), "toolplane_runtime_authz_fail_open_total") {
		t.Error("fail-open metric missing")
	}
	s.stop()
	st, err := runtimesqlite.Open(s.dataDir + "/runtime.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev, err := st.ListEvents(context.Background(), th)
	if err != nil || len(ev) == 0 || ev[0].Kind != "authz.fail_open" {
		t.Fatalf("thread events: %v, %v", ev, err)
	}
}

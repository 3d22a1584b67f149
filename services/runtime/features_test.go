package runtime_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// TestAgentsRoutingStreamingAndBuiltins covers custom agents (tool groups,
// skills allowlist, deferral settings), routing auto-promotion and hints,
// ExecuteToolCallStream, and the built-in tools.
func TestAgentsRoutingStreamingAndBuiltins(t *testing.T) {
	s := newSuite(t, nil)
	s.sk.Put("graph-reader", "Read the knowledge graph", true, []string{"memory_read_graph"}, "---\nname: graph-reader\n---\nbody")
	ctx := context.Background()
	alice := s.rt(aliceToken)
	admin := s.rt(adminToken)

	t.Run("RoutingAutoPromotesFromTheUserMessage", func(t *testing.T) {
		th := newThread(t, alice, nil)
		r := assemble(t, alice, th, "Please update the Knowledge Graph with this")
		want := "[memory_add_observations memory_create_entities memory_create_relations]"
		if fmt.Sprint(r.GetReport().GetAutoPromoted()) != want {
			t.Fatalf("auto_promoted %v, want %s", r.GetReport().GetAutoPromoted(), want)
		}
		if b := names(r.GetTools()); !b["memory_create_entities"] || b["memory_read_graph"] {
			t.Fatalf("bound after routing: %v", b)
		}
		h := section(r, "routing_hints")
		if !strings.Contains(h, "knowledge graph") || !strings.Contains(h, "load memory_read_graph with tool_search") {
			t.Errorf("routing hints: %q", h)
		}
		if res := call(t, alice, th, "memory_create_entities", map[string]any{"entities": []any{}}); res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatalf("auto-promoted tool not callable: %v", res)
		}
		if r := assemble(t, alice, newThread(t, alice, nil), "nothing relevant"); len(r.GetReport().GetAutoPromoted()) != 0 {
			t.Errorf("auto-promoted without a keyword: %v", r.GetReport().GetAutoPromoted())
		}
	})

	t.Run("CustomAgents", func(t *testing.T) {
		if _, err := alice.UpsertAgent(ctx, &runtimev1.UpsertAgentRequest{Agent: &runtimev1.Agent{Name: "x"}}); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("a user wrote an agent: %v", err)
		}
		if _, err := admin.UpsertAgent(ctx, &runtimev1.UpsertAgentRequest{Agent: &runtimev1.Agent{Name: "Bad Name"}}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("bad agent name: %v", err)
		}
		if _, err := admin.UpsertAgent(ctx, &runtimev1.UpsertAgentRequest{Agent: &runtimev1.Agent{Name: "researcher", Description: "no files, no skills",
			ToolGroups: &typev1.StringList{}, Skills: &typev1.StringList{}, ToolSearch: &runtimev1.ToolSearchSettings{Enabled: true, ExemptServers: []string{"memory"}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.UpsertAgent(ctx, &runtimev1.UpsertAgentRequest{Agent: &runtimev1.Agent{Name: "reader", ToolGroups: &typev1.StringList{Values: []string{"file:read"}},
			ToolSearch: &runtimev1.ToolSearchSettings{Enabled: false}, SubagentsEnabled: true}}); err != nil {
			t.Fatal(err)
		}
		list, err := alice.ListAgents(ctx, &runtimev1.ListAgentsRequest{})
		if err != nil || len(list.GetAgents()) != 3 || list.GetAgents()[0].GetName() != "default" {
			t.Fatalf("ListAgents: %v %v", list, err)
		}
		resp, err := alice.CreateThread(ctx, &runtimev1.CreateThreadRequest{Agent: "researcher"})
		if err != nil {
			t.Fatal(err)
		}
		r := assemble(t, alice, resp.GetThread().GetThreadId(), "")
		b := names(r.GetTools())
		if b["read_file"] || b["ls"] || b["describe_skill"] || !b["memory_read_graph"] || b["everything_echo"] || !b["tool_search"] || slices.Contains(r.GetDeferred(), "memory_read_graph") {
			t.Fatalf("researcher: bound %v", b)
		}
		if strings.Contains(section(r, "skills"), "graph-reader") {
			t.Error("skills section shown to an agent with skills: []")
		}
		if r := assemble(t, alice, resp.GetThread().GetThreadId(), "/graph-reader go"); !r.GetSkipModel() || !strings.Contains(r.GetDirectAnswer(), "not available for this agent") {
			t.Errorf("slash outside the allowlist: %v", r)
		}
		resp, _ = alice.CreateThread(ctx, &runtimev1.CreateThreadRequest{Agent: "reader"})
		r = assemble(t, alice, resp.GetThread().GetThreadId(), "")
		b = names(r.GetTools())
		if !b["read_file"] || !b["ls"] || b["write_file"] || b["tool_search"] || !b["everything_echo"] || len(r.GetDeferred()) != 0 || !b["task"] || section(r, "deferred_tools") != "" {
			t.Fatalf("reader: bound %v, deferred %d", b, len(r.GetDeferred()))
		}
		if _, err := alice.CreateThread(ctx, &runtimev1.CreateThreadRequest{Agent: "nobody"}); status.Code(err) != codes.NotFound {
			t.Errorf("unknown agent: %v", err)
		}
		if _, err := admin.DeleteAgent(ctx, &runtimev1.DeleteAgentRequest{Name: "reader"}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.GetAgent(ctx, &runtimev1.GetAgentRequest{Name: "reader"}); status.Code(err) != codes.NotFound {
			t.Errorf("deleted agent: %v", err)
		}
		// A thread whose agent was deleted falls back to the default agent.
		if b := names(assemble(t, alice, resp.GetThread().GetThreadId(), "").GetTools()); !b["write_file"] || !b["tool_search"] {
			t.Errorf("fallback to the default agent: %v", b)
		}
	})

	t.Run("ExecuteToolCallStream", func(t *testing.T) {
		th := newThread(t, alice, nil)
		call(t, alice, th, "tool_search", map[string]any{"query": "select:everything_trigger-long-running-operation"})
		stream, err := alice.ExecuteToolCallStream(ctx, &runtimev1.ExecuteToolCallStreamRequest{ThreadId: th, ToolCall: &runtimev1.ToolCall{
			Id: "s1", Name: "everything_trigger-long-running-operation", Arguments: args(t, map[string]any{"duration": 1, "steps": 3})}})
		if err != nil {
			t.Fatal(err)
		}
		var notes int
		var res *runtimev1.ToolResult
		for {
			m, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if res != nil {
				t.Fatal("a message after the result")
			}
			if m.GetNotification() != nil {
				notes++
			}
			res = m.GetResult()
		}
		if res == nil || res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatalf("stream result: %v", res)
		}
		if notes == 0 {
			t.Error("no progress notification relayed before the result")
		}
		stream, err = alice.ExecuteToolCallStream(ctx, &runtimev1.ExecuteToolCallStreamRequest{ThreadId: th, ToolCall: &runtimev1.ToolCall{Id: "s2", Name: "everything_echo", Arguments: args(t, map[string]any{"message": "x"})}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := stream.Recv()
		if err != nil || m.GetResult().GetReasonCode() != "deferred.not_promoted" {
			t.Fatalf("stream of a deferred tool: %v %v", m, err)
		}
	})

	t.Run("BuiltinTools", func(t *testing.T) {
		th := newThread(t, alice, nil)
		call(t, alice, th, "write_file", map[string]any{"path": "/mnt/user-data/outputs/report.md", "content": "# Report"})
		pf := call(t, alice, th, "present_files", map[string]any{"filepaths": []any{"/mnt/user-data/outputs/report.md"}})
		if pf.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || len(pf.GetArtifacts()) != 1 || pf.GetArtifacts()[0].GetMimeType() != "text/markdown" {
			t.Fatalf("present_files: %v", pf)
		}
		call(t, alice, th, "write_file", map[string]any{"path": "/mnt/user-data/workspace/w.txt", "content": "w"})
		if r := call(t, alice, th, "present_files", map[string]any{"filepaths": []any{"/mnt/user-data/workspace/w.txt"}}); r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS {
			t.Errorf("present_files outside outputs: %v", r)
		}
		g, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
		if len(g.GetThread().GetArtifacts()) != 1 {
			t.Errorf("artifacts: %v", g.GetThread().GetArtifacts())
		}
		ls := call(t, alice, th, "ls", map[string]any{"path": "/mnt/user-data"})
		if !strings.Contains(text(ls), "/mnt/user-data/outputs/") || !strings.Contains(text(ls), "/mnt/user-data/workspace/") {
			t.Errorf("ls: %q", text(ls))
		}
		q := call(t, alice, th, "ask_clarification", map[string]any{"question": "Which format?", "options": []any{"PDF", "HTML"}})
		if !strings.Contains(text(q), "Which format?") || !strings.Contains(text(q), "2. HTML") {
			t.Errorf("ask_clarification: %q", text(q))
		}
		rv := call(t, alice, th, "review_skill_package", map[string]any{"target": "skill://public/graph-reader"})
		if rv.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !strings.Contains(text(rv), "untrusted_review_data") || len(rv.GetArtifacts()) != 1 {
			t.Errorf("review_skill_package: %v", rv)
		}
		if g, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th}); len(g.GetThread().GetActiveSkills()) != 0 {
			t.Error("reviewing activated the skill")
		}
		ds := call(t, alice, th, "describe_skill", map[string]any{"name": "select:graph-reader"})
		if !strings.Contains(text(ds), "## Skill: graph-reader") || !strings.Contains(text(ds), "Allowed tools: memory_read_graph") {
			t.Errorf("describe_skill: %q", text(ds))
		}
		if r := call(t, alice, th, "bash", map[string]any{"command": "id"}); r.GetReasonCode() != "tool.unknown" {
			t.Errorf("bash without allow_bash: %v", r)
		}
	})
}

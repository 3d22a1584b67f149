package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetest"
)

func fakeRuntime(t *testing.T, cfg Config, tools ...*catalogv1.Tool) (*Server, context.Context) {
	t.Helper()
	addr := runtimetest.ServeAll(t, runtimetest.NewFakeCatalog(tools...), runtimetest.NewFakeAuthz(), runtimetest.NewFakeSkills())
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s, err := NewWithStore(cfg, svckit.Env{DataDir: t.TempDir(), Upstreams: map[string]grpc.ClientConnInterface{"catalog": conn, "authz": conn, "skills": conn}}, runtimestore.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := auth.WithIdentity(context.Background(), auth.Identity{Principal: &typev1.Principal{Subject: "alice", Tenant: "default", Roles: []string{"user"}}, Kind: auth.KindUser})
	return s, ctx
}

// TestConfigToolsGroupsBashDuplicatesAndMismatches: config tools come
// first (a catalog tool of the same name is dropped and reported), a
// config name differing from the implementation is reported and the
// implementation's name bound, bash is bound only with allow_bash and runs
// in the thread workspace.
func TestConfigToolsGroupsBashDuplicatesAndMismatches(t *testing.T) {
	cfg := Config{AllowBash: true, Tools: []ToolConfig{
		{Name: "read", Group: "file:read", Use: "file.read"},
		{Name: "write_file", Group: "file:write", Use: "file.write"},
		{Name: "bash", Group: "bash", Use: "bash"},
	}}
	s, ctx := fakeRuntime(t, cfg,
		&catalogv1.Tool{Name: "read_file", Description: "an MCP tool with a clashing name", Server: "fake"},
		&catalogv1.Tool{Name: "other", Description: "x", Server: "fake"},
	)
	th, err := s.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := th.GetThread().GetThreadId()
	r, err := s.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: id})
	if err != nil {
		t.Fatal(err)
	}
	b := names(r.GetTools())
	if !b["read_file"] || b["read"] || !b["bash"] || !b["write_file"] || b["ls"] {
		t.Fatalf("bound: %v", b)
	}
	if fmt.Sprint(r.GetDeferred()) != "[other]" {
		t.Errorf("deferred %v: the clashing MCP tool must be dropped", r.GetDeferred())
	}
	if !slices.ContainsFunc(r.GetReport().GetDroppedDuplicates(), func(d string) bool { return strings.HasPrefix(d, "read_file (mcp)") }) {
		t.Errorf("dropped duplicates: %v", r.GetReport().GetDroppedDuplicates())
	}
	if len(r.GetReport().GetNameMismatches()) != 1 || !strings.Contains(r.GetReport().GetNameMismatches()[0], "read (use file.read binds as read_file)") {
		t.Errorf("name mismatches: %v", r.GetReport().GetNameMismatches())
	}
	for _, ts := range r.GetTools() {
		if ts.GetName() == "read_file" && ts.GetSource() != "config" {
			t.Errorf("read_file bound from %s", ts.GetSource())
		}
	}
	args, _ := structpb.NewStruct(map[string]any{"command": "echo hello > made.txt && cat made.txt && pwd"})
	res, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: "b", Name: "bash", Arguments: args}})
	if err != nil {
		t.Fatal(err)
	}
	out := res.GetResult().GetContent()[0].GetText()
	if res.GetResult().GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !strings.Contains(out, "hello") || !strings.Contains(out, "/mnt/user-data/workspace") {
		t.Fatalf("bash: %v", res.GetResult())
	}
	args, _ = structpb.NewStruct(map[string]any{"path": "/mnt/user-data/workspace/made.txt"})
	res, _ = s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: "r", Name: "read_file", Arguments: args}})
	if got := res.GetResult().GetContent()[0].GetText(); got != "hello\n" {
		t.Fatalf("file written by bash: %q", got)
	}

	// Bytes that are not UTF-8 come back replaced, never as an RPC error.
	args, _ = structpb.NewStruct(map[string]any{"command": "printf 'ok\\377\\376end' > bin.dat; printf 'x\\377y'"})
	res, err = s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: "b2", Name: "bash", Arguments: args}})
	if err != nil || res.GetResult().GetContent()[0].GetText() != "x\uFFFDy" {
		t.Fatalf("bash with invalid UTF-8 output: %v %v", res, err)
	}
	args, _ = structpb.NewStruct(map[string]any{"path": "/mnt/user-data/workspace/bin.dat"})
	res, err = s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: "r2", Name: "read_file", Arguments: args}})
	if err != nil || !strings.HasPrefix(res.GetResult().GetContent()[0].GetText(), "ok\uFFFD") {
		t.Fatalf("read_file of a binary file: %v %v", res, err)
	}

	// Without allow_bash the bash tool is not bound, and groups filter
	// config tools only.
	s2, ctx2 := fakeRuntime(t, Config{}, &catalogv1.Tool{Name: "other", Server: "fake"})
	if err := s2.store.PutAgent(ctx2, &runtimev1.Agent{Name: "ro", ToolGroups: &typev1.StringList{Values: []string{"file:read", "bash"}}}); err != nil {
		t.Fatal(err)
	}
	th2, _ := s2.CreateThread(ctx2, &runtimev1.CreateThreadRequest{Agent: "ro"})
	r2, err := s2.AssembleTools(ctx2, &runtimev1.AssembleToolsRequest{ThreadId: th2.GetThread().GetThreadId()})
	if err != nil {
		t.Fatal(err)
	}
	b2 := names(r2.GetTools())
	if b2["bash"] || b2["write_file"] || !b2["read_file"] || !b2["ls"] || !b2["ask_clarification"] || !b2["tool_search"] {
		t.Fatalf("groups/bash: %v", b2)
	}
}

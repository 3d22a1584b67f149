package runtime

import (
	"context"
	"testing"
	"time"

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

// TestToolSearchNeverPromotesUnderAStaleHash: the catalog changes without
// an event while the runtime holds a cached assembly; tool_search sees the
// other hash, re-assembles and promotes under the new hash only.
func TestToolSearchNeverPromotesUnderAStaleHash(t *testing.T) {
	cat := runtimetest.NewFakeCatalog(
		&catalogv1.Tool{Name: "a_tool", Description: "first", Server: "fake", Source: catalogv1.ToolSource_TOOL_SOURCE_MCP, Available: true},
		&catalogv1.Tool{Name: "b_tool", Description: "second", Server: "fake", Source: catalogv1.ToolSource_TOOL_SOURCE_MCP, Available: true},
	)
	addr := runtimetest.ServeAll(t, cat, runtimetest.NewFakeAuthz(), runtimetest.NewFakeSkills())
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := NewWithStore(Config{}, svckit.Env{DataDir: t.TempDir(), Upstreams: map[string]grpc.ClientConnInterface{"catalog": conn, "authz": conn, "skills": conn}}, runtimestore.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := auth.WithIdentity(context.Background(), auth.Identity{Principal: &typev1.Principal{Subject: "alice", Tenant: "default", Roles: []string{"user"}}, Kind: auth.KindUser})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s.assembly.CacheLive() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("watch streams not live")
		}
		time.Sleep(10 * time.Millisecond)
	}
	th, err := s.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := th.GetThread().GetThreadId()
	a1, err := s.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: id})
	if err != nil {
		t.Fatal(err)
	}
	exec := func(name, query string) *runtimev1.ToolResult {
		args, _ := structpb.NewStruct(map[string]any{"query": query})
		r, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: "c", Name: name, Arguments: args}})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetResult()
	}
	if r := exec("b_tool", ""); r.GetReasonCode() != "deferred.not_promoted" || len(cat.Calls) != 0 {
		t.Fatalf("deferred call: %v, catalog calls %v", r, cat.Calls)
	}
	cat.Mutate(func(ts []*catalogv1.Tool) []*catalogv1.Tool {
		ts[0] = &catalogv1.Tool{Name: "a_tool", Description: "first, changed", Server: "fake", Source: catalogv1.ToolSource_TOOL_SOURCE_MCP, Available: true}
		return ts
	})
	newHash := runtimetest.Hash([]*catalogv1.Tool{{Name: "a_tool", Description: "first, changed"}, {Name: "b_tool", Description: "second"}})
	if newHash == a1.GetCatalogHash() {
		t.Fatal("fixture: hash did not change")
	}
	r := exec("tool_search", "select:a_tool")
	if r.GetPromoted().GetCatalogHash() != newHash || len(r.GetPromoted().GetNames()) != 1 {
		t.Fatalf("promoted %v under %q; assembly hash was %s, catalog now %s", r.GetPromoted().GetNames(), r.GetPromoted().GetCatalogHash(), a1.GetCatalogHash(), newHash)
	}
	g, _ := s.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: id})
	if g.GetThread().GetPromoted().GetCatalogHash() != newHash {
		t.Fatalf("thread promotions under %s", g.GetThread().GetPromoted().GetCatalogHash())
	}
	a2, _ := s.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: id})
	if a2.GetCatalogHash() != newHash || !names(a2.GetTools())["a_tool"] {
		t.Fatalf("after re-assembly: hash %s, tools %v", a2.GetCatalogHash(), names(a2.GetTools()))
	}
}

func names(ts []*runtimev1.ToolSchema) map[string]bool {
	out := map[string]bool{}
	for _, t := range ts {
		out[t.GetName()] = true
	}
	return out
}

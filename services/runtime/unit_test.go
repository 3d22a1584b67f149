package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetest"
)

func TestConfigValidateNamesKeys(t *testing.T) {
	cases := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Tools = []ToolConfig{{Name: "read", Group: "file:read", Use: "file.cat"}} }, "runtime.tools[0].use: unknown implementation"},
		{func(c *Config) { c.Tools = []ToolConfig{{Name: "bad name", Group: "g", Use: "file.read"}} }, "runtime.tools[0].name"},
		{func(c *Config) { c.Tools = []ToolConfig{{Name: "r", Use: "file.read"}} }, "runtime.tools[0].group"},
		{func(c *Config) { c.ToolSearch.AutoPromoteTopK = 9 }, "runtime.tool_search.auto_promote_top_k"},
		{func(c *Config) { c.ToolSearch.SearchLimit = 50 }, "runtime.tool_search.search_limit"},
		{func(c *Config) { c.ToolOutput.ExternalizeMinChars = 100 }, "runtime.tool_output.externalize_min_chars"},
		{func(c *Config) { c.Retention.Threads = -time.Second }, "runtime.retention.threads"},
		{func(c *Config) { c.Retention.Runs = -time.Second }, "runtime.retention.runs"},
		{func(c *Config) { c.Retention.Messages = -time.Second }, "runtime.retention.messages"},
		{func(c *Config) { c.Retention.Artifacts = -time.Second }, "runtime.retention.artifacts"},
	}
	for _, tc := range cases {
		var c Config
		tc.mutate(&c)
		c.SetDefaults()
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.want)
		}
	}
	var c Config
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if !c.toolSearchEnabled() || len(c.Tools) != 7 || c.ToolOutput.ExternalizeMinChars != 12000 {
		t.Errorf("defaults: %+v", c)
	}
	off := false
	c = Config{ToolSearch: ToolSearchConfig{Enabled: &off}, Tools: []ToolConfig{}}
	c.SetDefaults()
	if c.toolSearchEnabled() || len(c.Tools) != 0 {
		t.Error("explicit tool_search.enabled: false or tools: [] overridden by defaults")
	}
}

func TestInvokeRetriesOnlyIdempotentUnavailable(t *testing.T) {
	u := &upstream{timeout: time.Second}
	calls := 0
	fn := func(ctx context.Context, _ *catalogv1.GetCatalogRequest, _ ...grpc.CallOption) (*catalogv1.GetCatalogResponse, error) {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("no deadline on the upstream call")
		}
		if calls < 3 {
			return nil, status.Error(codes.Unavailable, "down")
		}
		return &catalogv1.GetCatalogResponse{CatalogHash: "h"}, nil
	}
	r, err := invoke(context.Background(), u, "catalog", "GetCatalog", true, u.timeout, fn, &catalogv1.GetCatalogRequest{})
	if err != nil || r.GetCatalogHash() != "h" || calls != 3 {
		t.Fatalf("idempotent read: %v %v after %d calls", r, err, calls)
	}
	calls = 0
	if _, err := invoke(context.Background(), u, "catalog", "GetCatalog", false, u.timeout, fn, &catalogv1.GetCatalogRequest{}); status.Code(err) != codes.Unavailable || calls != 1 {
		t.Fatalf("non-idempotent call retried: %d calls, %v", calls, err)
	}
	calls = 0
	perm := func(context.Context, *catalogv1.GetCatalogRequest, ...grpc.CallOption) (*catalogv1.GetCatalogResponse, error) {
		calls++
		return nil, status.Error(codes.NotFound, "x")
	}
	if _, err := invoke(context.Background(), u, "catalog", "GetCatalog", true, u.timeout, perm, &catalogv1.GetCatalogRequest{}); status.Code(err) != codes.NotFound || calls != 1 {
		t.Fatalf("NOT_FOUND retried: %d calls, %v", calls, err)
	}
}

// testServer builds a runtime on a memory store whose upstreams are the
// runtimetest fakes (no catalog: its watch just keeps reconnecting).
func testServer(t *testing.T, cfg Config) (*Server, runtimestore.Store) {
	t.Helper()
	addr := runtimetest.Serve(t, runtimetest.NewFakeAuthz(), runtimetest.NewFakeSkills())
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	st := runtimestore.NewMemory()
	s, err := NewWithStore(cfg, svckit.Env{DataDir: t.TempDir(), Upstreams: map[string]grpc.ClientConnInterface{"catalog": conn, "authz": conn, "skills": conn}}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, st
}

func TestStartMarksRunningRunsInterrupted(t *testing.T) {
	st := runtimestore.NewMemory()
	_ = st.CreateThread(context.Background(), &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t"}})
	_ = st.PutRun(context.Background(), &runtimev1.Run{RunId: "r", ThreadId: "t", Status: runtimev1.RunStatus_RUN_STATUS_RUNNING, StartTime: timestamppb.Now()})
	addr := runtimetest.Serve(t, runtimetest.NewFakeAuthz(), runtimetest.NewFakeSkills())
	conn, _ := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	s, err := NewWithStore(Config{}, svckit.Env{DataDir: t.TempDir(), Upstreams: map[string]grpc.ClientConnInterface{"catalog": conn, "authz": conn, "skills": conn}}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, _ := st.GetRun(context.Background(), "t", "r")
	if r.GetStatus() != runtimev1.RunStatus_RUN_STATUS_INTERRUPTED || r.GetReason() == "" {
		t.Fatalf("run after start: %v", r)
	}
}

// TestChildThreadOverride: a subagent's thread carries the runtime-written
// child marker with the narrowed agent as a per-thread override: nothing is
// stored as an agent, the child is hidden from ListThreads, its calls are
// marked is_subagent, and the parent's are not.
func TestChildThreadOverride(t *testing.T) {
	s, st := testServer(t, Config{})
	ctx := context.Background()
	pr, err := s.CreateThread(ctx, &runtimev1.CreateThreadRequest{Metadata: map[string]string{"toolplane.parent_thread_id": "forged"}})
	if err != nil {
		t.Fatal(err)
	}
	parent := pr.GetThread().GetThreadId()
	childID, err := loopAdapter{s}.CreateChildThread(ctx, runtimeloop.ChildSpec{ParentThreadID: parent, ParentRunID: "r1", SubagentType: "researcher",
		Skills: &typev1.StringList{Values: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	child, err := st.GetThread(ctx, childID)
	if err != nil {
		t.Fatal(err)
	}
	if c := child.Child; c == nil || c.ParentThreadID != parent || c.ParentRunID != "r1" || c.SubagentType != "researcher" ||
		c.Agent.GetName() != defaultAgentName || fmt.Sprint(c.Agent.GetSkills().GetValues()) != "[x]" || c.Agent.GetSubagentsEnabled() {
		t.Fatalf("child marker %+v", child.Child)
	}
	la, err := s.agents.loopAgent(ctx, child)
	if err != nil || fmt.Sprint(la.Skills.GetValues()) != "[x]" || la.SubagentsEnabled {
		t.Fatalf("child loop agent %+v %v", la, err)
	}
	pth, _ := st.GetThread(ctx, parent)
	if pa, _ := s.agents.loopAgent(ctx, pth); pa.Skills != nil {
		t.Fatalf("parent agent narrowed: %+v", pa)
	}
	// A request's metadata never marks a thread as a subagent's.
	if pth.Child != nil || runtimeident.CallContext(pth, nil, "", "").GetIsSubagent() || !runtimeident.CallContext(child, nil, "", "").GetIsSubagent() {
		t.Fatalf("is_subagent: parent %v child %v", runtimeident.CallContext(pth, nil, "", ""), runtimeident.CallContext(child, nil, "", ""))
	}
	ags, _ := s.ListAgents(ctx, &runtimev1.ListAgentsRequest{})
	if len(ags.GetAgents()) != 1 || ags.GetAgents()[0].GetName() != defaultAgentName {
		t.Fatalf("agents %v", ags.GetAgents())
	}
	lt, _ := s.ListThreads(ctx, &runtimev1.ListThreadsRequest{})
	if len(lt.GetThreads()) != 1 || lt.GetThreads()[0].GetThreadId() != parent {
		t.Fatalf("threads %v", lt.GetThreads())
	}
	if _, err := s.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: childID}); err != nil {
		t.Fatalf("child by id: %v", err)
	}
	// Deleting the parent deletes the hidden child with its workspace.
	if _, err := os.Stat(s.ws.ThreadDir(childID)); err != nil {
		t.Fatalf("child workspace: %v", err)
	}
	if _, err := s.DeleteThread(ctx, &runtimev1.DeleteThreadRequest{ThreadId: parent}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetThread(ctx, childID); !errors.Is(err, runtimestore.ErrNotFound) {
		t.Fatalf("child after the parent's deletion: %v", err)
	}
	if _, err := os.Stat(s.ws.ThreadDir(childID)); !os.IsNotExist(err) {
		t.Fatalf("child workspace after the parent's deletion: %v", err)
	}
}

// flakyACPCatalog answers ListAcpAgents UNAVAILABLE twice, then with one agent.
type flakyACPCatalog struct {
	catalogv1.CatalogServiceClient
	calls int
}

func (f *flakyACPCatalog) ListAcpAgents(context.Context, *catalogv1.ListAcpAgentsRequest, ...grpc.CallOption) (*catalogv1.ListAcpAgentsResponse, error) {
	f.calls++
	if f.calls < 3 {
		return nil, status.Error(codes.Unavailable, "error reading from server: EOF")
	}
	return &catalogv1.ListAcpAgentsResponse{Agents: []*catalogv1.AcpAgent{{Name: "a"}}}, nil
}

// TestListAcpAgentsIsRetried: every assembly lists ACP agents, so the
// decorated catalog client retries it on UNAVAILABLE like the other reads
// (a catalog replica killed under it failed assemblies with assembly.failed
// in tests/e2e/multinode_test.go).
func TestListAcpAgentsIsRetried(t *testing.T) {
	f := &flakyACPCatalog{}
	c := catalogClient{CatalogServiceClient: f, u: &upstream{timeout: time.Second}}
	r, err := c.ListAcpAgents(context.Background(), &catalogv1.ListAcpAgentsRequest{})
	if err != nil || len(r.GetAgents()) != 1 || f.calls != 3 {
		t.Fatalf("ListAcpAgents: %v %v after %d calls; want the agent after 3", r, err, f.calls)
	}
}

// flakyAuthz answers Authorize UNAVAILABLE once (the replica died under
// the call), then allows.
type flakyAuthz struct {
	authzv1.AuthzServiceClient
	calls int
}

func (f *flakyAuthz) Authorize(context.Context, *authzv1.AuthorizeRequest, ...grpc.CallOption) (*authzv1.AuthorizeResponse, error) {
	f.calls++
	if f.calls == 1 {
		return nil, status.Error(codes.Unavailable, "error reading from server: EOF")
	}
	return &authzv1.AuthorizeResponse{Decision: &authzv1.Decision{Allow: true}}, nil
}

// TestAuthorizeIsRetriedOnUnavailable: an Authorize in flight on an authz
// replica that dies is retried (on the next replica of the balancer)
// instead of refusing the call with authz.evaluator_error
// (docs/decisions/0171-authorize-retried-on-unavailable.md); a deny is
// not retried.
func TestAuthorizeIsRetriedOnUnavailable(t *testing.T) {
	f := &flakyAuthz{}
	c := authzClient{AuthzServiceClient: f, u: &upstream{timeout: time.Second}}
	r, err := c.Authorize(context.Background(), &authzv1.AuthorizeRequest{})
	if err != nil || !r.GetDecision().GetAllow() || f.calls != 2 {
		t.Fatalf("Authorize: %v %v after %d calls; want the allow after 2", r, err, f.calls)
	}
}

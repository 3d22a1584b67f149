package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetest"
)

// fakeUpstreamServer is a runtime on a memory store over fake catalog,
// authz and skills, returning the authz fake (its AuthorizeCalls count
// the decisions asked).
func fakeUpstreamServer(t *testing.T, cfg Config) (*Server, runtimestore.Store, *runtimetest.FakeAuthz) {
	t.Helper()
	az := runtimetest.NewFakeAuthz()
	addr := runtimetest.ServeAll(t, runtimetest.NewFakeCatalog(), az, runtimetest.NewFakeSkills())
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
	return s, st, az
}

// fakeStream is a server stream of RunTurn/ResumeRun that records events.
type fakeStream[T any] struct {
	grpc.ServerStream
	ctx  context.Context
	sent []*T
}

func (f *fakeStream[T]) Context() context.Context { return f.ctx }
func (f *fakeStream[T]) Send(m *T) error          { f.sent = append(f.sent, m); return nil }

// Call context only from the server side (docs/architecture.md §5): a
// subagent's thread cannot be acted on from a request, and a run_id must
// name a RUNNING run of the thread. Each case asserts the refusal and that
// nothing ran: no authz decision asked, no file written, no message stored.
func TestCallContextHostileCases(t *testing.T) {
	s, st, az := fakeUpstreamServer(t, Config{})
	ctx := context.Background()
	pr, err := s.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	parent := pr.GetThread().GetThreadId()
	child, err := loopAdapter{s}.CreateChildThread(ctx, runtimeloop.ChildSpec{ParentThreadID: parent, ParentRunID: "r1", SubagentType: "general-purpose"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*runtimev1.Run{
		{RunId: "done", ThreadId: parent, Status: runtimev1.RunStatus_RUN_STATUS_COMPLETED, StartTime: timestamppb.Now()},
		{RunId: "waiting", ThreadId: parent, Status: runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT, StartTime: timestamppb.Now()},
		{RunId: "live", ThreadId: parent, Status: runtimev1.RunStatus_RUN_STATUS_RUNNING, StartTime: timestamppb.Now()},
		{RunId: "childrun", ThreadId: child, Status: runtimev1.RunStatus_RUN_STATUS_RUNNING, StartTime: timestamppb.Now()},
	} {
		if err := st.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string) *runtimev1.ToolCall {
		a, _ := structpb.NewStruct(map[string]any{"path": "/mnt/user-data/workspace/" + path, "content": "x"})
		return &runtimev1.ToolCall{Id: "c-" + path, Name: "write_file", Arguments: a}
	}
	messages := func(th string) int {
		ms, _, _ := st.ListMessages(ctx, th, runtimestore.Page{Limit: 1000})
		return len(ms)
	}
	exists := func(th, path string) bool {
		_, err := os.Stat(filepath.Join(s.ws.ThreadDir(th), "user-data", "workspace", path))
		return err == nil
	}

	cases := []struct {
		name   string
		thread string
		path   string
		run    func() error
		code   codes.Code
	}{
		{"ExecuteToolCall on a subagent's thread", child, "a.txt", func() error {
			_, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: child, ToolCall: write("a.txt")})
			return err
		}, codes.NotFound},
		{"ExecuteToolCallStream on a subagent's thread", child, "b.txt", func() error {
			return s.ExecuteToolCallStream(&runtimev1.ExecuteToolCallStreamRequest{ThreadId: child, ToolCall: write("b.txt")}, &fakeStream[runtimev1.ExecuteToolCallStreamResponse]{ctx: ctx})
		}, codes.NotFound},
		{"ExecuteToolCall naming the child's running run", child, "c.txt", func() error {
			_, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: child, RunId: "childrun", ToolCall: write("c.txt")})
			return err
		}, codes.NotFound},
		{"AssembleTools on a subagent's thread", child, "", func() error {
			_, err := s.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: child})
			return err
		}, codes.NotFound},
		{"RunTurn on a subagent's thread", child, "", func() error {
			return s.RunTurn(&runtimev1.RunTurnRequest{ThreadId: child, Message: "hi"}, &fakeStream[runtimev1.RunTurnResponse]{ctx: ctx})
		}, codes.NotFound},
		{"ResumeRun on a subagent's thread", child, "", func() error {
			return s.ResumeRun(&runtimev1.ResumeRunRequest{ThreadId: child, RunId: "childrun", Answer: "yes"}, &fakeStream[runtimev1.ResumeRunResponse]{ctx: ctx})
		}, codes.NotFound},
		{"run_id of no run", parent, "d.txt", func() error {
			_, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: parent, RunId: "invented", ToolCall: write("d.txt")})
			return err
		}, codes.NotFound},
		{"run_id of a completed run", parent, "e.txt", func() error {
			_, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: parent, RunId: "done", ToolCall: write("e.txt")})
			return err
		}, codes.NotFound},
		{"run_id of a run waiting for input", parent, "f.txt", func() error {
			_, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: parent, RunId: "waiting", ToolCall: write("f.txt")})
			return err
		}, codes.NotFound},
		{"run_id of another thread's run", parent, "g.txt", func() error {
			_, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: parent, RunId: "childrun", ToolCall: write("g.txt")})
			return err
		}, codes.NotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			authz, msgs := az.AuthorizeCalls.Load(), messages(tc.thread)
			err := tc.run()
			if status.Code(err) != tc.code {
				t.Fatalf("err %v, want %s", err, tc.code)
			}
			if got := az.AuthorizeCalls.Load(); got != authz {
				t.Errorf("authz was asked %d times", got-authz)
			}
			if got := messages(tc.thread); got != msgs {
				t.Errorf("%d messages stored", got-msgs)
			}
			if tc.path != "" && exists(tc.thread, tc.path) {
				t.Errorf("%s was written", tc.path)
			}
		})
	}

	// What stays allowed: a client-side loop (no run_id), a RUNNING run of
	// the thread, reading the child, and the agent loop acting on it.
	for _, run := range []string{"", "live"} {
		res, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: parent, RunId: run, ToolCall: write("ok" + run + ".txt")})
		if err != nil || res.GetResult().GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatalf("run_id %q: %v %v", run, res, err)
		}
	}
	if _, err := s.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: child}); err != nil {
		t.Fatalf("reading the child: %v", err)
	}
	res, err := loopAdapter{s}.Execute(ctx, child, "childrun", runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED, write("loop.txt"), func(*typev1.Notification) {})
	if err != nil || res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !exists(child, "loop.txt") {
		t.Fatalf("the loop's own call on the child: %v %v", res, err)
	}
	if _, err := (loopAdapter{s}).Assemble(ctx, child, "", runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED); err != nil {
		t.Fatalf("the loop's own assembly of the child: %v", err)
	}
}

// report.denied names the tools authz removed for admins only.
func TestAssemblyReportDeniedForAdminsOnly(t *testing.T) {
	s, _, az := fakeUpstreamServer(t, Config{})
	az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_TOOL, "ls")
	for _, tc := range []struct {
		name  string
		roles []string
		want  bool
	}{{"admin", []string{"admin"}, true}, {"viewer", []string{"viewer"}, false}} {
		ctx := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindUser, Principal: &typev1.Principal{Subject: tc.name, Tenant: "default", Roles: tc.roles}})
		th, err := s.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th.GetThread().GetThreadId()})
		if err != nil {
			t.Fatal(err)
		}
		got := slices.ContainsFunc(r.GetReport().GetDenied(), func(d string) bool { return strings.HasPrefix(d, "ls") })
		if got != tc.want || (!tc.want && len(r.GetReport().GetDenied()) != 0) {
			t.Errorf("%s: report.denied %v", tc.name, r.GetReport().GetDenied())
		}
		for _, ts := range r.GetTools() {
			if ts.GetName() == "ls" {
				t.Errorf("%s: the denied tool is listed", tc.name)
			}
		}
	}
}

package runtime_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/runtime"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodelalt"
	"github.com/toolplane/toolplane/services/runtime/runtimepg"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestRunsAcrossReplicas: two whole Toolplane processes (all four services,
// in process) on one PostgreSQL database, as two replicas behind a load
// balancer. A run belongs to the replica executing it; the other replica's
// start-up and sweeps leave it alone while its lease is renewed, refuse a
// second run in its thread (RUN_ACTIVE), and its CancelRun stops it through
// the database; ResumeRun continues a waiting run on the other replica; a
// run whose owner stopped renewing is INTERRUPTED within the lease
// (docs/decisions/0081-run-leases.md).
func TestRunsAcrossReplicas(t *testing.T) {
	const lease = time.Second
	brain := func(c fakemodelalt.Conversation) fakemodelalt.Turn {
		l := c.Last()
		switch {
		case l.Role == "user" && strings.Contains(l.Text, "slow please"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "tool_search", Args: `{"query":"select:everything_trigger-long-running-operation"}`}}}
		case l.Role == "tool" && c.Has("everything_trigger-long-running-operation") && !strings.Contains(l.Text, "Long running"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "everything_trigger-long-running-operation", Args: `{"duration":30,"steps":30}`}}}
		case l.Role == "user" && strings.Contains(l.Text, "Oslo"):
			return fakemodelalt.Turn{Text: "Oslo it is: sunny."}
		case l.Role == "user" && strings.Contains(l.Text, "weather"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "ask_clarification", Args: `{"question":"Which city?"}`}}}
		}
		return fakemodelalt.Turn{Text: "done"}
	}
	fm := fakemodelalt.Start(brain)
	defer fm.Close()
	dsn := pgtest.DSN(t)
	onPG := func(c *app.Config) { c.Storage.DSN = dsn; c.Runtime.RunLease = lease }
	a := startLoopSuiteMut(t, runtime.LoopConfig{Models: []runtime.ModelConfig{modelCfg("alt", fm.BaseURL(), false)}}, onPG)
	ctx := context.Background()
	ca := a.rt()

	// A run executing on replica A.
	th := a.thread(ca)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	st, err := ca.RunTurn(sctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "slow please"})
	if err != nil {
		t.Fatal(err)
	}
	var runID string
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream before the slow call started: %v", err)
		}
		runID = m.GetEvent().GetRunId()
		if m.GetEvent().GetToolCallStarted().GetName() == "everything_trigger-long-running-operation" {
			break
		}
	}

	// Replica B starts now: its start-up must not interrupt A's run.
	b := startLoopSuiteMut(t, runtime.LoopConfig{Models: []runtime.ModelConfig{modelCfg("alt", fm.BaseURL(), false)}}, onPG)
	cb := b.rt()
	runStatus := func(c runtimev1.RuntimeServiceClient, thread, run string) *runtimev1.Run {
		t.Helper()
		rs, err := c.ListRuns(ctx, &runtimev1.ListRunsRequest{ThreadId: thread})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs.GetRuns() {
			if r.GetRunId() == run {
				return r
			}
		}
		t.Fatalf("run %s not listed: %v", run, rs.GetRuns())
		return nil
	}
	if r := runStatus(cb, th, runID); r.GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING {
		t.Fatalf("replica B's start-up changed A's run: %v", r)
	}
	// Three lease periods later (B has swept about nine times) it still runs.
	time.Sleep(3 * lease)
	if r := runStatus(cb, th, runID); r.GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING {
		t.Fatalf("A's renewed run was interrupted by a sweep: %v", r)
	}
	// One active run per thread across replicas.
	if st2, err := cb.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "me too"}); err == nil {
		if _, err := st2.Recv(); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already active") {
			t.Fatalf("second run on replica B while A runs the thread: %v", err)
		}
	}
	// CancelRun on B stops the run on A within 2 s.
	t0 := time.Now()
	cr, err := cb.CancelRun(ctx, &runtimev1.CancelRunRequest{ThreadId: th, RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	if cr.GetRun().GetStatus() != runtimev1.RunStatus_RUN_STATUS_CANCELLED || took > 2*time.Second {
		t.Fatalf("CancelRun on B = %v after %s; want CANCELLED within 2s", cr.GetRun(), took)
	}
	t.Logf("cross-replica CancelRun answered CANCELLED after %s", took.Round(time.Millisecond))
	evs := collect(t, st)
	if lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_CANCELLED {
		t.Fatalf("A's stream after B's cancel: %v", evs)
	}

	// A tool call retried on the other replica returns A's stored result;
	// the MCP tool ran once, on A.
	thc := a.thread(ca)
	if _, err := execCall(ctx, ca, thc, "s-1", "tool_search", map[string]any{"query": "select:everything_echo"}); err != nil {
		t.Fatal(err)
	}
	beforeA, beforeB := mcpCalls(t, a.httpAddr), mcpCalls(t, b.httpAddr)
	first, err := execCall(ctx, ca, thc, "echo-x", "everything_echo", map[string]any{"message": "across"})
	if err != nil || first.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		t.Fatalf("call on A = %v, %v", first, err)
	}
	retry, err := execCall(ctx, cb, thc, "echo-x", "everything_echo", map[string]any{"message": "across"})
	if err != nil || !proto.Equal(first, retry) {
		t.Fatalf("retry on B = %v, %v; want A's %v", retry, err, first)
	}
	if na, nb := mcpCalls(t, a.httpAddr)-beforeA, mcpCalls(t, b.httpAddr)-beforeB; na != 1 || nb != 0 {
		t.Fatalf("MCP tool ran %d times on A and %d on B; want 1 and 0", na, nb)
	}

	// A clarification asked on A is answered on B.
	th2 := a.thread(ca)
	st, err = ca.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th2, Message: "what's the weather?"})
	if err != nil {
		t.Fatal(err)
	}
	evs = collect(t, st)
	if lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT {
		t.Fatalf("events %v", evs)
	}
	rs, err := cb.ResumeRun(ctx, &runtimev1.ResumeRunRequest{ThreadId: th2, RunId: evs[0].GetRunId(), Answer: "Oslo"})
	if err != nil {
		t.Fatal(err)
	}
	asked := evs
	if evs = collect(t, rs); lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("resume on B: %v", evs)
	}
	// The run's event numbers continue on B after A's last one
	// (docs/decisions/0089-run-event-seq.md): 1..n on A, n+1.. on B.
	for i, e := range append(append([]*runtimev1.RunEvent(nil), asked...), evs...) {
		if e.GetSeq() != int64(i+1) {
			t.Fatalf("event %d of the run (asked on A, resumed on B) has seq %d, want %d: %v then %v", i, e.GetSeq(), i+1, asked, evs)
		}
	}

	// A replica that stops renewing (here: a run written by a replica id no
	// process has) is interrupted by the sweeps of the living ones.
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st3, err := runtimepg.Open(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	th3 := a.thread(ca)
	now := time.Now()
	if err := st3.StartRun(ctx, &runtimev1.Run{RunId: "ghost", ThreadId: th3, Status: runtimev1.RunStatus_RUN_STATUS_RUNNING, StartTime: timestamppb.New(now)},
		runtimestore.Lease{Owner: "dead-replica", Until: now.Add(lease)}, now); err != nil {
		t.Fatal(err)
	}
	deadline := now.Add(lease + lease/3 + 2*time.Second)
	for {
		r := runStatus(cb, th3, "ghost")
		if r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_INTERRUPTED {
			if !strings.HasPrefix(r.GetReason(), "lease_expired:") {
				t.Fatalf("reason %q", r.GetReason())
			}
			t.Logf("dead replica's run interrupted %s after its lease ended", time.Since(now.Add(lease)).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead replica's run still %v after lease + lease/3 + 2s", r.GetStatus())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPromotionsAcrossReplicas: 100 concurrent tool_search calls on one
// thread, spread over two runtime replicas on one PostgreSQL database,
// keep every promotion (the reducer runs in UpdateThread's transaction
// under the thread's row lock, docs/decisions/0080-postgresql-stores.md),
// and the thread holds exactly one tool message per call.
func TestPromotionsAcrossReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	onPG := func(c *app.Config) { c.Storage.DSN = dsn }
	a, b := newSuite(t, onPG), newSuite(t, onPG)
	ca, cb := a.rt(aliceToken), b.rt(aliceToken)
	ctx := context.Background()
	th := newThread(t, ca, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, ToolCall: &runtimev1.ToolCall{
				Id: fmt.Sprintf("c%d", i), Name: "tool_search", Arguments: args(t, map[string]any{"query": fmt.Sprintf("select:bulk_tool_%03d", i)})}})
			if err == nil && r.GetResult().GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
				err = fmt.Errorf("call %d: %v", i, r.GetResult())
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range map[string]runtimev1.RuntimeServiceClient{"A": ca, "B": cb} {
		g, err := c.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(g.GetThread().GetPromoted().GetNames()); n != 100 {
			t.Fatalf("replica %s sees %d of 100 promotions", name, n)
		}
	}
	ms, err := cb.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range ms.GetMessages() {
		seen[m.GetToolCallId()]++
	}
	if len(seen) != 100 {
		t.Fatalf("tool messages for %d distinct calls; want 100", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("call %s has %d tool messages", id, n)
		}
	}
}

// TestAssemblyNeverOlderThanAnnouncedPolicy: with several authz replicas,
// the one answering FilterResources may lag behind the version WatchPolicy
// (from another replica) announced. The runtime then neither serves nor
// caches that assembly: it rebuilds until a replica answers at the
// announced version, and refuses (UNAVAILABLE, retryable) when none does
// within about a second (docs/decisions/0085-policy-propagation.md).
func TestAssemblyNeverOlderThanAnnouncedPolicy(t *testing.T) {
	s := newSuite(t, nil)
	c := s.rt(aliceToken)
	ctx := context.Background()
	th := newThread(t, c, nil)
	before := assemble(t, c, th, "").GetPolicyVersion()
	s.az.Lag.Store(1)
	s.az.Bump()
	time.Sleep(200 * time.Millisecond) // the watch stream delivers the bump
	go func() { time.Sleep(150 * time.Millisecond); s.az.Lag.Store(0) }()
	t0 := time.Now()
	r := assemble(t, c, th, "")
	if r.GetPolicyVersion() != before+1 || time.Since(t0) < 100*time.Millisecond {
		t.Fatalf("assembly at policy version %d after %s; want %d, after the lagging replica caught up", r.GetPolicyVersion(), time.Since(t0), before+1)
	}
	s.az.Lag.Store(1)
	s.az.Bump()
	time.Sleep(200 * time.Millisecond)
	_, err := c.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "older than version") {
		t.Fatalf("assembly with every authz answer behind the announced version = %v; want UNAVAILABLE", err)
	}
	s.az.Lag.Store(0)
	if r := assemble(t, c, th, ""); r.GetPolicyVersion() != before+2 {
		t.Fatalf("after the catch-up: version %d; want %d", r.GetPolicyVersion(), before+2)
	}
}

// startAuthzProcess runs an authz-only Toolplane (as `toolplane serve
// --services authz`) on dsn and returns its gRPC and HTTP addresses and its
// stop function.
func startAuthzProcess(t *testing.T, dsn, serviceToken string) (grpcAddr, httpAddr string, stop func()) {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.Server.Services = []string{"authz"}
	cfg.Server.DataDir = t.TempDir()
	cfg.Server.GRPCAddr, cfg.Server.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Server.DrainPeriod, cfg.Server.ShutdownTimeout = time.Millisecond, 5*time.Second
	cfg.Storage.DSN = dsn
	cfg.Auth.Enabled = true
	cfg.Auth.Tokens = []config.Token{
		{Name: "runtime", SHA256: sha(serviceToken), Kind: "service", Subject: "svc:runtime", Roles: []string{"service"}},
		{Name: "admin", SHA256: sha(adminToken), Kind: "user", Subject: "root", Roles: []string{"admin"}},
	}
	au, err := app.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := app.Listen(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- app.Run(ctx, &cfg, au, lis, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnReady: func(string, string) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("authz stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("authz not ready after 30s")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return lis.GRPC.Addr().String(), lis.HTTP.Addr().String(), stop
}

// authorizeCount is an authz process's count of handled Authorize RPCs.
func authorizeCount(t *testing.T, httpAddr string) int {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "grpc_server_handled_total{") && strings.Contains(l, `grpc_method="Authorize"`) {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			n += int(v)
		}
	}
	return n
}

// TestRuntimeBalancesOverTwoAuthz: the runtime's authz upstream is a
// comma-separated list of two authz processes on one PostgreSQL database;
// its calls reach both (gRPC round_robin, docs/decisions/0083), and when one
// stops the calls go on through the other.
func TestRuntimeBalancesOverTwoAuthz(t *testing.T) {
	dsn := pgtest.DSN(t)
	const svcToken = "runtime-service-token-0123456789"
	aGRPC, aHTTP, stopA := startAuthzProcess(t, dsn, svcToken)
	bGRPC, bHTTP, _ := startAuthzProcess(t, dsn, svcToken)
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(svcToken), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSuite(t, func(c *app.Config) {
		c.Runtime.Upstreams.Authz.Address = aGRPC + "," + bGRPC
		c.Runtime.Upstreams.Authz.TokenFile = tokFile
	})
	c := s.rt(aliceToken)
	ctx := context.Background()
	th := newThread(t, c, nil)
	run := func(n int, tag string) int {
		ok := 0
		for i := 0; i < n; i++ {
			r, err := execCall(ctx, c, th, fmt.Sprintf("%s-%d", tag, i), "ls", map[string]any{"path": "/mnt/user-data/workspace"})
			if err == nil && r.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
				ok++
			}
		}
		return ok
	}
	a0, b0 := authorizeCount(t, aHTTP), authorizeCount(t, bHTTP)
	if ok := run(20, "both"); ok != 20 {
		t.Fatalf("%d of 20 calls succeeded with both authz up", ok)
	}
	da, db := authorizeCount(t, aHTTP)-a0, authorizeCount(t, bHTTP)-b0
	if da < 5 || db < 5 {
		t.Fatalf("Authorize calls per authz process = %d, %d; want both used (round_robin)", da, db)
	}
	stopA()
	time.Sleep(300 * time.Millisecond) // the balancer sees the closed connection
	if ok := run(10, "one"); ok != 10 {
		t.Fatalf("%d of 10 calls succeeded with one authz of two stopped", ok)
	}
	t.Logf("Authorize calls: %d on A, %d on B with both up; 10 of 10 through B after A stopped", da, db)
}

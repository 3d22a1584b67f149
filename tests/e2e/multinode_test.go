//go:build e2e

package e2e

// The multi-node kill test of docs/architecture.md §1 (scale-out): one
// PostgreSQL (internal/pgtest), two runtime, two authz, two catalog and one
// skills process, each the real `toolplane serve --services <svc>` on one
// database; the runtimes reach both replicas of catalog and authz through
// an address list (docs/decisions/0083-client-side-load-balancing.md), and
// so does the test's client. A bounded load (threads, tool_search
// promotions, promoted calls of real npm MCP tools, agent-loop runs, policy
// edits) runs while one replica of each replicated service is killed with
// SIGKILL and restarted. At the end: every acknowledged write is there,
// every call succeeded or failed with a retryable status (counted), and no
// run is RUNNING after the lease timeout.
//
// Short form (go test, make test-e2e): one kill of each, about 20 s of load.
// Long form: make test-multinode-long (TOOLPLANE_MULTINODE=long, kill
// cycles for TOOLPLANE_MULTINODE_LOAD, default 2m30s, at most 4m; the
// whole test then takes about 4 minutes, verification included).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/testkit"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodelalt"
)

// mnLease is runtime.run_lease of the multi-node runtimes: a killed
// runtime's runs must be INTERRUPTED within it (plus a third, the sweep
// period, and a margin for the loaded machine).
const mnLease = 2 * time.Second

// mnNode is one `toolplane serve` of the multi-node suite, restartable on
// the same ports and data directory.
type mnNode struct {
	name string
	opts testkit.Options
	mu   sync.Mutex
	p    *testkit.Process
}

func (n *mnNode) proc() *testkit.Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.p
}

func (n *mnNode) start(t *testing.T) {
	t.Helper()
	o := n.opts
	o.Wait = testkit.WaitNone
	p := testkit.Start(t, o)
	n.mu.Lock()
	n.p = p
	n.mu.Unlock()
}

func (n *mnNode) waitServing(t *testing.T, timeout time.Duration) {
	t.Helper()
	if err := n.proc().WaitHealth(t, "", healthpb.HealthCheckResponse_SERVING, timeout); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", n.name, err, tailText(n.proc().Stderr(), 3000))
	}
}

// kill sends SIGKILL (no drain, no shutdown hooks) and waits for the exit.
func (n *mnNode) kill(t *testing.T) {
	t.Helper()
	p := n.proc()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", n.name, err)
	}
	if _, ok := p.WaitExit(10 * time.Second); !ok {
		t.Fatalf("%s did not exit after SIGKILL", n.name)
	}
	p.Stop(t) // marks it stopped: the cleanup does not expect exit 0
}

func tailText(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// mnSuite is the running multi-node deployment.
type mnSuite struct {
	dsn   string
	nodes map[string]*mnNode // runtime-0/1, authz-0/1, catalog-0/1, skills-0
	model *fakemodelalt.Server
}

func (s *mnSuite) addrs(svc string) string {
	var out []string
	for i := 0; i < 2; i++ {
		if n, ok := s.nodes[fmt.Sprintf("%s-%d", svc, i)]; ok {
			out = append(out, n.opts.GRPCAddr)
		}
	}
	return strings.Join(out, ",")
}

// startMultiNode starts the seven processes on one fresh database.
func startMultiNode(t *testing.T, model *fakemodelalt.Server) *mnSuite {
	t.Helper()
	s := &mnSuite{dsn: pgtest.DSN(t), nodes: map[string]*mnNode{}, model: model}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "service.token")
	if err := os.WriteFile(tokenFile, []byte(serviceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Both catalog replicas read the same extensions file: with the catalog
	// configuration in the database, one imports it and the other follows;
	// without, each reads it. The test holds either way.
	ext := filepath.Join(dir, "extensions_config.json")
	everything := testkit.NPMServer(t, "server-everything")
	if err := os.WriteFile(ext, []byte(fmt.Sprintf(`{"mcpServers": {"everything": {"command": "node", "args": [%q, "stdio"]}}}`, everything)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "auth:\n  enabled: true\n" + tokensYAML() + `server:
  drain_period: 10ms
  log:
    level: warn
  rate_limits:
    - role: default
      decisions_per_second: 1000000
      decisions_burst: 1000000
      writes_per_second: 1000000
      writes_burst: 1000000
`
	env := []string{"TOOLPLANE_STORAGE_DSN=" + s.dsn}
	workspaces := filepath.Join(dir, "shared-data") // the runtimes' shared workspace volume
	for _, svc := range []string{"authz", "catalog", "skills", "runtime"} {
		count := 2
		if svc == "skills" {
			count = 1
		}
		for i := 0; i < count; i++ {
			name := fmt.Sprintf("%s-%d", svc, i)
			n := &mnNode{name: name, opts: testkit.Options{
				Args:     []string{"--services", svc},
				Env:      env,
				Config:   base,
				GRPCAddr: testkit.FreeAddr(t), HTTPAddr: testkit.FreeAddr(t),
				DataDir:      filepath.Join(dir, name),
				StartTimeout: 90 * time.Second,
			}}
			if svc == "catalog" {
				// A catalog replica is ready (gRPC health SERVING) once its
				// MCP servers are: the runtimes balance only over ready
				// replicas (runtime upstream dials check health), so a
				// restarted replica gets no call before it has the tools.
				n.opts.Args = append(n.opts.Args, "--extensions-config", ext)
				n.opts.Config = base + "catalog:\n  ready_requires: all\n"
			}
			s.nodes[name] = n
		}
	}
	rtCfg := base + fmt.Sprintf(`runtime:
  run_lease: %s
  tool_call_timeout: 10s
  upstream_timeout: 5s
  upstreams:
`, mnLease)
	for _, up := range []string{"catalog", "authz", "skills"} {
		rtCfg += fmt.Sprintf("    %s:\n      address: %s\n      token_file: %s\n", up, s.addrs(up), tokenFile)
	}
	rtCfg += fmt.Sprintf(`  loop:
    models:
      - name: fake
        base_url: %s
        stream: true
        max_retries: 0
        timeout: 30s
`, model.BaseURL())
	for i := 0; i < 2; i++ {
		n := s.nodes[fmt.Sprintf("runtime-%d", i)]
		n.opts.Config = rtCfg
		n.opts.DataDir = workspaces
	}
	names := s.sorted()
	for _, name := range names {
		s.nodes[name].start(t)
	}
	for _, name := range names {
		s.nodes[name].waitServing(t, 90*time.Second)
	}
	return s
}

func (s *mnSuite) sorted() []string {
	var names []string
	for k := range s.nodes {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// dialList connects to every address of a list, round-robin, as the runtime does.
func dialList(t *testing.T, addrs, token string) *grpc.ClientConn {
	t.Helper()
	c, err := grpcx.Dial(addrs, grpcx.DialOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// retryable is the set of gRPC codes a client retries during failover.
func retryable(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}

// mnStats counts outcomes of the load.
type mnStats struct {
	mu        sync.Mutex
	ok        map[string]int // operation → acknowledged
	retryable map[string]int // "operation CODE" → count
	fatal     []string       // non-retryable failures
}

func (m *mnStats) ack(op string) {
	m.mu.Lock()
	m.ok[op]++
	m.mu.Unlock()
}

func (m *mnStats) retry(op, why string) {
	m.mu.Lock()
	m.retryable[op+" "+why]++
	m.mu.Unlock()
}

func (m *mnStats) fail(format string, args ...any) {
	m.mu.Lock()
	if len(m.fatal) < 50 {
		m.fatal = append(m.fatal, fmt.Sprintf(format, args...))
	}
	m.mu.Unlock()
}

func (m *mnStats) sum(set map[string]int) int {
	n := 0
	for _, v := range set {
		n += v
	}
	return n
}

// classify records err of op: true when it is retryable.
func (m *mnStats) classify(op string, err error) bool {
	c := status.Code(err)
	if retryable(c) {
		m.retry(op, c.String())
		return true
	}
	m.fail("%s: non-retryable %s: %v", op, c, err)
	return false
}

// mnAcked is what the clients were told was written.
type mnAcked struct {
	mu       sync.Mutex
	threads  map[string][]string // thread → tools whose promotion was acknowledged
	runs     map[string]string   // run id → thread (COMPLETED runs: messages stored)
	policies map[string]bool     // target of each acknowledged policy line
	killed   []string            // runs that were executing on a replica when it was killed (thread/run)
}

// mnLoad drives the suite until stop; it returns when every worker is done.
type mnLoad struct {
	rt    runtimev1.RuntimeServiceClient // both runtime replicas, round-robin
	admin authzv1.AuthzServiceClient     // both authz replicas, round-robin
	st    *mnStats
	ack   *mnAcked
	seq   atomic.Int64
}

func (l *mnLoad) id(prefix string) string { return fmt.Sprintf("%s%d", prefix, l.seq.Add(1)) }

// call runs one ExecuteToolCall to success, as a client would during
// failover: a retryable failure is retried with the same tool_call.id
// (idempotent: the stored result comes back), twice, then with a fresh id;
// it gives up at the deadline. It reports whether the call was acknowledged.
func (l *mnLoad) call(op, thread, tool string, args map[string]any, deadline time.Time) bool {
	a, _ := structpb.NewStruct(args)
	callID := l.id("c")
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		if attempt > 0 && attempt%3 == 0 {
			callID = l.id("c")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		r, err := l.rt.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: thread, ToolCall: &runtimev1.ToolCall{Id: callID, Name: tool, Arguments: a}})
		cancel()
		if err != nil {
			if !l.st.classify(op, err) {
				return false
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		res := r.GetResult()
		if res.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			l.st.ack(op)
			return true
		}
		// A tool result that is an error: what failover produces is a
		// transport failure of the upstream (RUNTIME: a CallTool in flight
		// on the killed catalog replica, never retried by the runtime) or
		// a server not connected on that catalog replica
		// (tool.server_unavailable); a new call id runs it again. Any
		// other refusal is a defect — authz.evaluator_error too: with one
		// authz replica alive the runtime retries Authorize there
		// (docs/decisions/0171-authorize-retried-on-unavailable.md).
		if res.GetErrorKind() == runtimev1.ErrorKind_ERROR_KIND_RUNTIME || res.GetReasonCode() == "tool.server_unavailable" {
			l.st.retry(op, "result "+strings.TrimPrefix(res.GetErrorKind().String(), "ERROR_KIND_")+" "+res.GetReasonCode())
			callID = l.id("c")
			time.Sleep(100 * time.Millisecond)
			continue
		}
		l.st.fail("%s on %s: %s %s %s: %v", op, thread, res.GetStatus(), res.GetErrorKind(), res.GetReasonCode(), res.GetContent())
		return false
	}
	l.st.retry(op, "gave up at the deadline")
	return false
}

// threadWorker: create a thread, promote two tools (two promotions of one
// thread, each acknowledged), call both promoted tools.
func (l *mnLoad) threadWorker(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		deadline := time.Now().Add(20 * time.Second)
		var thread string
		for thread == "" && time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
			r, err := l.rt.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
			cancel()
			if err != nil {
				if !l.st.classify("CreateThread", err) {
					return
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			thread = r.GetThread().GetThreadId()
			l.st.ack("CreateThread")
			l.ack.mu.Lock()
			l.ack.threads[thread] = nil
			l.ack.mu.Unlock()
		}
		if thread == "" {
			l.st.retry("CreateThread", "gave up at the deadline")
			continue
		}
		for _, tool := range []string{"everything_echo", "everything_get-sum"} {
			if l.call("tool_search", thread, "tool_search", map[string]any{"query": "select:" + tool}, deadline) {
				l.ack.mu.Lock()
				l.ack.threads[thread] = append(l.ack.threads[thread], tool)
				l.ack.mu.Unlock()
			}
		}
		l.call("promoted call", thread, "everything_echo", map[string]any{"message": "mn " + thread}, deadline)
		l.call("promoted call", thread, "everything_get-sum", map[string]any{"a": 2, "b": 3}, deadline)
	}
}

// policyWorker adds one harmless policy line at a time (a role nobody has)
// through either authz replica.
func (l *mnLoad) policyWorker(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(150 * time.Millisecond):
		}
		target := l.id("mn-target-")
		line := &authzv1.Policy{Role: "mn-role", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL,
			Target: target, Action: authzv1.Action_ACTION_LIST, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
			_, err := l.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{line}})
			cancel()
			if err == nil {
				l.st.ack("AddPolicies")
				l.ack.mu.Lock()
				l.ack.policies[target] = true
				l.ack.mu.Unlock()
				break
			}
			if !l.st.classify("AddPolicies", err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// runTurn runs one agent-loop turn on c and reports its final status ("" =
// the stream broke) and run id.
func runTurn(c runtimev1.RuntimeServiceClient, thread, msg string, started chan<- string) (runtimev1.RunStatus, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: thread, Message: msg})
	if err != nil {
		return 0, "", err
	}
	runID := ""
	for {
		m, err := st.Recv()
		if err != nil {
			return 0, runID, err
		}
		ev := m.GetEvent()
		if runID == "" && ev.GetRunId() != "" {
			runID = ev.GetRunId()
		}
		if started != nil && ev.GetToolCallStarted() != nil {
			started <- runID
			started = nil
		}
		if s := ev.GetStatus(); s != runtimev1.RunStatus_RUN_STATUS_UNSPECIFIED && s != runtimev1.RunStatus_RUN_STATUS_RUNNING {
			return s, runID, nil
		}
	}
}

// runWorker runs agent-loop turns (tool_search, a promoted call, an
// answer, each model reply slowed so that runs are in flight at a kill).
func (l *mnLoad) runWorker(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		r, err := l.rt.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
		cancel()
		if err != nil {
			if !l.st.classify("CreateThread", err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		thread := r.GetThread().GetThreadId()
		l.st.ack("CreateThread")
		l.ack.mu.Lock()
		l.ack.threads[thread] = nil
		l.ack.mu.Unlock()
		s, runID, err := runTurn(l.rt, thread, "mn run "+thread, nil)
		switch {
		case err != nil:
			l.st.classify("RunTurn", err)
		case s == runtimev1.RunStatus_RUN_STATUS_COMPLETED:
			l.st.ack("RunTurn")
			l.ack.mu.Lock()
			l.ack.runs[runID] = thread
			l.ack.mu.Unlock()
		default:
			// A run whose model or tool failed during a failover ends
			// FAILED with a reason; it is an outcome the client sees, not
			// a lost write.
			l.st.retry("RunTurn", "run "+s.String())
		}
	}
}

// mnBrain: "mn run <thread>" → tool_search for echo → echo → answer; "mn
// slow" → tool_search, then a reply delayed until the replica is killed.
func mnBrain(slow <-chan struct{}) fakemodelalt.Brain {
	return func(c fakemodelalt.Conversation) fakemodelalt.Turn {
		l := c.Last()
		var first string
		for _, m := range c.Msgs {
			if m.Role == "user" {
				first = m.Text
			}
		}
		time.Sleep(150 * time.Millisecond) // runs stay in flight long enough to be killed mid-way
		switch {
		case l.Role == "user":
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "tool_search", Args: `{"query":"select:everything_echo"}`}}}
		case l.Role == "tool" && strings.Contains(first, "mn slow"):
			select {
			case <-slow:
			case <-time.After(30 * time.Second):
			}
			return fakemodelalt.Turn{Text: "slow done"}
		case l.Role == "tool" && c.Has("everything_echo") && !strings.Contains(l.Text, "Echo:"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "everything_echo", Args: `{"message":"loop"}`}}}
		}
		return fakemodelalt.Turn{Text: "done: " + first}
	}
}

// TestMultiNodeKill: see the file comment. The figures are printed with
// t.Log (run with -v to see them).
func TestMultiNodeKill(t *testing.T) {
	long := os.Getenv("TOOLPLANE_MULTINODE") == "long"
	load := 20 * time.Second
	if long {
		load = 150 * time.Second
		if d, err := time.ParseDuration(os.Getenv("TOOLPLANE_MULTINODE_LOAD")); err == nil && d > 0 {
			load = min(d, 4*time.Minute)
		}
	}
	slow := make(chan struct{})
	var slowOnce sync.Once
	releaseSlow := func() { slowOnce.Do(func() { close(slow) }) }
	defer releaseSlow()
	model := fakemodelalt.Start(mnBrain(slow))
	defer model.Close()
	tb := time.Now()
	testkit.Binary(t) // built once per test process; not part of the start-up figure
	if d := time.Since(tb); d > time.Second {
		t.Logf("built the binary in %.1fs", d.Seconds())
	}
	t0 := time.Now()
	s := startMultiNode(t, model)
	t.Logf("seven processes serving in %.1fs", time.Since(t0).Seconds())

	l := &mnLoad{
		rt:    runtimev1.NewRuntimeServiceClient(dialList(t, s.addrs("runtime"), userToken)),
		admin: authzv1.NewAuthzServiceClient(dialList(t, s.addrs("authz"), adminToken)),
		st:    &mnStats{ok: map[string]int{}, retryable: map[string]int{}},
		ack:   &mnAcked{threads: map[string][]string{}, runs: map[string]string{}, policies: map[string]bool{}},
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range []func(<-chan struct{}){l.threadWorker, l.threadWorker, l.threadWorker, l.runWorker, l.runWorker, l.policyWorker} {
		wg.Add(1)
		go func() { defer wg.Done(); w(stop) }()
	}

	// The kill schedule: for each of runtime, catalog and authz, SIGKILL
	// one replica under load and start it again 2 s later. The runtime is
	// killed while a run it owns is executing (a slow run started on it
	// directly), which must then be INTERRUPTED within the lease.
	type killRec struct {
		node                string
		at, back            time.Duration
		interruptedAfter    time.Duration
		interruptedObserved bool
	}
	var kills []killRec
	loadStart := time.Now()
	cycle := 0
	for time.Since(loadStart) < load {
		for _, svc := range []string{"runtime", "catalog", "authz"} {
			if time.Since(loadStart) >= load && cycle > 0 {
				break
			}
			time.Sleep(2 * time.Second)
			victim := s.nodes[fmt.Sprintf("%s-%d", svc, cycle%2)]
			peer := s.nodes[fmt.Sprintf("%s-%d", svc, 1-cycle%2)]
			rec := killRec{node: victim.name, at: time.Since(loadStart)}
			var slowThread, slowRun string
			var slowDone chan struct{}
			if svc == "runtime" {
				c := runtimev1.NewRuntimeServiceClient(victim.proc().Dial(t, grpc.WithPerRPCCredentials(bearerCreds(userToken))))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				th, err := c.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
				cancel()
				if err != nil {
					t.Fatalf("CreateThread on %s: %v", victim.name, err)
				}
				slowThread = th.GetThread().GetThreadId()
				started := make(chan string, 1)
				slowDone = make(chan struct{})
				go func() {
					defer close(slowDone)
					_, _, err := runTurn(c, slowThread, "mn slow", started)
					if err == nil || !retryable(status.Code(err)) {
						l.st.fail("the slow run on %s ended with %v, want a retryable error when its replica is killed", victim.name, err)
					} else {
						l.st.retry("RunTurn", "killed replica "+status.Code(err).String())
					}
				}()
				select {
				case slowRun = <-started:
				case <-time.After(20 * time.Second):
					t.Fatalf("the slow run on %s did not start its tool call", victim.name)
				}
			}
			victim.kill(t)
			killedAt := time.Now()
			if svc == "runtime" {
				<-slowDone
				// The peer's sweep marks the dead replica's run INTERRUPTED.
				pc := runtimev1.NewRuntimeServiceClient(peer.proc().Dial(t, grpc.WithPerRPCCredentials(bearerCreds(userToken))))
				bound := mnLease + mnLease/3 + 3*time.Second
				for time.Since(killedAt) < bound {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					rs, err := pc.ListRuns(ctx, &runtimev1.ListRunsRequest{ThreadId: slowThread})
					cancel()
					if err == nil {
						for _, r := range rs.GetRuns() {
							if r.GetRunId() == slowRun && r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_INTERRUPTED {
								rec.interruptedAfter, rec.interruptedObserved = time.Since(killedAt), true
							}
						}
					}
					if rec.interruptedObserved {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if !rec.interruptedObserved {
					t.Errorf("run %s of killed %s not INTERRUPTED %s after the kill (lease %s)", slowRun, victim.name, bound, mnLease)
				}
				l.ack.mu.Lock()
				l.ack.killed = append(l.ack.killed, slowThread+"/"+slowRun)
				l.ack.mu.Unlock()
			}
			time.Sleep(time.Until(killedAt.Add(2 * time.Second)))
			victim.start(t)
			victim.waitServing(t, 90*time.Second)
			rec.back = time.Since(loadStart)
			kills = append(kills, rec)
		}
		cycle++
		if !long {
			break
		}
	}
	// The short form keeps the load on for its whole duration.
	time.Sleep(time.Until(loadStart.Add(load)))
	close(stop)
	wg.Wait()
	releaseSlow()
	loadTook := time.Since(loadStart)

	// Everything is up again; the deployment must hold every acknowledged write.
	for _, name := range s.sorted() {
		s.nodes[name].waitServing(t, 60*time.Second)
	}
	verify(t, s, l)

	// Figures.
	t.Logf("load %.1fs (%s form), %d kill(s) with restart:", loadTook.Seconds(), map[bool]string{true: "long", false: "short"}[long], len(kills))
	for _, k := range kills {
		line := fmt.Sprintf("  SIGKILL %-10s at %5.1fs, serving again at %5.1fs", k.node, k.at.Seconds(), k.back.Seconds())
		if k.interruptedObserved {
			line += fmt.Sprintf(", its run INTERRUPTED %.2fs after the kill (lease %s)", k.interruptedAfter.Seconds(), mnLease)
		}
		t.Log(line)
	}
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	t.Logf("acknowledged: %v (total %d)", l.st.ok, l.st.sum(l.st.ok))
	t.Logf("retryable failures: %v (total %d)", l.st.retryable, l.st.sum(l.st.retryable))
	if len(l.st.fatal) > 0 {
		t.Errorf("%d non-retryable failure(s):\n%s", len(l.st.fatal), strings.Join(l.st.fatal, "\n"))
	}
	if l.st.ok["tool_search"] == 0 || l.st.ok["promoted call"] == 0 || l.st.ok["RunTurn"] == 0 || l.st.ok["AddPolicies"] == 0 {
		t.Errorf("the load did too little to prove anything: %v", l.st.ok)
	}
}

// verify checks, on a quiet deployment, that every acknowledged write is
// there (from both runtime and both authz replicas) and that no run is
// RUNNING.
func verify(t *testing.T, s *mnSuite, l *mnLoad) {
	t.Helper()
	l.ack.mu.Lock()
	defer l.ack.mu.Unlock()
	ctx := context.Background()
	lost := 0
	promotions := 0
	for i := 0; i < 2; i++ {
		node := s.nodes[fmt.Sprintf("runtime-%d", i)]
		c := runtimev1.NewRuntimeServiceClient(node.proc().Dial(t, grpc.WithPerRPCCredentials(bearerCreds(userToken))))
		for thread, tools := range l.ack.threads {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			r, err := c.GetThread(cctx, &runtimev1.GetThreadRequest{ThreadId: thread})
			cancel()
			if err != nil {
				lost++
				t.Errorf("%s: acknowledged thread %s: %v", node.name, thread, err)
				continue
			}
			have := map[string]bool{}
			for _, n := range r.GetThread().GetPromoted().GetNames() {
				have[n] = true
			}
			for _, tool := range tools {
				if i == 0 {
					promotions++
				}
				if !have[tool] {
					lost++
					t.Errorf("%s: thread %s lost the acknowledged promotion of %s (promoted %v)", node.name, thread, tool, r.GetThread().GetPromoted().GetNames())
				}
			}
		}
		for runID, thread := range l.ack.runs {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			ms, err := c.ListMessages(cctx, &runtimev1.ListMessagesRequest{ThreadId: thread, PageSize: 100})
			cancel()
			if err != nil {
				lost++
				t.Errorf("%s: messages of %s: %v", node.name, thread, err)
				continue
			}
			var user, final bool
			for _, m := range ms.GetMessages() {
				if m.GetRunId() != runID {
					continue
				}
				switch {
				case m.GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_USER && strings.Contains(m.GetContent(), thread):
					user = true
				case m.GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT && strings.HasPrefix(m.GetContent(), "done: "):
					final = true
				}
			}
			if !user || !final {
				lost++
				t.Errorf("%s: completed run %s of %s: user message %v, final answer %v among %d messages", node.name, runID, thread, user, final, len(ms.GetMessages()))
			}
		}
		// No run RUNNING: the kills are over for longer than the lease.
		for thread := range l.ack.threads {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			rs, err := c.ListRuns(cctx, &runtimev1.ListRunsRequest{ThreadId: thread})
			cancel()
			if err != nil {
				t.Errorf("%s: ListRuns %s: %v", node.name, thread, err)
				continue
			}
			for _, r := range rs.GetRuns() {
				if r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_RUNNING {
					t.Errorf("%s: run %s of %s still RUNNING after the load (lease %s)", node.name, r.GetRunId(), thread, mnLease)
				}
			}
		}
		for _, k := range l.ack.killed {
			thread, run, _ := strings.Cut(k, "/")
			rs, err := c.ListRuns(ctx, &runtimev1.ListRunsRequest{ThreadId: thread})
			if err != nil {
				t.Errorf("%s: ListRuns %s: %v", node.name, thread, err)
				continue
			}
			for _, r := range rs.GetRuns() {
				if r.GetRunId() == run && r.GetStatus() != runtimev1.RunStatus_RUN_STATUS_INTERRUPTED {
					t.Errorf("%s: the run %s of a killed replica is %s, want INTERRUPTED", node.name, run, r.GetStatus())
				}
			}
		}
	}
	// Every acknowledged policy line, on both authz replicas, at one version.
	var versions []int64
	for i := 0; i < 2; i++ {
		node := s.nodes[fmt.Sprintf("authz-%d", i)]
		c := authzv1.NewAuthzServiceClient(node.proc().Dial(t, grpc.WithPerRPCCredentials(bearerCreds(adminToken))))
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := c.ListPolicies(cctx, &authzv1.ListPoliciesRequest{})
		cancel()
		if err != nil {
			t.Fatalf("%s: ListPolicies: %v", node.name, err)
		}
		have := map[string]bool{}
		for _, p := range r.GetPolicies() {
			if p.GetRole() == "mn-role" {
				have[p.GetTarget()] = true
			}
		}
		for target := range l.ack.policies {
			if !have[target] {
				lost++
				t.Errorf("%s: acknowledged policy line for %s is missing", node.name, target)
			}
		}
		versions = append(versions, r.GetPolicyVersion())
	}
	if versions[0] != versions[1] {
		t.Errorf("authz replicas at policy versions %v after the load", versions)
	}
	// Both runtimes assemble at the latest policy version (no replica
	// serves an assembly older than a change it was told about).
	for i := 0; i < 2; i++ {
		node := s.nodes[fmt.Sprintf("runtime-%d", i)]
		c := runtimev1.NewRuntimeServiceClient(node.proc().Dial(t, grpc.WithPerRPCCredentials(bearerCreds(userToken))))
		var thread string
		for th := range l.ack.threads {
			thread = th
			break
		}
		testkit.Eventually(t, 5*time.Second, node.name+" assembles at the latest policy version", func() error {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			a, err := c.AssembleTools(cctx, &runtimev1.AssembleToolsRequest{ThreadId: thread})
			if err != nil {
				return err
			}
			if a.GetPolicyVersion() != versions[0] {
				return fmt.Errorf("policy version %d, authz at %d", a.GetPolicyVersion(), versions[0])
			}
			return nil
		})
	}
	t.Logf("verified on both replicas: %d threads, %d promotions, %d completed runs' messages, %d policy lines (policy version %d); lost %d",
		len(l.ack.threads), promotions, len(l.ack.runs), len(l.ack.policies), versions[0], lost)
}

// bearerCreds sends a static bearer token on every call.
type bearerCreds string

func (b bearerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearerCreds) RequireTransportSecurity() bool { return false }

//go:build benche2e

package e2e

// PostgreSQL figures of docs/performance.md ("On PostgreSQL"): the same
// harness as the sqlite figures, on one throwaway cluster of
// internal/pgtest, as ratios within one run.
//
//   - storage: one all-in-one process on sqlite and one on PostgreSQL
//     (storage.dsn), the same static catalog and server-everything, the
//     decision log recording every allow (authz.audit_allows); measured in
//     alternating rounds; each figure is PostgreSQL's p50 over sqlite's.
//   - replicas: catalog, authz and skills in one process on PostgreSQL and
//     two runtime processes (--services runtime) on the same database; a
//     closed-loop load of W clients (AssembleTools, tool_search, a promoted
//     ExecuteToolCall) against one runtime, then against both through an
//     address list (round-robin, docs/decisions/0083-client-side-load-balancing.md),
//     in alternating rounds; the figure is two runtimes' throughput over
//     one runtime's.
//
// TestShortPostgres is part of make bench-e2e-short (CI; it asserts only
// that two runtimes give at least 0.9× the throughput of one, which is all
// 2 cores can show, and only when the machine is not oversubscribed by
// other work). TestLongPostgres is make bench-e2e-pg.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/testkit"
)

// pgYAML is the configuration of a benchmarked process on PostgreSQL.
func pgYAML(dsn string) string {
	return fmt.Sprintf("storage:\n  dsn: %q\n", dsn)
}

// auditYAML turns on the decision log for allows (denies are always
// logged), with a per-principal flood bound (authz.decision_rate; an
// audited allow over it is denied) no benchmark reaches, so every decision
// of the benchmark is a stored record.
const auditYAML = "authz:\n  audit_allows: true\n  decision_rate: 1000000\n  decision_burst: 1000000\n"

// storageFigures are one backend's p50s of one round.
type storageFigures struct {
	warm, after, call, promote, authz1 time.Duration
	authz4                             float64 // decisions/s at 4 callers
}

// storageRound measures every storage figure once on b.
func storageRound(b *bench, n int) storageFigures {
	var f storageFigures
	f.warm = b.assembleWarm(n).p50
	f.after = b.assembleAfterPolicyChange(max(5, n/20)).p50
	f.call = b.callRuntime(n).p50
	f.promote = b.promotionWrite(max(10, n/4)).p50
	_, l1 := b.authorize(1, time.Second)
	f.authz1 = l1.p50
	f.authz4, _ = b.authorize(4, time.Second)
	return f
}

// promotionWrite times tool_search on fresh threads: every call writes a
// promotion (the reducer's transaction on the thread row), where repeating
// it on one thread would find the tool promoted already.
func (b *bench) promotionWrite(n int) stats {
	ctx := context.Background()
	a, _ := structpb.NewStruct(map[string]any{"query": "select:everything_echo"})
	var lat []time.Duration
	for i := 0; i < n; i++ {
		th, err := b.user.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
		if err != nil {
			b.t.Fatal(err)
		}
		callSeq++
		t0 := time.Now()
		r, err := b.user.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th.GetThread().GetThreadId(),
			ToolCall: &runtimev1.ToolCall{Id: fmt.Sprintf("p%d", callSeq), Name: "tool_search", Arguments: a}})
		lat = append(lat, time.Since(t0))
		if err != nil || r.GetResult().GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || len(r.GetResult().GetPromoted().GetNames()) == 0 {
			b.t.Fatalf("tool_search promotion on a fresh thread: %v %v", err, r.GetResult())
		}
	}
	return summarise(lat)
}

// storageRatios runs rounds alternating sqlite and PostgreSQL and prints
// the table; it returns the median ratios (PostgreSQL / sqlite p50).
func storageRatios(t *testing.T, tools, n, rounds int) map[string]float64 {
	dsn := pgtest.DSN(t)
	lite := startBenchConfig(t, tools, true, auditYAML)
	pg := startBenchConfig(t, tools, true, auditYAML+pgYAML(dsn))
	names := []string{"AssembleTools warm", "AssembleTools after a policy change", "ExecuteToolCall of a promoted tool", "tool_search promotion write", "Authorize (decision log on), 1 caller", "Authorize (decision log on), 4 callers"}
	keys := []string{"pg_assemble_warm", "pg_assemble_after_policy", "pg_execute_promoted", "pg_promotion_write", "pg_authorize_1", "pg_authorize_4_throughput"}
	per := map[string][]float64{}
	var cells [][2]string
	for r := 0; r < rounds; r++ {
		ls := storageRound(lite, n)
		ps := storageRound(pg, n)
		vals := [][2]float64{
			{float64(ls.warm), float64(ps.warm)}, {float64(ls.after), float64(ps.after)}, {float64(ls.call), float64(ps.call)},
			{float64(ls.promote), float64(ps.promote)}, {float64(ls.authz1), float64(ps.authz1)},
		}
		for i, v := range vals {
			per[keys[i]] = append(per[keys[i]], v[1]/v[0])
		}
		// Throughput: the ratio is PostgreSQL's decisions/s over sqlite's.
		per[keys[5]] = append(per[keys[5]], ps.authz4/ls.authz4)
		if r == rounds-1 {
			for _, v := range vals {
				cells = append(cells, [2]string{ms(time.Duration(v[0])), ms(time.Duration(v[1]))})
			}
			cells = append(cells, [2]string{fmt.Sprintf("%.0f/s", ls.authz4), fmt.Sprintf("%.0f/s", ps.authz4)})
		}
	}
	got := map[string]float64{}
	logf(t, "\nPostgreSQL beside sqlite (%d tools, p50 of the last round; ratio = median over %d rounds; load %s)", tools, rounds, loadAvg())
	logf(t, "| measure | sqlite | PostgreSQL | PostgreSQL / sqlite |")
	logf(t, "| --- | --- | --- | --- |")
	for i, k := range keys {
		got[k] = median(per[k])
		logf(t, "| %s | %s | %s | %.2f× |", names[i], cells[i][0], cells[i][1], got[k])
	}
	return got
}

// replicaSetup is catalog, authz and skills in one process and two
// runtimes, all on one database.
type replicaSetup struct {
	upstream *testkit.Process
	runtimes [2]*testkit.Process
}

func startReplicas(t *testing.T, tools int) *replicaSetup {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	catalog := writeCatalog(t, dir, tools)
	ext := filepath.Join(dir, "extensions_config.json")
	js := fmt.Sprintf(`{"mcpServers": {"big": {"type": "static", "path": %q}, "everything": {"command": "node", "args": [%q, "stdio"]}}}`, catalog, everythingJS(t))
	if err := os.WriteFile(ext, []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "service.token")
	if err := os.WriteFile(tokenFile, []byte(serviceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &replicaSetup{}
	s.upstream = testkit.Start(t, testkit.Options{Config: authYAML() + pgYAML(dsn), Args: []string{"--services", "catalog,authz,skills", "--extensions-config", ext}, StartTimeout: 5 * time.Minute})
	rtCfg := authYAML() + pgYAML(dsn) + "runtime:\n  upstreams:\n"
	for _, up := range []string{"catalog", "authz", "skills"} {
		rtCfg += fmt.Sprintf("    %s:\n      address: %s\n      token_file: %s\n", up, s.upstream.GRPCAddr, tokenFile)
	}
	shared := filepath.Join(dir, "workspaces")
	for i := range s.runtimes {
		s.runtimes[i] = testkit.Start(t, testkit.Options{Config: rtCfg, Args: []string{"--services", "runtime"}, DataDir: shared, StartTimeout: 5 * time.Minute})
	}
	return s
}

// workerState is one closed-loop client: its thread (everything_echo promoted).
type workerState struct {
	thread string
	seq    int
}

// throughput runs w closed-loop clients against the runtimes at addrs (a
// comma-separated list) for d; one iteration is AssembleTools, a tool_search
// and a promoted ExecuteToolCall. It returns iterations per second.
//
// Each client holds one connection to one runtime (client i to address
// i mod n), as an agent's gRPC client behind a Kubernetes Service or a DNS
// name does: its thread's calls stay on that replica. Spreading every call
// over both replicas instead measures cache misses on both (each replica
// re-reads the thread from the database on every other call), not what a
// second replica adds.
func throughput(t *testing.T, addrs string, workers []*workerState, d time.Duration) float64 {
	var clients []runtimev1.RuntimeServiceClient
	for _, a := range strings.Split(addrs, ",") {
		conn, err := grpcx.Dial(a, grpcx.DialOptions{Token: userToken, MaxMessageBytes: 256 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		clients = append(clients, runtimev1.NewRuntimeServiceClient(conn))
	}
	echo, _ := structpb.NewStruct(map[string]any{"message": "hello"})
	search, _ := structpb.NewStruct(map[string]any{"query": "send email"})
	var done atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	stop := time.Now().Add(d)
	t0 := time.Now()
	for i, w := range workers {
		c := clients[i%len(clients)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for time.Now().Before(stop) {
				if _, err := c.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: w.thread, UserMessage: "find a tool"}); err != nil {
					failed.Store(fmt.Sprintf("AssembleTools: %v", err))
					return
				}
				for _, call := range []struct {
					name string
					args *structpb.Struct
				}{{"tool_search", search}, {"everything_echo", echo}} {
					w.seq++
					r, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: w.thread, ToolCall: &runtimev1.ToolCall{Id: fmt.Sprintf("%s-%d", w.thread, w.seq), Name: call.name, Arguments: call.args}})
					if err != nil || r.GetResult().GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
						failed.Store(fmt.Sprintf("%s: %v %v", call.name, err, r.GetResult()))
						return
					}
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatalf("throughput load: %v", f)
	}
	return float64(done.Load()) / time.Since(t0).Seconds()
}

// replicaRatio measures two runtimes' throughput over one runtime's in
// alternating rounds; it returns the ratio of the summed iterations and
// the share of the machine's CPU that processes other than the benchmark's
// used meanwhile.
func replicaRatio(t *testing.T, tools, clients, rounds int, d time.Duration) (float64, float64) {
	s := startReplicas(t, tools)
	// The clients' threads, created and promoted on the first runtime (both
	// read them from the database).
	c := runtimev1.NewRuntimeServiceClient(dialTo(t, s.runtimes[0].GRPCAddr))
	ctx := context.Background()
	workers := make([]*workerState, clients)
	for i := range workers {
		th, err := c.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
		if err != nil {
			t.Fatal(err)
		}
		workers[i] = &workerState{thread: th.GetThread().GetThreadId()}
		a, _ := structpb.NewStruct(map[string]any{"query": "select:everything_echo"})
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
			r, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: workers[i].thread, ToolCall: &runtimev1.ToolCall{Id: fmt.Sprintf("setup-%d-%d", i, time.Now().UnixNano()), Name: "tool_search", Arguments: a}})
			if err == nil && len(r.GetResult().GetPromoted().GetNames()) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("promoting everything_echo: %v %v\n%s", err, r.GetResult(), s.upstream.Stderr())
			}
		}
	}
	one, two := s.runtimes[0].GRPCAddr, s.runtimes[0].GRPCAddr+","+s.runtimes[1].GRPCAddr
	throughput(t, two, workers, 2*d) // warm both runtimes (caches, heaps; not counted)
	var sum1, sum2 float64
	var cells []string
	pids := []int{os.Getpid(), s.upstream.Pid(), s.runtimes[0].Pid(), s.runtimes[1].Pid()}
	busy0, ours0 := cpuTicks(pids)
	t0 := time.Now()
	// Alternating order (one, two; two, one; ...) so that a drift of the
	// machine's load does not favour one side.
	for r := 0; r < rounds; r++ {
		var a, b float64
		if r%2 == 0 {
			a = throughput(t, one, workers, d)
			b = throughput(t, two, workers, d)
		} else {
			b = throughput(t, two, workers, d)
			a = throughput(t, one, workers, d)
		}
		sum1, sum2 = sum1+a, sum2+b
		cells = append(cells, fmt.Sprintf("%.0f/s vs %.0f/s", a, b))
	}
	busy1, ours1 := cpuTicks(pids)
	others := 0.0
	if avail := time.Since(t0).Seconds() * clockTicks * float64(runtime.NumCPU()); avail > 0 {
		others = max(0, float64((busy1-busy0)-(ours1-ours0))/avail)
	}
	ratio := sum2 / sum1
	logf(t, "\ntwo runtimes vs one (%d tools, %d closed-loop clients, %s rounds; one iteration = AssembleTools + tool_search + promoted ExecuteToolCall): %s; ratio %.2f× (other processes %.0f%% of the CPU; load %s)",
		tools, clients, d, strings.Join(cells, ", "), ratio, 100*others, loadAvg())
	return ratio, others
}

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// cpuTicks returns the machine's busy CPU time (/proc/stat: all but idle
// and iowait) and the CPU time of pids and of every process descended from
// one of them (/proc/<pid>/stat utime + stime), in clock ticks. The
// descendants are the benchmark's too: the MCP servers the catalog runs and
// the PostgreSQL server and its backends (started by this test process), so
// only the CPU of unrelated processes counts as "others".
func cpuTicks(pids []int) (busy, ours int64) {
	raw, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(raw), "\n")
	for i, f := range strings.Fields(line)[1:] {
		var v int64
		fmt.Sscan(f, &v)
		if i != 3 && i != 4 && i < 8 { // user nice system [idle iowait] irq softirq steal
			busy += v
		}
	}
	type proc struct {
		ppid  int
		ticks int64
	}
	procs := map[int]proc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command name: ppid is the 2nd,
		// utime and stime the 12th and 13th.
		_, rest, _ := strings.Cut(string(raw), ") ")
		f := strings.Fields(rest)
		if len(f) > 12 {
			var pp int
			var u, st int64
			fmt.Sscan(f[1], &pp)
			fmt.Sscan(f[11], &u)
			fmt.Sscan(f[12], &st)
			procs[pid] = proc{pp, u + st}
		}
	}
	root := map[int]bool{}
	for _, p := range pids {
		root[p] = true
	}
	for pid, p := range procs {
		for a, hops := pid, 0; a > 1 && hops < 64; a, hops = procs[a].ppid, hops+1 {
			if root[a] {
				ours += p.ticks
				break
			}
		}
	}
	return busy, ours
}

func dialTo(t *testing.T, addr string) *grpc.ClientConn {
	conn, err := grpcx.Dial(addr, grpcx.DialOptions{Token: userToken, MaxMessageBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestShortPostgres is the CI part: the storage ratios (printed, not
// gated: two figures of one loaded machine) at 2,000 tools, one round, and
// the replica throughput, gated at ≥ 0.9×.
func TestShortPostgres(t *testing.T) {
	if mode() != "short" {
		t.Skip("TOOLPLANE_BENCH_E2E=long runs TestLongPostgres")
	}
	t0 := time.Now()
	t.Run("storage", func(t *testing.T) { storageRatios(t, 2000, 60, 1) })
	t.Run("replicas", func(t *testing.T) {
		r, others := replicaRatio(t, 2000, 8, 4, 3*time.Second)
		// The comparison is one of this suite's processes against two on
		// the same cores; when other work takes a good part of the
		// machine's CPU meanwhile it measures the others (0.81-0.98× on the
		// shared 2 cores, docs/performance.md), so it is gated only when
		// other processes (not this test, the suite it started, their MCP
		// servers or PostgreSQL) used at most a quarter of the CPU (CI's
		// own machine).
		if others <= 0.25 && r < 0.9 {
			// One re-measure, as the ratio gates of TestShort do: a single
			// 3 s round can halve on a scheduling hiccup (249/s vs 123/s
			// seen in one round of four).
			logf(t, "two runtimes vs one: %.2f× below 0.9×; measuring once more", r)
			r, others = replicaRatio(t, 2000, 8, 4, 3*time.Second)
		}
		if others > 0.25 {
			logf(t, "two runtimes vs one: %.2f×, not gated: other processes used %.0f%% of the CPU meanwhile", r, 100*others)
		} else if r < 0.9 {
			t.Errorf("two runtimes gave %.2f× the throughput of one; want at least 0.9× (other processes used %.0f%% of the CPU)", r, 100*others)
		}
	})
	logf(t, "PostgreSQL short form done in %.0fs", time.Since(t0).Seconds())
}

// TestLongPostgres is make bench-e2e-pg: the storage ratios at 8,010 tools
// (median of 3 rounds) and the replica throughput (4 rounds of 15 s each side, 16
// clients). Outside CI on a machine with the cores, two runtimes should
// reach ≥ 1.7× (TOOLPLANE_BENCH_E2E_REPLICA_GOAL=1.7 makes it a failure).
func TestLongPostgres(t *testing.T) {
	if mode() != "long" {
		t.Skip("set TOOLPLANE_BENCH_E2E=long")
	}
	t.Run("storage", func(t *testing.T) { storageRatios(t, 8010, 200, 3) })
	t.Run("replicas", func(t *testing.T) {
		r, _ := replicaRatio(t, 8010, 16, 4, 15*time.Second)
		var goal float64
		if _, err := fmt.Sscan(os.Getenv("TOOLPLANE_BENCH_E2E_REPLICA_GOAL"), &goal); err == nil && r < goal {
			t.Errorf("two runtimes gave %.2f× the throughput of one; goal %.2f×", r, goal)
		}
	})
}

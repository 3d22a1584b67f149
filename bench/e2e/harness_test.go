//go:build benche2e

// Package e2e is the end-to-end benchmark harness of docs/performance.md: it
// builds the real `toolplane` binary (internal/testkit), starts it on
// loopback with a generated static catalog made from the real catalogs of
// testdata/mcp-catalog, drives it over gRPC (and REST for one figure) and
// prints every measure next to its baseline from the same run.
//
//	make bench-e2e       # long form: scaling table, hops, RSS after 60 s
//	make bench-e2e-short # CI form: median of 3, ratio gate (baseline.json)
//
// The build tag keeps `go test ./...` fast.
package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop() // the PostgreSQL cluster of postgres_test.go, if one was started
	testkit.Cleanup()
	os.Exit(code)
}

// Static bearer tokens of the benchmark process (only their SHA-256 is in
// its config, as in production).
const (
	userToken    = "bench-user-token"
	serviceToken = "bench-service-token"
	adminToken   = "bench-admin-token"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func authYAML() string {
	return fmt.Sprintf(`auth:
  enabled: true
  tokens:
    - name: alice
      sha256: %s
      kind: user
      subject: alice
      tenant: acme
      roles: [user]
    - name: runtime-bench
      sha256: %s
      kind: service
      subject: svc:bench
      roles: [service]
    - name: root
      sha256: %s
      kind: user
      subject: root
      roles: [admin]
server:
  log:
    level: warn
  # The limiter stays on the path (its cost is measured) with limits no
  # benchmark reaches: the figures are the path's cost, not refusals.
  rate_limits:
    - role: default
      decisions_per_second: 1000000
      decisions_burst: 1000000
      writes_per_second: 1000000
      writes_burst: 1000000
`, sha(userToken), sha(serviceToken), sha(adminToken))
}

// row is one static tool (catalogconfig.StaticTool's file format).
type row struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Server      string          `json:"server"`
}

// runtimeNames are the config and built-in tools of the runtime: a catalog
// tool of the same name is dropped by assembly, so the benchmark catalogs
// leave them out (both sides then search the same set).
var runtimeNames = map[string]bool{"read_file": true, "write_file": true, "ls": true, "str_replace": true, "glob": true, "grep": true, "bash": true,
	"ask_clarification": true, "present_files": true, "describe_skill": true, "review_skill_package": true, "task": true, "tool_search": true,
	"list_uploaded_files": true}

var safeServer = regexp.MustCompile(`[^A-Za-z0-9_-]`)

var (
	sourceOnce sync.Once
	sourceRows []row
)

// realRows are the 10,257 real tools of testdata/mcp-catalog (toolsdk's
// 8,010, then mcpm's 2,247), with repeated names made unique.
func realRows(t testing.TB) []row {
	sourceOnce.Do(func() {
		seen := map[string]int{}
		for _, rel := range []string{"mcp-catalog/toolsdk-registry/tools.jsonl", "mcp-catalog/mcpm-registry/tools.jsonl"} {
			f, err := os.Open(testkit.SharedData(t, rel))
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
			for sc.Scan() {
				if strings.TrimSpace(sc.Text()) == "" {
					continue
				}
				var r row
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("%s: %v", rel, err)
				}
				if runtimeNames[r.Name] {
					continue // the runtime's own tool of that name wins (docs/architecture.md §3.1 step 1)
				}
				if n := seen[r.Name]; n > 0 {
					seen[r.Name]++
					r.Name = fmt.Sprintf("%s_d%d", r.Name, n)
				}
				seen[r.Name]++
				// Origins such as "@scope/pkg" match no default-policy
				// line for mcp_server (authz.no_policy); the benchmark
				// measures visible tools, so servers get safe names.
				r.Server = safeServer.ReplaceAllString(r.Server, "_")
				sourceRows = append(sourceRows, r)
			}
			f.Close()
		}
	})
	if len(sourceRows) < 10_200 {
		t.Fatalf("real catalogs hold %d usable tools, want about 10,257", len(sourceRows))
	}
	return sourceRows
}

// writeCatalog writes a static tool file of n tools: the first n real tools,
// and beyond 10,257 copy k of them renamed `<name>_r<k>` on server
// `<server>_r<k>` (realistic names, descriptions and schemas, unique names).
func writeCatalog(t testing.TB, dir string, n int) string {
	src := realRows(t)
	p := filepath.Join(dir, fmt.Sprintf("tools-%d.jsonl", n))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := 0; i < n; i++ {
		r := rowAt(src, i)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// rowAt is tool i of a generated catalog (writeCatalog).
func rowAt(src []row, i int) row {
	r := src[i%len(src)]
	if k := i / len(src); k > 0 {
		r.Name = fmt.Sprintf("%s_r%d", r.Name, k)
		r.Server = fmt.Sprintf("%s_r%d", r.Server, k)
	}
	return r
}

// bench is one running process with its clients.
type bench struct {
	t       testing.TB
	p       *testkit.Process
	tools   int
	catalog string // the static tool file
	user    runtimev1.RuntimeServiceClient
	svcCat  catalogv1.CatalogServiceClient
	svcAuth authzv1.AuthzServiceClient
	admin   authzv1.AuthzServiceClient
	health  healthpb.HealthClient
	conns   []*grpc.ClientConn
	thread  string
	echo    bool // server-everything configured
}

type tokenCreds string

func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(c)}, nil
}
func (tokenCreds) RequireTransportSecurity() bool { return false }

func (b *bench) dial(token string) *grpc.ClientConn {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256 << 20))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds(token)))
	}
	c, err := grpc.NewClient(b.p.GRPCAddr, opts...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.conns = append(b.conns, c)
	return c
}

// startBench starts the binary with a static catalog of n tools (and the
// pinned server-everything over stdio when echo) and waits until a thread
// of the user assembles all of them.
func startBench(t testing.TB, n int, echo bool) *bench {
	return startBenchConfig(t, n, echo, "")
}

// startBenchConfig is startBench with extraYAML appended to the process's
// configuration (e.g. storage.dsn: bench/e2e/postgres_test.go).
func startBenchConfig(t testing.TB, n int, echo bool, extraYAML string) *bench {
	dir := t.TempDir()
	b := &bench{t: t, tools: n, catalog: writeCatalog(t, dir, n), echo: echo}
	servers := map[string]any{"big": map[string]any{"type": "static", "path": b.catalog}}
	if echo {
		servers["everything"] = map[string]any{"command": "node", "args": []string{everythingJS(t), "stdio"}}
	}
	js, _ := json.Marshal(map[string]any{"mcpServers": servers})
	ext := filepath.Join(dir, "extensions_config.json")
	if err := os.WriteFile(ext, js, 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	b.p = testkit.Start(t, testkit.Options{Config: authYAML() + extraYAML, Args: []string{"--extensions-config", ext}, Env: processEnv(), StartTimeout: 5 * time.Minute})
	b.user = runtimev1.NewRuntimeServiceClient(b.dial(userToken))
	svc := b.dial(serviceToken)
	b.svcCat, b.svcAuth = catalogv1.NewCatalogServiceClient(svc), authzv1.NewAuthzServiceClient(svc)
	b.admin = authzv1.NewAuthzServiceClient(b.dial(adminToken))
	b.health = healthpb.NewHealthClient(b.dial(""))
	t.Cleanup(func() {
		for _, c := range b.conns {
			_ = c.Close()
		}
	})
	ctx := context.Background()
	th, err := b.user.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b.thread = th.GetThread().GetThreadId()
	want := n
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		r, err := b.user.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: b.thread})
		ok := err == nil && len(r.GetDeferred()) >= want
		if err == nil && len(r.GetReport().GetDroppedDuplicates())+len(r.GetReport().GetDenied()) > 0 && time.Since(t0) > 30*time.Second {
			t.Fatalf("tools dropped %v or denied %d: the benchmark measures a fully visible catalog", r.GetReport().GetDroppedDuplicates(), len(r.GetReport().GetDenied()))
		}
		if ok && echo {
			ok = slices.Contains(r.GetDeferred(), "everything_echo")
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tools never assembled: deferred %d, err %v\nstderr:\n%s", n, len(r.GetDeferred()), err, b.p.Stderr())
		}
	}
	logf(t, "started the binary with %d static tools (echo %v) in %.1fs", n, echo, time.Since(t0).Seconds())
	if echo {
		b.exec(ctx, "tool_search", map[string]any{"query": "select:everything_echo"})
	}
	return b
}

// processEnv are extra KEY=VALUE variables for the benchmarked process,
// from TOOLPLANE_BENCH_E2E_ENV (comma-separated; testkit clears every other
// TOOLPLANE_* variable), e.g. to turn on a profiling listener.
func processEnv() []string {
	v := os.Getenv("TOOLPLANE_BENCH_E2E_ENV")
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func everythingJS(t testing.TB) string {
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, ".tools", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("server-everything not installed (scripts/install-npm.sh): %v", err)
	}
	return p
}

var callSeq int64

func (b *bench) exec(ctx context.Context, name string, args map[string]any) *runtimev1.ToolResult {
	a, err := structpb.NewStruct(args)
	if err != nil {
		b.t.Fatal(err)
	}
	callSeq++
	r, err := b.user.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: b.thread, ToolCall: &runtimev1.ToolCall{Id: "c" + strconv.FormatInt(callSeq, 10), Name: name, Arguments: a}})
	if err != nil {
		b.t.Fatalf("ExecuteToolCall %s: %v", name, err)
	}
	if r.GetResult().GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		b.t.Fatalf("ExecuteToolCall %s %v: %v %v", name, args, r.GetResult().GetStatus(), r.GetResult().GetContent())
	}
	return r.GetResult()
}

// queries are the tool_search queries of both sides: every DeerFlow form
// (select:, +required, regex) and keyword queries.
func queries(b *bench) []string {
	src := realRows(b.t)
	return []string{
		"weather forecast", "github", "send email", "database query", "+slack message", "+file read",
		"select:" + rowAt(src, 0).Name + "," + rowAt(src, b.tools/2).Name, "calendar", "translate text", "stock price",
		"create.*issue", "search the web",
	}
}

// stats are latencies of one measure.
type stats struct{ p50, p99 time.Duration }

func summarise(lat []time.Duration) stats {
	s := slices.Clone(lat)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(int(float64(len(s))*p), len(s)-1)] }
	return stats{at(0.5), at(0.99)}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

func timeN(n int, f func()) stats {
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		f()
		lat = append(lat, time.Since(t0))
	}
	return summarise(lat)
}

// toolSearch times tool_search through the runtime (ExecuteToolCall over
// gRPC: chain, authz, catalog SearchTools, promotion committed).
func (b *bench) toolSearch(reps int) stats {
	ctx := context.Background()
	qs := queries(b)
	for _, q := range qs { // warm
		b.exec(ctx, "tool_search", map[string]any{"query": q})
	}
	var lat []time.Duration
	for r := 0; r < reps; r++ {
		for _, q := range qs {
			t0 := time.Now()
			b.exec(ctx, "tool_search", map[string]any{"query": q})
			lat = append(lat, time.Since(t0))
		}
	}
	return summarise(lat)
}

// python runs DeerFlow's algorithm (deerflow_search.py) with /usr/bin/python3
// on the same catalog file and queries.
func (b *bench) python(reps int) stats {
	qf := filepath.Join(b.t.TempDir(), "queries.json")
	js, _ := json.Marshal(queries(b))
	if err := os.WriteFile(qf, js, 0o600); err != nil {
		b.t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "deerflow_search.py", b.catalog, qf, strconv.Itoa(reps))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.t.Fatalf("deerflow_search.py: %v\n%s", err, stderr.String())
	}
	var r struct {
		Tools int     `json:"tools"`
		P50   float64 `json:"p50_us"`
		P99   float64 `json:"p99_us"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Tools != b.tools {
		b.t.Fatalf("deerflow_search.py: %v (%s)", err, out)
	}
	return stats{time.Duration(r.P50 * 1e3), time.Duration(r.P99 * 1e3)}
}

func (b *bench) assemble(ctx context.Context) *runtimev1.AssembleToolsResponse {
	r, err := b.user.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: b.thread, UserMessage: "find a tool"})
	if err != nil {
		b.t.Fatalf("AssembleTools: %v", err)
	}
	return r
}

func (b *bench) assembleWarm(n int) stats {
	ctx := context.Background()
	b.assemble(ctx)
	return timeN(n, func() { b.assemble(ctx) })
}

var policySeq int

// assembleAfterPolicyChange times the first AssembleTools after each of n
// policy changes (a new line for an unused role; the cache is keyed by the
// policy version, so every assembly rebuilds).
func (b *bench) assembleAfterPolicyChange(n int) stats {
	ctx := context.Background()
	var lat []time.Duration
	last := b.assemble(ctx).GetPolicyVersion()
	for i := 0; i < n; i++ {
		policySeq++
		r, err := b.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{{Role: fmt.Sprintf("bench-role-%d", policySeq), Tenant: "*",
			ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "x", Action: authzv1.Action_ACTION_LIST, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}}})
		if err != nil {
			b.t.Fatal(err)
		}
		_ = r
		// Wait until WatchPolicy delivered the version (not timed).
		time.Sleep(20 * time.Millisecond)
		t0 := time.Now()
		a := b.assemble(ctx)
		lat = append(lat, time.Since(t0))
		if a.GetPolicyVersion() <= last {
			b.t.Logf("assembly after a policy change still at version %d", a.GetPolicyVersion())
		}
		last = a.GetPolicyVersion()
	}
	return summarise(lat)
}

// noop is the physical floor: a gRPC health Check from this process (the
// benchmark client, a separate process from the server) over loopback.
func (b *bench) noop(n int) stats {
	ctx := context.Background()
	return timeN(n, func() {
		if _, err := b.health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			b.t.Fatal(err)
		}
	})
}

func (b *bench) callCatalog(n int) stats {
	ctx := context.Background()
	args, _ := structpb.NewStruct(map[string]any{"message": "hello"})
	return timeN(n, func() {
		r, err := b.svcCat.CallTool(ctx, &catalogv1.CallToolRequest{Name: "everything_echo", Arguments: args})
		if err != nil || r.GetIsError() {
			b.t.Fatalf("catalog CallTool: %v %v", err, r)
		}
	})
}

func (b *bench) callRuntime(n int) stats {
	ctx := context.Background()
	return timeN(n, func() { b.exec(ctx, "everything_echo", map[string]any{"message": "hello"}) })
}

// authorize runs Authorize from callers goroutines (one connection each, as
// separate runtimes would) for d; it returns decisions/s and the latencies.
func (b *bench) authorize(callers int, d time.Duration) (float64, stats) {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	req := &authzv1.AuthorizeRequest{Principal: &typev1.Principal{Subject: "alice", Tenant: "acme", Roles: []string{"user"}},
		ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Action: authzv1.Action_ACTION_CALL, Target: "everything_echo"}
	t0 := time.Now()
	for c := 0; c < callers; c++ {
		cli := authzv1.NewAuthzServiceClient(b.dial(serviceToken))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			var lat []time.Duration
			for time.Now().Before(stop) {
				s := time.Now()
				r, err := cli.Authorize(ctx, req)
				if err != nil || !r.GetDecision().GetAllow() {
					b.t.Errorf("Authorize: %v %v", err, r)
					return
				}
				lat = append(lat, time.Since(s))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(len(all)) / time.Since(t0).Seconds(), summarise(all)
}

// restAssemble times AssembleTools over the REST mirror (keep-alive client).
func (b *bench) restAssemble(n int) stats {
	cl := &httpClient{url: b.p.URL("/v1/threads/" + b.thread + ":assemble"), token: userToken}
	cl.do(b.t, `{"user_message": "find a tool"}`)
	return timeN(n, func() { cl.do(b.t, `{"user_message": "find a tool"}`) })
}

// rssMiB reads VmRSS of the process from /proc.
func (b *bench) rssMiB() float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.p.Pid()))
	if err != nil {
		b.t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.t.Fatal("no VmRSS")
	return 0
}

func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func logf(t testing.TB, format string, args ...any) {
	t.Helper()
	fmt.Printf(format+"\n", args...)
}

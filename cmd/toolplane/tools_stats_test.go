package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/testkit"
)

// mcpmRel is the 2,247-tool mcpm registry snapshot in the shared data.
const mcpmRel = "mcp-catalog/mcpm-registry/tools.jsonl"

// startStatsSuite runs the four services in process (auth off, loopback)
// with one static catalog server reading toolsFile, and returns the gRPC
// address once every server is READY.
func startStatsSuite(t *testing.T, toolsFile string, mutate func(*app.Config)) string {
	t.Helper()
	dir := t.TempDir()
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"mcpm": map[string]any{"type": "static", "path": toolsFile}}})
	extPath := filepath.Join(dir, "extensions_config.json")
	if err := os.WriteFile(extPath, ext, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := app.DefaultConfig()
	cfg.Server.DataDir = filepath.Join(dir, "data")
	cfg.Server.GRPCAddr = "127.0.0.1:0"
	cfg.Server.HTTPAddr = "127.0.0.1:0"
	cfg.Server.DrainPeriod = time.Millisecond
	cfg.Server.ShutdownTimeout = 5 * time.Second
	cfg.Catalog.ExtensionsConfig = extPath
	if mutate != nil {
		mutate(&cfg)
	}
	return startSuite(t, &cfg)
}

// startSuite runs cfg in process until the test ends and returns the gRPC
// address once the suite is ready and every catalog server is READY.
func startSuite(t *testing.T, cfg *app.Config) string {
	t.Helper()
	if err := os.MkdirAll(cfg.Server.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	au, err := app.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := app.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.GRPC.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cfg, au, lis, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnReady: func(string, string) { close(ready) }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("suite did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("suite stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("suite not ready after 30s")
	}
	cc, err := grpcx.Dial(addr, grpcx.DialOptions{MaxMessageBytes: 64 << 20, Token: suiteAdminToken(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cat := catalogv1.NewCatalogServiceClient(cc)
	for deadline := time.Now().Add(30 * time.Second); ; {
		r, err := cat.ListServers(context.Background(), &catalogv1.ListServersRequest{})
		pending := err != nil
		for _, s := range r.GetServers() {
			if s.GetState() != catalogv1.ServerState_SERVER_STATE_READY {
				pending = true
			}
		}
		if !pending {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("catalog servers not ready: %v %v", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// suiteAdminToken is the token a test registered under the name "admin"
// (see testTokens), "" when auth is off.
func suiteAdminToken(cfg *app.Config) string {
	if !cfg.Auth.Enabled {
		return ""
	}
	return "admin-token"
}

// runStats runs `stats` against addr and returns stdout.
func runStats(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	cmd := newToolsStatsCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(append([]string{"--grpc-addr", addr}, args...))
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// threadCount is how many threads the (local, admin) caller owns.
func threadCount(t *testing.T, addr string) int {
	t.Helper()
	cc, err := grpcx.Dial(addr, grpcx.DialOptions{MaxMessageBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	r, err := runtimev1.NewRuntimeServiceClient(cc).ListThreads(context.Background(), &runtimev1.ListThreadsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return len(r.GetThreads())
}

// TestToolsStatsMCPMRegistry measures the whole 2,247-tool registry behind
// tool_search (on by default): every catalog tool is deferred, the first
// turn is a small fraction of binding them all, and the thread is gone
// afterwards.
func TestToolsStatsMCPMRegistry(t *testing.T) {
	mcpmTools := testkit.SharedData(t, mcpmRel)
	addr := startStatsSuite(t, mcpmTools, nil)
	out, err := runStats(t, addr, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st toolStats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if st.CatalogTools < 2000 || st.DeferredTools != st.CatalogTools {
		t.Fatalf("catalog %d tools, deferred %d: want every one of >2000 tools deferred", st.CatalogTools, st.DeferredTools)
	}
	if st.AllSchemas != st.CatalogTools+st.BoundTools-1 {
		t.Fatalf("all schemas %d, want catalog %d + bound %d - tool_search", st.AllSchemas, st.CatalogTools, st.BoundTools)
	}
	if len(st.Counts) != 2 || st.Counts[0].Encoding != "o200k_base" || st.Counts[1].Encoding != "cl100k_base" {
		t.Fatalf("counts %+v: want o200k_base then cl100k_base", st.Counts)
	}
	for _, ec := range st.Counts {
		if ec.ToolSearchSchema == 0 || ec.DeferredSection == 0 || ec.BoundSchemas == 0 {
			t.Fatalf("%s: %+v: tool_search, the deferred section and the bound schemas must all count", ec.Encoding, ec)
		}
		if ec.FirstTurn != ec.BoundSchemas+ec.ToolSearchSchema+ec.DeferredSection {
			t.Fatalf("%s: first turn %d is not the sum of its parts %+v", ec.Encoding, ec.FirstTurn, ec)
		}
		if want := 100 * (1 - float64(ec.FirstTurn)/float64(ec.AllTools)); math.Abs(want-ec.ReductionPct) > 1e-9 || ec.ReductionPct < 90 {
			t.Fatalf("%s: reduction %.2f%% (first %d, all %d): want >= 90%%", ec.Encoding, ec.ReductionPct, ec.FirstTurn, ec.AllTools)
		}
		t.Logf("%s: first turn %d tokens (bound %d, tool_search %d, deferred section %d), all %d schemas %d tokens, %.2f%% fewer",
			ec.Encoding, ec.FirstTurn, ec.BoundSchemas, ec.ToolSearchSchema, ec.DeferredSection, st.AllSchemas, ec.AllTools, ec.ReductionPct)
	}
	if n := threadCount(t, addr); n != 0 {
		t.Fatalf("%d threads left after stats, want 0", n)
	}

	// The table names every figure, one column per encoding.
	text, err := runStats(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text)
	if !strings.Contains(text, "cl100k_base") || !strings.Contains(text, thousands(st.Counts[1].AllTools)) {
		t.Fatalf("table lacks the cl100k_base column:\n%s", text)
	}
	text, err = runStats(t, addr, "--encoding", "o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"o200k_base", "first turn", "tool_search schema", "deferred-tools section (" + thousands(st.DeferredTools) + " names)", "every tool bound", "reduction"} {
		if !strings.Contains(text, want) {
			t.Fatalf("table lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "cl100k_base") {
		t.Fatalf("--encoding o200k_base printed cl100k_base:\n%s", text)
	}
}

// TestToolsStatsWithoutToolSearch: with tool_search off every catalog tool
// is bound at the first turn, so the first turn is the every-tool figure
// (the same schemas) and there is nothing deferred.
func TestToolsStatsWithoutToolSearch(t *testing.T) {
	mcpmTools := testkit.SharedData(t, mcpmRel)
	small := filepath.Join(t.TempDir(), "tools.jsonl")
	src, err := os.Open(mcpmTools)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var lines []string
	for sc := bufio.NewScanner(src); sc.Scan() && len(lines) < 60; {
		lines = append(lines, sc.Text())
	}
	if err := os.WriteFile(small, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	off := false
	addr := startStatsSuite(t, small, func(c *app.Config) { c.Runtime.ToolSearch.Enabled = &off })
	out, err := runStats(t, addr, "--json", "--encoding", "cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	var st toolStats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if st.DeferredTools != 0 || st.CatalogTools != 60 || st.AllSchemas != st.BoundTools {
		t.Fatalf("%+v: want 60 catalog tools, none deferred, the same schemas bound in both cases", st)
	}
	ec := st.Counts[0]
	if ec.ToolSearchSchema != 0 || ec.DeferredSection != 0 || math.Abs(ec.ReductionPct) > 0.5 {
		t.Fatalf("%+v: want no tool_search, no deferred section and no reduction", ec)
	}
	if n := threadCount(t, addr); n != 0 {
		t.Fatalf("%d threads left after stats, want 0", n)
	}

	// Attached under `tools` (as the lead wires it), the connection flags
	// and --json given after `stats` are the command's own.
	tools := newToolsCmd()
	tools.AddCommand(newToolsStatsCmd())
	var buf bytes.Buffer
	tools.SetOut(&buf)
	tools.SetArgs([]string{"stats", "--grpc-addr", addr, "--json", "--encoding", "o200k_base"})
	if err := tools.Execute(); err != nil {
		t.Fatal(err)
	}
	var again toolStats
	if err := json.Unmarshal(buf.Bytes(), &again); err != nil || again.CatalogTools != 60 || again.Counts[0].Encoding != "o200k_base" {
		t.Fatalf("attached run: %v %+v\n%s", err, again, buf.String())
	}
}

// TestToolsStatsUsage: a bad encoding is a usage error (exit 2) found before
// any connection is made.
func TestToolsStatsUsage(t *testing.T) {
	_, err := runStats(t, "127.0.0.1:1", "--encoding", "p50k_base")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "p50k_base") {
		t.Fatalf("err = %v, want exit 2 naming the encoding", err)
	}
}

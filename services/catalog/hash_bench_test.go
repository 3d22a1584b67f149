package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// toolsdk returns the path of the 8,010-tool toolsdk-registry catalog
// (shared/data, beside the repository); missing: skipped.
func toolsdk(b testing.TB) string {
	p := filepath.Join(moduleRoot(b), "..", "shared", "data", "mcp-catalog", "toolsdk-registry", "tools.jsonl")
	if _, err := os.Stat(p); err != nil {
		b.Skipf("toolsdk catalog not available: %v", err)
	}
	return p
}

// BenchmarkCatalogHash8k hashes the 8,010-tool catalog from raw rows (every
// element canonicalised with RFC 8785, sorted, SHA-256): the cost of a cold
// hash. Target (issue 4): < 20 ms.
func BenchmarkCatalogHash8k(b *testing.B) {
	rows, err := catalogconfig.LoadStatic(toolsdk(b), "toolsdk")
	if err != nil {
		b.Fatal(err)
	}
	in := make([]HashInput, len(rows))
	for i, r := range rows {
		in[i] = HashInput{Name: fmt.Sprintf("%s_%d", r.Name, i), Description: r.Description, Parameters: r.InputSchema}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := CatalogHash(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(in)), "tools")
}

// BenchmarkGetCatalog8k measures GetCatalog over the whole 8,010-tool static
// catalog with an explicit candidate list (elements are precomputed per
// snapshot, so this is sort + SHA-256).
func BenchmarkGetCatalog8k(b *testing.B) {
	path := toolsdk(b)
	t0 := time.Now()
	h := start(b, fmt.Sprintf(`{"mcpServers": {"toolsdk": {"type": "static", "path": %q}}}`, path), nil)
	load := time.Since(t0)
	snap := h.srv.snap.Load()
	names := make([]string, len(snap.tools))
	for i, e := range snap.tools {
		names[i] = e.tool.Name
	}
	req := &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{Values: names}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.srv.GetCatalog(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(load.Milliseconds()), "load-ms")
	b.ReportMetric(float64(len(names)), "tools")
}

// BenchmarkRebuildAfter50ToolChange: with the 8,010-tool catalog loaded, one
// 50-tool server's tools change; the catalog snapshot (names, hash elements,
// global hash) and the search index follow incrementally.
func BenchmarkRebuildAfter50ToolChange(b *testing.B) {
	path := toolsdk(b)
	small := filepath.Join(b.TempDir(), "small.jsonl")
	f, _ := os.Create(small)
	for i := 0; i < 50; i++ {
		fmt.Fprintf(f, `{"name":"tool_%d","description":"small server tool number %d","input_schema":{"type":"object","properties":{"q":{"type":"string"}}},"server":"small"}`+"\n", i, i)
	}
	f.Close()
	h := start(b, fmt.Sprintf(`{"mcpServers": {"toolsdk": {"type": "static", "path": %q}, "small": {"type": "static", "path": %q}}}`, path, small), nil)
	time.Sleep(time.Second) // let the start-up rebuilds finish
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.srv.buildMu.Lock()
		delete(h.srv.cache, "small") // the server's tools are new objects
		h.srv.buildMu.Unlock()
		h.srv.rebuild()
	}
}

// TestMemory10k reports the heap in use with about 10,000 tools loaded
// (the 8,010-tool catalog plus the 2,000-tool mcpm catalog) — issue 4 target:
// resident memory < 150 MB. Run with -v to see the figure.
func TestMemory10k(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("short mode or race detector (which multiplies memory)")
	}
	a := toolsdk(t)
	bPath := filepath.Join(filepath.Dir(filepath.Dir(a)), "mcpm-registry", "tools.jsonl")
	if _, err := os.Stat(bPath); err != nil {
		t.Skip(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := start(t, fmt.Sprintf(`{"mcpServers": {"toolsdk": {"type": "static", "path": %q}, "mcpm": {"type": "static", "path": %q}}}`, a, bPath), nil)
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := len(h.srv.snap.Load().tools)
	heap := float64(after.HeapInuse-before.HeapInuse) / (1 << 20)
	rss := vmRSS(t)
	t.Logf("%d tools: heap in use +%.1f MiB (total heap %.1f MiB), process RSS %.1f MiB", n, heap, float64(after.HeapInuse)/(1<<20), rss)
	if rss > 150 {
		t.Errorf("resident memory %.1f MiB over 150 MiB", rss)
	}
}

// vmRSS returns this process's resident set size in MiB (Linux).
func vmRSS(t testing.TB) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:")), "%f", &kb)
			return kb / 1024
		}
	}
	t.Skip("no VmRSS")
	return 0
}

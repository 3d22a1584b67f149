package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/internal/testkit"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// toolsdk returns the path of the 8,010-tool toolsdk-registry catalog
// (testdata/mcp-catalog, see testdata/README.md).
func toolsdk(b testing.TB) string {
	return testkit.SharedData(b, "mcp-catalog/toolsdk-registry/tools.jsonl")
}

// BenchmarkCatalogHash8k hashes the 8,010-tool catalog from raw rows (every
// element canonicalised with RFC 8785, sorted, SHA-256): the cost of a cold
// hash. Target (issue 4): < 20 ms. cpu-ms/op is the process's CPU time per
// hash (user + system, getrusage), which the shared machine's load does not
// inflate the way it inflates ns/op. The "library" sub-benchmark is the
// same hash with every value canonicalised by github.com/gowebpki/jcs, the
// reference of docs/decisions/0148-single-pass-canonical-json.md, for a
// ratio in one run.
func BenchmarkCatalogHash8k(b *testing.B) {
	rows, err := catalogconfig.LoadStatic(toolsdk(b), "toolsdk")
	if err != nil {
		b.Fatal(err)
	}
	in := make([]HashInput, len(rows))
	for i, r := range rows {
		in[i] = HashInput{Name: fmt.Sprintf("%s_%d", r.Name, i), Description: r.Description, Parameters: r.InputSchema}
	}
	// mcpm's 2,247 tools carry real input schemas (toolsdk's none).
	mrows, err := catalogconfig.LoadStatic(testkit.SharedData(b, "mcp-catalog/mcpm-registry/tools.jsonl"), "mcpm")
	if err != nil {
		b.Fatal(err)
	}
	withSchemas := slices.Clone(in[:8010-len(mrows)])
	for i, r := range mrows {
		withSchemas = append(withSchemas, HashInput{Name: fmt.Sprintf("m_%s_%d", r.Name, i), Description: r.Description, Parameters: r.InputSchema})
	}
	for _, c := range []struct {
		name string
		in   []HashInput
		hash func([]HashInput) (string, error)
	}{{"toolsdk", in, CatalogHash}, {"toolsdk/library", in, libraryCatalogHash},
		{"with-mcpm-schemas", withSchemas, CatalogHash}, {"with-mcpm-schemas/library", withSchemas, libraryCatalogHash}} {
		b.Run(c.name, func(b *testing.B) {
			want, err := libraryCatalogHash(c.in)
			if err != nil {
				b.Fatal(err)
			}
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got, err := c.hash(c.in)
				if err != nil || got != want {
					b.Fatalf("hash %q, %v; library %q", got, err, want)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(len(c.in)), "tools")
		})
	}
}

// libraryCatalogHash is CatalogHash with every value canonicalised by the
// jcs library as before docs/decisions/0148-single-pass-canonical-json.md
// (json.Marshal then jcs.Transform for strings).
func libraryCatalogHash(in []HashInput) (string, error) {
	els := make([]namedElement, len(in))
	for i, t := range in {
		cp := []byte(`{}`)
		if p := bytes.TrimSpace(t.Parameters); len(p) > 0 && string(p) != "null" {
			var err error
			if cp, err = jcs.Transform(p); err != nil {
				return "", err
			}
		}
		str := func(s string) []byte {
			m, _ := json.Marshal(s)
			c, _ := jcs.Transform(m)
			return c
		}
		els[i] = namedElement{t.Name, elementWith(str(t.Name), str(t.Description), cp)}
	}
	return hashElements(els), nil
}

// cpuTime is this process's user + system CPU time (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGetCatalog8k measures GetCatalog over the whole 8,010-tool static
// catalog with an explicit candidate list (elements are precomputed per
// snapshot, so this is sort + SHA-256).
func BenchmarkGetCatalog8k(b *testing.B) {
	path := toolsdk(b)
	t0 := time.Now()
	h := start(b, fmt.Sprintf(`{"mcpServers": {"toolsdk": {"type": "static", "path": %q}}}`, path), nil)
	load := time.Since(t0)
	time.Sleep(time.Second) // let the notifier's start-up rebuild finish
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

// TestMemory10k measures, in a fresh helper process, the resident memory
// of a catalog with about 10,000 tools loaded (the 8,010-tool toolsdk
// catalog plus the 2,247-tool mcpm catalog as static servers, search index
// built) — issue 4 target: < 150 MB. Run with -v to see the figure.
func TestMemory10k(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("short mode or race detector (which multiplies memory)")
	}
	a := toolsdk(t)
	bPath := testkit.SharedData(t, "mcp-catalog/mcpm-registry/tools.jsonl")
	// Two runs on one data directory: the first start assigns and writes
	// every tool's name (docs/architecture.md §7), a one-time cost that is
	// logged; the target applies to the catalog as it runs from then on (a
	// restart that reads its names).
	dir := t.TempDir()
	measure := func() (rss, heap float64, n int) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "TP_CATALOG_HELPER=mem", "TP_MEM_A="+a, "TP_MEM_B="+bPath, "TP_MEM_DIR="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper: %v %s", err, out)
		}
		if _, err := fmt.Sscanf(string(out), "RSS %f HEAP %f TOOLS %d", &rss, &heap, &n); err != nil {
			t.Fatalf("helper output %q: %v", out, err)
		}
		return rss, heap, n
	}
	// Settled RSS (freed pages returned, see runMemHelper) is 112-117 MiB
	// here; the bound is the 150 MiB target. Before the pages were returned
	// the figure was the start-up peak and needed 175 MiB
	// (docs/decisions/0103-memory-of-the-identity-store.md).
	const bound = 150
	for _, run := range []string{"first start (writes every name)", "restart (reads them)"} {
		rss, heap, n := measure()
		t.Logf("%d tools, %s: process RSS %.1f MiB, heap in use %.1f MiB", n, run, rss, heap)
		if n < 10000 || rss > bound {
			t.Errorf("%d tools, %s: RSS %.1f MiB (bound %d MiB)", n, run, rss, bound)
		}
	}
}

// runMemHelper loads the two static catalogs and prints RSS, heap and tool count.
func runMemHelper() {
	dir := os.Getenv("TP_MEM_DIR")
	if dir == "" {
		dir, _ = os.MkdirTemp("", "tpmem")
		defer os.RemoveAll(dir)
	}
	path := filepath.Join(dir, "ext.json")
	os.WriteFile(path, []byte(fmt.Sprintf(`{"mcpServers": {"toolsdk": {"type": "static", "path": %q}, "mcpm": {"type": "static", "path": %q}}}`,
		os.Getenv("TP_MEM_A"), os.Getenv("TP_MEM_B"))), 0o600)
	srv, err := New(context.Background(), Config{ExtensionsConfig: path}, svckit.Env{DataDir: filepath.Dir(path)})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	srv.WaitSettled(context.Background())
	time.Sleep(300 * time.Millisecond) // the notifier's rebuild
	// Settled memory: the start-up peak's freed pages go back to the OS, as
	// the runtime's scavenger does within minutes in a running process.
	// Without this the figure moved 150-190 MiB with the machine's load
	// (how far the heap grew before a concurrent GC caught up).
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if p := os.Getenv("TP_MEM_PROF"); p != "" {
		f, _ := os.Create(p)
		pprof.WriteHeapProfile(f)
		f.Close()
	}
	fmt.Printf("RSS %.1f HEAP %.1f TOOLS %d\n", vmRSS(nil), float64(ms.HeapInuse)/(1<<20), len(srv.snap.Load().tools))
	srv.Close()
}

// vmRSS returns this process's resident set size in MiB (Linux).
func vmRSS(t testing.TB) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:")), "%f", &kb)
			return kb / 1024
		}
	}
	return -1
}

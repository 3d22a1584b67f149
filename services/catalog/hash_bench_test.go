package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

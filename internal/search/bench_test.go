package search

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/search/vectors"
	"github.com/toolplane/toolplane/internal/testkit"
)

// The benchmarks over the 8,010-tool ToolSDK catalog
// (testdata/mcp-catalog/toolsdk-registry). Run:
//
//	go test ./internal/search -run '^$' -bench . -benchtime 1x        # ratios, update, build, memory
//	go test ./internal/search -run '^$' -bench Search/ -benchtime 2000x # per-mode p50/p99
//
// BenchmarkSearch reports p50/p99 per mode and BenchmarkSearchVsRegex the
// DeerFlow-regex/BM25 and DeerFlow-regex/AUTO latency ratios measured in
// the same run.

// keywordQueries are generic keyword searches an agent sends.
var keywordQueries = []string{
	"github issue", "send email", "weather", "database query", "screenshot",
	"slack message", "create file", "web search", "translate text", "calendar event",
	"stock price", "pdf", "generate image", "kubernetes pods", "sql",
	"notion page", "youtube transcript", "git commit", "docker container", "map directions",
}

func loadCatalog(tb testing.TB) []Document {
	tb.Helper()
	f, err := os.Open(testkit.SharedData(tb, "mcp-catalog/toolsdk-registry/tools.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var docs []Document
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	seen := map[string]int{}
	for sc.Scan() {
		var row struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
			Server      string          `json:"server"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			tb.Fatal(err)
		}
		// The catalog exposes unique names; prefix repeated bare names.
		name := row.Name
		if seen[name]++; seen[name] > 1 {
			name = fmt.Sprintf("%s__%s", row.Server, row.Name)
		}
		pn, pd := ParamsFromSchema(row.InputSchema)
		docs = append(docs, Document{Name: name, OriginalName: row.Name, Server: row.Server, Description: row.Description, ParamNames: pn, ParamDescriptions: pd})
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return docs
}

func buildCatalogIndex(tb testing.TB, docs []Document) *Index {
	tb.Helper()
	ix := NewIndex(Options{})
	if err := ix.Replace(context.Background(), docs); err != nil {
		tb.Fatal(err)
	}
	return ix
}

// latencies runs every keyword query rounds times and returns the sorted
// per-query durations.
func latencies(tb testing.TB, rounds int, run func(q string) error) []time.Duration {
	out := make([]time.Duration, 0, rounds*len(keywordQueries))
	for range rounds {
		for _, q := range keywordQueries {
			start := time.Now()
			if err := run(q); err != nil {
				tb.Fatal(err)
			}
			out = append(out, time.Since(start))
		}
	}
	slices.Sort(out)
	return out
}

func modeRunner(ix *Index, mode Mode) func(string) error {
	return func(q string) error {
		_, err := ix.Search(context.Background(), Request{Query: q, Mode: mode})
		return err
	}
}

func referenceRunner(docs []Document) func(string) error {
	return func(q string) error {
		deerflowRegexReference(docs, q, DefaultLimit)
		return nil
	}
}

func pct(d []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(d)) + 0.5)
	return d[max(0, min(i, len(d)-1))]
}

// BenchmarkSearch measures each product mode, and "deerflow-regex" (the
// plain DeerFlow algorithm, deerflowRegexReference), on the same catalog.
func BenchmarkSearch(b *testing.B) {
	docs := loadCatalog(b)
	ix := buildCatalogIndex(b, docs)
	runners := []struct {
		name string
		run  func(string) error
	}{{"deerflow-regex", referenceRunner(docs)}}
	for _, mode := range []Mode{ModeRegex, ModeBM25, ModeSemantic, ModeAuto} {
		runners = append(runners, struct {
			name string
			run  func(string) error
		}{mode.String(), modeRunner(ix, mode)})
	}
	// The cost of pseudo-relevance feedback (a second BM25F pass).
	prf := NewIndex(Options{PRFDocs: 2})
	if err := prf.Replace(context.Background(), docs); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []Mode{ModeBM25, ModeAuto} {
		runners = append(runners, struct {
			name string
			run  func(string) error
		}{mode.String() + "-prf", modeRunner(prf, mode)})
	}
	for _, r := range runners {
		b.Run(r.name, func(b *testing.B) {
			times := make([]time.Duration, 0, 1024)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				q := keywordQueries[i%len(keywordQueries)]
				start := time.Now()
				if err := r.run(q); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(pct(times, 0.50).Microseconds()), "p50-µs")
			b.ReportMetric(float64(pct(times, 0.99).Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkSearchVsRegex measures the DeerFlow regex algorithm, BM25 and
// AUTO on the same catalog and queries in one run and reports the speed-up
// ratios (p50 and p99), plus our REGEX mode (literal fast path) vs the
// reference.
func BenchmarkSearchVsRegex(b *testing.B) {
	docs := loadCatalog(b)
	ix := buildCatalogIndex(b, docs)
	for b.Loop() {
		re := latencies(b, 5, referenceRunner(docs))
		bm := latencies(b, 5, modeRunner(ix, ModeBM25))
		au := latencies(b, 5, modeRunner(ix, ModeAuto))
		rx := latencies(b, 5, modeRunner(ix, ModeRegex))
		b.ReportMetric(float64(pct(re, 0.5))/float64(pct(rx, 0.5)), "regex/regexmode-p50-x")
		b.ReportMetric(float64(pct(re, 0.5))/float64(pct(bm, 0.5)), "regex/bm25-p50-x")
		b.ReportMetric(float64(pct(re, 0.99))/float64(pct(bm, 0.99)), "regex/bm25-p99-x")
		b.ReportMetric(float64(pct(re, 0.5))/float64(pct(au, 0.5)), "regex/auto-p50-x")
		b.ReportMetric(float64(pct(re, 0.99))/float64(pct(au, 0.99)), "regex/auto-p99-x")
	}
}

// BenchmarkUpsertServer50 replaces the 50 tools of one server in the
// 8,010-tool index (new descriptions, so they are re-analysed and
// re-embedded) and publishes the new snapshot.
func BenchmarkUpsertServer50(b *testing.B) {
	docs := loadCatalog(b)
	ix := buildCatalogIndex(b, docs)
	server := slices.Clone(docs[1000:1050])
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range server {
			server[j].Description = fmt.Sprintf("%s (revision %d)", docs[1000+j].Description, i)
		}
		if err := ix.Upsert(ctx, server...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuild8010 indexes the whole catalog from scratch.
func BenchmarkBuild8010(b *testing.B) {
	docs := loadCatalog(b)
	b.ReportAllocs()
	for b.Loop() {
		buildCatalogIndex(b, docs)
	}
}

// BenchmarkMemory10k reports the heap held by an index of 10,000 tools
// (the catalog plus renamed copies) and, separately, by the decoded static
// vectors (shared by every index of the process); the sum is the resident
// cost of search.
func BenchmarkMemory10k(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("vectors", "words.bin"))
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	tab, err := vectors.Decode(raw)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	vecMB := float64(m1.HeapAlloc-m0.HeapAlloc) / (1 << 20)
	runtime.KeepAlive(tab)
	tab = nil
	if _, err := DefaultEmbedder(); err != nil {
		b.Fatal(err)
	}
	docs := loadCatalog(b)
	for i := 0; len(docs) < 10_000; i++ {
		d := docs[i]
		d.Name = fmt.Sprintf("copy%d__%s", i, d.Name)
		docs = append(docs, d)
	}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ix := buildCatalogIndex(b, docs)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "index-heap-MB")
		b.ReportMetric(vecMB, "vectors-heap-MB")
		runtime.KeepAlive(ix)
	}
}

// BenchmarkSelect10000Names runs a select: with 10,000 names (half unknown)
// over the 8,010-tool catalog; it is capped at 20 results.
func BenchmarkSelect10000Names(b *testing.B) {
	docs := loadCatalog(b)
	ix := buildCatalogIndex(b, docs)
	var names []string
	for i := range 10_000 {
		if i%2 == 0 && i/2 < len(docs) {
			names = append(names, docs[len(docs)-1-i/2].Name)
		} else {
			names = append(names, fmt.Sprintf("unknown_%d", i))
		}
	}
	q := "select:" + strings.Join(names, ",")
	ctx := context.Background()
	for b.Loop() {
		resp, err := ix.Search(ctx, Request{Query: q})
		if err != nil || len(resp.Results) != MaxSelectResults || !resp.Truncated {
			b.Fatalf("%v %v", resp, err)
		}
	}
}

// BenchmarkDecodeVectors decodes the committed vector file.
func BenchmarkDecodeVectors(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("vectors", "words.bin"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := vectors.Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

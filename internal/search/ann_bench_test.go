package search

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/testkit"
)

// expandCatalog grows docs to n documents: copy i of tool j is renamed and
// gets the first eight words of another tool's description appended, so
// copies have distinct text and vectors.
func expandCatalog(docs []Document, n int) []Document {
	out := slices.Clone(docs)
	for i := len(docs); i < n; i++ {
		d := docs[i%len(docs)]
		other := strings.Fields(docs[(i*7919)%len(docs)].Description)
		d.Name = fmt.Sprintf("v%d__%s", i/len(docs), d.Name)
		d.Description += " " + strings.Join(other[:min(8, len(other))], " ")
		out = append(out, d)
	}
	return out
}

// benchQueries are the keyword queries plus natural-language requests: the
// LiveMCPBench DEV tasks and the first 150 MetaTool DEV queries.
func benchQueries(tb testing.TB) []string {
	qs := slices.Clone(keywordQueries)
	for _, r := range readRows[queryRow](tb, testkit.SharedData(tb, "toolret/livemcpbench/queries.jsonl")) {
		qs = append(qs, r.Query)
	}
	mt := readRows[queryRow](tb, testkit.SharedData(tb, "toolret/metatool/queries.jsonl"))
	for _, r := range mt[:150] {
		qs = append(qs, r.Query)
	}
	return qs
}

// autoOnce is the AUTO path of Snapshot.auto (weighted sum), exact or not.
func autoOnce(s *Snapshot, text string, limit int, exact bool) []Result {
	lex := s.bm25(text, nil)
	defer lex.release()
	qv, qMu, qNorm, ok, _ := s.queryVector(context.Background(), text)
	if !ok {
		return s.topResults(lex.hits, lex.scores, lex.fields, false, limit)
	}
	f, _ := s.autoWeighted(lex, qv, qMu, qNorm, nil, limit, exact)
	defer f.release()
	return s.topResults(f.hits, f.scores, f.fields, false, limit)
}

// BenchmarkAutoTopK compares AUTO with the IVF top-k against the exact
// scan of every vector on the same snapshot and queries, in one run, at
// 8,010 tools (ToolSDK) and at 32k and 100k (expandCatalog): p50/p99 of
// both, their ratios, the share of queries whose top 5 agree, and the
// vectors compared per query. Run:
//
//	go test ./internal/search -run '^$' -bench AutoTopK -benchtime 1x
func BenchmarkAutoTopK(b *testing.B) {
	base := loadCatalog(b)
	queries := benchQueries(b)
	for _, n := range []int{len(base), 32_000, 100_000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			docs := expandCatalog(base, n)
			start := time.Now()
			ix := buildCatalogIndex(b, docs)
			build := time.Since(start)
			s := ix.Snapshot()
			if s.ann == nil {
				b.Fatal("no IVF index")
			}
			for b.Loop() {
				var fastT, exactT, kwT []time.Duration
				agree, scanned := 0, 0
				for range 3 {
					for qi, q := range queries {
						t0 := time.Now()
						fast := autoOnce(s, q, DefaultLimit, false)
						t1 := time.Now()
						exact := autoOnce(s, q, DefaultLimit, true)
						t2 := time.Now()
						fastT = append(fastT, t1.Sub(t0))
						if qi < len(keywordQueries) {
							kwT = append(kwT, t1.Sub(t0))
						}
						exactT = append(exactT, t2.Sub(t1))
						if slices.EqualFunc(fast, exact, func(a, b Result) bool { return a.Name == b.Name }) {
							agree++
						}
					}
				}
				for _, q := range queries {
					_, _, n := autoBoth(b, s, q, DefaultLimit)
					scanned += n
				}
				slices.Sort(fastT)
				slices.Sort(exactT)
				slices.Sort(kwT)
				b.ReportMetric(float64(pct(kwT, 0.5).Microseconds()), "topk-keyword-p50-µs")
				b.ReportMetric(float64(pct(kwT, 0.99).Microseconds()), "topk-keyword-p99-µs")
				b.ReportMetric(float64(pct(fastT, 0.5).Microseconds()), "topk-p50-µs")
				b.ReportMetric(float64(pct(fastT, 0.99).Microseconds()), "topk-p99-µs")
				b.ReportMetric(float64(pct(exactT, 0.5).Microseconds()), "exact-p50-µs")
				b.ReportMetric(float64(pct(exactT, 0.99).Microseconds()), "exact-p99-µs")
				b.ReportMetric(float64(pct(exactT, 0.5))/float64(pct(fastT, 0.5)), "exact/topk-p50-x")
				b.ReportMetric(float64(pct(exactT, 0.99))/float64(pct(fastT, 0.99)), "exact/topk-p99-x")
				b.ReportMetric(float64(agree)/float64(3*len(queries)), "top5-agree")
				b.ReportMetric(100*float64(scanned)/float64(len(queries)*n), "vectors-compared-%")
				b.ReportMetric(build.Seconds(), "build-s")
			}
		})
	}
}

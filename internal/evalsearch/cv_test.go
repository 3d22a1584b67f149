package evalsearch

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/search"
)

func TestBootstrap(t *testing.T) {
	same := make([]QueryScore, 50)
	for i := range same {
		same[i] = QueryScore{R5: 0.4}
	}
	if ci := Bootstrap(same, func(q QueryScore) float64 { return q.R5 }, 500, 7); !near(ci[0], 0.4) || !near(ci[1], 0.4) {
		t.Fatalf("constant scores: CI %v, want [0.4 0.4]", ci)
	}
	// Half hits, half misses: mean 0.5, standard error sqrt(.25/400) = 0.025,
	// so the 95% interval is about 0.45–0.55.
	mixed := make([]QueryScore, 400)
	for i := range mixed {
		if i%2 == 0 {
			mixed[i].R5 = 1
		}
	}
	f := func(q QueryScore) float64 { return q.R5 }
	ci := Bootstrap(mixed, f, 2000, 7)
	if ci[0] < 0.43 || ci[0] > 0.47 || ci[1] < 0.53 || ci[1] > 0.57 {
		t.Fatalf("mixed scores: CI %v, want about [0.45 0.55]", ci)
	}
	if again := Bootstrap(mixed, f, 2000, 7); again != ci {
		t.Fatalf("not reproducible: %v then %v", ci, again)
	}
	if d := PairedDiffCI(mixed, mixed, f, 500, 1); d != [2]float64{} {
		t.Fatalf("a set minus itself: %v", d)
	}
}

func TestAssignFolds(t *testing.T) {
	var qs []Query
	for i := range 103 {
		qs = append(qs, Query{ID: fmt.Sprintf("q%d", i)})
	}
	folds := AssignFolds(qs, 5)
	n := make([]int, 5)
	for _, f := range folds {
		n[f]++
	}
	for f, c := range n {
		if c != 20 && c != 21 {
			t.Fatalf("fold %d has %d of 103 queries: %v", f, c, n)
		}
	}
	for i, f := range AssignFolds(qs, 5) {
		if folds[i] != f {
			t.Fatal("fold assignment not deterministic")
		}
	}
}

// cvSet is a catalog where the lexical ranker alone gets the "cat" queries
// right and a strongly semantic setting cannot hurt the others.
func cvFiles(t *testing.T) (tools, queries string) {
	t.Helper()
	dir := t.TempDir()
	tools, queries = filepath.Join(dir, "tools.jsonl"), filepath.Join(dir, "queries.jsonl")
	var tl, ql strings.Builder
	words := []string{"weather", "email", "calendar", "invoice", "translate", "resize", "database", "github", "slack", "stock"}
	for _, w := range words {
		fmt.Fprintf(&tl, `{"name":"%s_tool","description":"Works with %s data and %s records","input_schema":null,"server":"s%s"}`+"\n", w, w, w, w)
	}
	for i := range 40 {
		w := words[i%len(words)]
		fmt.Fprintf(&ql, `{"id":"q%d","query":"please handle the %s for me (%d)","relevant":["%s_tool"]}`+"\n", i, w, i, w)
	}
	// One query over the 4 KiB tool_search limit.
	long := strings.Repeat("weather ", 600)
	fmt.Fprintf(&ql, `{"id":"long","query":"%s","relevant":["weather_tool"]}`+"\n", long)
	if err := os.WriteFile(tools, []byte(tl.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(queries, []byte(ql.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return tools, queries
}

func TestOverLimitQueryIsRefusedAndScoredAsMiss(t *testing.T) {
	tools, queries := cvFiles(t)
	rep, err := Evaluate(context.Background(), Options{ToolsPath: tools, QueriesPath: queries})
	if err != nil {
		t.Fatalf("an over-limit query aborted the run: %v", err)
	}
	if len(strings.Repeat("weather ", 600)) <= search.MaxQueryBytes {
		t.Fatal("test query is not over the limit")
	}
	for _, m := range rep.Modes {
		if m.Refused != 1 || m.Queries != 41 {
			t.Errorf("%s: refused %d of %d, want 1 of 41", m.Mode, m.Refused, m.Queries)
		}
		last := rep.PerQuery(m.Mode)[40]
		if !last.Refused || last.R5 != 0 || last.NDCG10 != 0 || last.RR != 0 {
			t.Errorf("%s: refused query scored %+v, want a miss", m.Mode, last)
		}
	}
	// The other 40 queries are easy lexically: bm25 gets each at rank 1.
	if m := rep.Mode("bm25"); !near(m.R1, 40.0/41) {
		t.Errorf("bm25 R@1 %.3f, want 40/41", m.R1)
	}
}

func TestCrossValidateOutOfFold(t *testing.T) {
	tools, queries := cvFiles(t)
	rep, err := Evaluate(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Modes: []string{"bm25"}, Folds: 4})
	if err != nil {
		t.Fatal(err)
	}
	cv := rep.CV
	if cv == nil || cv.Folds != 4 || len(cv.PerFold) != 4 || len(cv.Grid) != len(fusionGrid()) {
		t.Fatalf("cv %+v", cv)
	}
	// Every out-of-fold query carries the score of the setting chosen on the
	// other folds, which is the best mean of the other folds' objectives.
	all, _ := readJSONL[Query](queries)
	folds := AssignFolds(all, 4)
	oof := cv.OutOfFoldScores()
	for f, fold := range cv.PerFold {
		bestMean, chosenMean := math.Inf(-1), 0.0
		for _, g := range cv.Grid {
			var s float64
			for i, v := range g.Folds {
				if i != f {
					s += v
				}
			}
			bestMean = max(bestMean, s/3)
			if g.Name == fold.Chosen {
				chosenMean = s / 3
			}
		}
		if !near(bestMean, chosenMean) {
			t.Errorf("fold %d: chose %s (mean %.4f), best mean on the other folds is %.4f", f, fold.Chosen, chosenMean, bestMean)
		}
		var r5 float64
		n := 0
		for i, qf := range folds {
			if qf == f {
				r5 += oof[i].R5
				n++
			}
		}
		if n != fold.Queries || !near(r5/float64(n), fold.R5) {
			t.Errorf("fold %d: %d queries R@5 %.3f, report says %d / %.3f", f, n, r5/float64(n), fold.Queries, fold.R5)
		}
	}
	if !oof[40].Refused {
		t.Error("the over-limit query is not refused out-of-fold")
	}
	if _, err := Evaluate(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Folds: 1}); err == nil || !strings.Contains(err.Error(), "folds") {
		t.Errorf("folds 1: %v", err)
	}
	if _, err := Evaluate(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Folds: 2, Grid: "huge"}); err == nil || !strings.Contains(err.Error(), "grid") {
		t.Errorf("unknown grid: %v", err)
	}
}

func TestPRFGrid(t *testing.T) {
	grid, err := GridByName(GridPRF)
	if err != nil {
		t.Fatal(err)
	}
	if len(grid) != 36 {
		t.Fatalf("prf grid has %d settings, want 36", len(grid))
	}
	names := map[string]bool{}
	on, off := 0, 0
	base := search.Options{PRFDocs: 7, PRFWeight: 0.9}
	for _, s := range grid {
		if names[s.Name] {
			t.Errorf("duplicate setting name %q", s.Name)
		}
		names[s.Name] = true
		o := s.Apply(base)
		switch {
		case s.PRFDocs < 0:
			off++
			if o.PRFDocs >= 0 || !strings.HasSuffix(s.Name, "prf=off") {
				t.Errorf("%s: PRFDocs %d, want feedback off", s.Name, o.PRFDocs)
			}
		default:
			on++
			if o.PRFDocs != s.PRFDocs || o.PRFWeight != s.PRFWeight {
				t.Errorf("%s: applied %d/%v", s.Name, o.PRFDocs, o.PRFWeight)
			}
		}
	}
	if off != 6 || on != 30 {
		t.Errorf("off %d, on %d settings; want 6 and 30", off, on)
	}
	// A setting without PRF keeps the base's feedback.
	if o := fusionGrid()[2].Apply(base); o.PRFDocs != 7 || o.PRFWeight != 0.9 {
		t.Errorf("fusion setting changed feedback: %d/%v", o.PRFDocs, o.PRFWeight)
	}
	if _, err := GridByName("nope"); err == nil || !strings.Contains(err.Error(), GridPRF) {
		t.Errorf("unknown grid error %v, want the list with %s", err, GridPRF)
	}
}

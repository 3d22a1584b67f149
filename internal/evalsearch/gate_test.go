package evalsearch

import (
	"bytes"
	"context"
	"testing"

	"github.com/toolplane/toolplane/internal/testkit"
)

// toolret returns the tools and queries files of a toolret set, failing
// under CI=true and skipping elsewhere when the data is missing
// (testkit.SharedData).
func toolret(t *testing.T, set string) (tools, queries string) {
	t.Helper()
	tools = testkit.SharedData(t, "toolret/"+set+"/tools.jsonl")
	queries = testkit.SharedData(t, "toolret/"+set+"/queries.jsonl")
	return tools, queries
}

// TestGateAutoBeatsBaseline is the CI gate of docs/search.md: on the DEV
// part of each toolret benchmark, in the same run, AUTO's out-of-fold
// Recall@5 (5-fold cross-validation of the semantic weight, each fold
// scored with the weight chosen on the other folds) must beat bm25-basic by
// at least 0.05, and the out-of-fold figures must lie within the 95%
// intervals of the full-DEV figures of the setting chosen on the mean (no
// fold-to-fold cliffs). About 3 s of CPU, almost all of it MetaTool's 6,243
// queries × 6 settings.
func TestGateAutoBeatsBaseline(t *testing.T) {
	for _, set := range []string{"livemcpbench", "metatool"} {
		t.Run(set, func(t *testing.T) {
			tools, queries := toolret(t, set)
			rep, err := Evaluate(context.Background(), Options{
				ToolsPath:   tools,
				QueriesPath: queries,
				Name:        set,
				Modes:       []string{ModeBM25Basic, "auto"},
				Split:       SplitDev,
				Folds:       5,
				Grid:        GridFusion,
			})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_ = WriteTable(&buf, rep)
			t.Logf("%s DEV\n%s", set, buf.String())
			base, oof := rep.Mode(ModeBM25Basic), rep.CV.OutOfFold
			diff := PairedDiffCI(rep.CV.OutOfFoldScores(), rep.PerQuery(ModeBM25Basic), func(q QueryScore) float64 { return q.R5 }, 2000, 1)
			t.Logf("out-of-fold AUTO − bm25-basic Recall@5: %+.3f (95%% CI %+.3f…%+.3f)", oof.R5-base.R5, diff[0], diff[1])
			if d := oof.R5 - base.R5; d < 0.05 {
				t.Errorf("%s DEV: out-of-fold AUTO Recall@5 %.3f beats bm25-basic %.3f by %.3f, want >= 0.05", set, oof.R5, base.R5, d)
			}
			if !rep.CV.WithinCI {
				t.Errorf("%s DEV: out-of-fold R@5 %.3f / nDCG@10 %.3f outside the full-DEV intervals %v / %v of %s",
					set, oof.R5, oof.NDCG10, rep.CV.ChosenFull.R5CI, rep.CV.ChosenFull.NDCG10CI, rep.CV.Chosen)
			}
		})
	}
}

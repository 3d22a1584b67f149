package evalsearch

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/internal/testkit"
)

// dataDir returns the repository's data folder (testdata/, see
// testdata/README.md) through testkit's locator.
func dataDir(t *testing.T) string {
	t.Helper()
	return filepath.Dir(filepath.Dir(filepath.Dir(testkit.SharedData(t, "toolret/metatool/queries.jsonl"))))
}

// TestGateAutoBeatsBaseline is the CI gate of issue 4: on the DEV part of
// each benchmark, in the same run, AUTO must beat bm25-basic by at least
// 0.05 Recall@5.
func TestGateAutoBeatsBaseline(t *testing.T) {
	dir := dataDir(t)
	for _, set := range []string{"livemcpbench", "metatool"} {
		t.Run(set, func(t *testing.T) {
			opts := Options{
				ToolsPath:   filepath.Join(dir, "toolret", set, "tools.jsonl"),
				QueriesPath: filepath.Join(dir, "toolret", set, "queries.jsonl"),
				Modes:       []string{ModeBM25Basic, "auto"},
				Split:       SplitDev,
			}
			if testing.Short() && set == "metatool" {
				opts.Modes = AllModes[1:2]
			}
			rep, err := Evaluate(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_ = WriteTable(&buf, rep)
			t.Logf("%s DEV\n%s", set, buf.String())
			base, auto := rep.Mode(ModeBM25Basic), rep.Mode("auto")
			if auto == nil {
				return
			}
			if d := auto.R5 - base.R5; d < 0.05 {
				t.Fatalf("%s DEV: AUTO Recall@5 %.3f beats bm25-basic %.3f by %.3f, want >= 0.05", set, auto.R5, base.R5, d)
			}
		})
	}
}

package evalsearch

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// dataDir returns <module root>/../shared/data, failing when CI=true and the
// data is missing, skipping otherwise.
func dataDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	dir := filepath.Join(root, "..", "shared", "data")
	if _, err := os.Stat(filepath.Join(dir, "toolret", "metatool", "queries.jsonl")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("benchmark data missing under %s (required when CI=true): %v", dir, err)
		}
		t.Skipf("benchmark data missing under %s: %v", dir, err)
	}
	return dir
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

package evalsearch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestReportAllModes prints the full table for every mode on both DEV sets
// when EVAL_REPORT=1 (used to write docs/search.md).
func TestReportAllModes(t *testing.T) {
	if os.Getenv("EVAL_REPORT") != "1" {
		t.Skip("set EVAL_REPORT=1 to print the full evaluation table")
	}
	dir := dataDir(t)
	for _, set := range []string{"livemcpbench", "metatool"} {
		rep, err := Evaluate(context.Background(), Options{
			ToolsPath:   filepath.Join(dir, "toolret", set, "tools.jsonl"),
			QueriesPath: filepath.Join(dir, "toolret", set, "queries.jsonl"),
			Split:       SplitDev,
		})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_ = WriteTable(&buf, rep)
		t.Logf("%s DEV\n%s", set, buf.String())
	}
}

package evalsearch

import (
	"bytes"
	"context"
	"os"
	"testing"
)

// TestReportAllModes prints the full tables (every mode, the full grid
// cross-validated) on both DEV sets and on the catalog benchmark when
// EVAL_REPORT=1 (used to write docs/search.md; `make eval` prints the same
// through the binary).
func TestReportAllModes(t *testing.T) {
	if os.Getenv("EVAL_REPORT") != "1" {
		t.Skip("set EVAL_REPORT=1 to print the full evaluation tables")
	}
	for _, set := range []string{"livemcpbench", "metatool"} {
		tools, queries := toolret(t, set)
		rep, err := Evaluate(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Name: set, Split: SplitDev, Folds: 5, Grid: GridFull})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_ = WriteTable(&buf, rep)
		t.Logf("%s DEV\n%s", set, buf.String())
	}
	cb := catalogBench(t)
	for _, part := range []struct {
		name string
		set  Set
	}{{"train", cb.Train}, {"bench", cb.Bench}} {
		rep, err := Evaluate(context.Background(), Options{Tools: part.set.Tools, Queries: part.set.Queries, Name: "catalog " + part.name, Folds: 5, Grid: GridFull})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_ = WriteTable(&buf, rep)
		t.Logf("catalog benchmark %s\n%s", part.name, buf.String())
	}
}

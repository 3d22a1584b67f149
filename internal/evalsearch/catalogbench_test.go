package evalsearch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/testkit"
)

func catalogBench(t *testing.T) *CatalogBench {
	t.Helper()
	cat := testkit.SharedData(t, "mcp-catalog/mcpm-registry/tools.jsonl")
	lt, _ := toolret(t, "livemcpbench")
	mt, _ := toolret(t, "metatool")
	cb, err := BuildCatalogBenchmark(cat, []string{lt, mt})
	if err != nil {
		t.Fatal(err)
	}
	return cb
}

func TestCatalogBenchmarkSmall(t *testing.T) {
	dir := t.TempDir()
	cat, ex := filepath.Join(dir, "cat.jsonl"), filepath.Join(dir, "ex.jsonl")
	rows := ""
	for _, s := range []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"} {
		rows += `{"name":"` + s + `_get","description":"Get ` + s + ` things","input_schema":{"properties":{"b":{"description":"which ` + s + ` record to fetch now"},"a":{"description":"first","title":"A title"}}},"server":"` + s + `"}` + "\n"
		rows += `{"name":"` + s + `_put","description":"Seen in toolret ` + s + `","input_schema":{"properties":{"x":{"description":"store the ` + s + ` value somewhere safe"}}},"server":"` + s + `"}` + "\n"
	}
	exRows := ""
	for _, s := range []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"} {
		exRows += `{"name":"x","description":"  Seen in toolret ` + s + ` ","input_schema":null,"server":null}` + "\n"
	}
	if err := os.WriteFile(cat, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ex, []byte(exRows), 0o600); err != nil {
		t.Fatal(err)
	}
	cb, err := BuildCatalogBenchmark(cat, []string{ex})
	if err != nil {
		t.Fatal(err)
	}
	if cb.Stats.DroppedToolret != 6 || cb.Stats.TrainTools+cb.Stats.BenchTools != 6 {
		t.Fatalf("stats %+v", cb.Stats)
	}
	for _, set := range []Set{cb.Train, cb.Bench} {
		for _, tl := range set.Tools {
			if strings.HasSuffix(tl.Name, "_put") || tl.InputSchema != nil {
				t.Errorf("indexed %+v (dropped tool, or schema kept)", tl)
			}
		}
		for _, q := range set.Queries {
			// Parameter-name order (a before b); titles never used.
			if !strings.HasPrefix(q.Query, "first; which ") || strings.Contains(q.Query, "title") || len(q.Relevant) != 1 {
				t.Errorf("query %+v", q)
			}
		}
	}
}

// TestCatalogBenchmarkShared checks the benchmark built from the shared
// mcpm-registry catalog: no description of a toolret set survives, train
// and bench servers are disjoint, every label is a tool of its own part.
func TestCatalogBenchmarkShared(t *testing.T) {
	cb := catalogBench(t)
	lt, _ := toolret(t, "livemcpbench")
	mt, _ := toolret(t, "metatool")
	forbidden := map[string]bool{}
	for _, p := range []string{lt, mt} {
		ts, err := readJSONL[Tool](p)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range ts {
			if d := strings.TrimSpace(tl.Description); d != "" {
				forbidden[d] = true
			}
		}
	}
	servers := [2]map[string]bool{{}, {}}
	for part, set := range []Set{cb.Train, cb.Bench} {
		names := map[string]bool{}
		for _, tl := range set.Tools {
			if forbidden[strings.TrimSpace(tl.Description)] {
				t.Fatalf("%s: description occurs in a toolret set", tl.Name)
			}
			servers[part][*tl.Server] = true
			names[tl.Name] = true
		}
		for _, q := range set.Queries {
			for _, r := range q.Relevant {
				if !names[r] {
					t.Fatalf("query %s labels %s, not a tool of its part", q.ID, r)
				}
			}
		}
	}
	for s := range servers[0] {
		if servers[1][s] {
			t.Fatalf("server %s in both parts", s)
		}
	}
	if cb.Stats.DroppedToolret == 0 || cb.Stats.BenchQueries < 300 || cb.Stats.TrainQueries < 300 {
		t.Fatalf("stats %+v", cb.Stats)
	}
	t.Logf("%+v", cb.Stats)
}

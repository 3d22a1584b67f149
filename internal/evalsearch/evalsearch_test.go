package evalsearch

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T) (tools, queries string) {
	t.Helper()
	dir := t.TempDir()
	tools = filepath.Join(dir, "tools.jsonl")
	queries = filepath.Join(dir, "queries.jsonl")
	tl := `{"name":"read_file","description":"Read a file from disk","input_schema":{"type":"object","properties":{"path":{"description":"File path"}}},"server":"fs"}
{"name":"send_email","description":"Send an email message","input_schema":null,"server":null}
{"name":"get_weather","description":"Weather forecast for a city","input_schema":null,"server":"weather"}
`
	ql := `{"id":"q1","query":"read the file","relevant":["read_file"]}
{"id":"q2","query":"email my boss and check the weather","relevant":["send_email","get_weather"],"equivalent":{}}
{"id":"q3","query":"nothing matches here zzz","relevant":["read_file"]}
{"id":"q4","query":"unlabelled","relevant":[]}
`
	if err := os.WriteFile(tools, []byte(tl), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(queries, []byte(ql), 0o600); err != nil {
		t.Fatal(err)
	}
	return tools, queries
}

func TestEvaluateMetrics(t *testing.T) {
	tools, queries := writeFiles(t)
	rep, err := Evaluate(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Modes: []string{ModeBM25Basic, "bm25"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tools != 3 || rep.Queries != 3 {
		t.Fatalf("tools %d queries %d", rep.Tools, rep.Queries)
	}
	for _, m := range rep.Modes {
		// q1: hit at 1; q2: both relevant in top 3 (order may vary); q3: miss.
		if !near(m.R1, (1+0.5+0)/3) || !near(m.R5, 2.0/3) || !near(m.MRR, 2.0/3) {
			t.Errorf("%s: R1 %.3f R5 %.3f MRR %.3f", m.Mode, m.R1, m.R5, m.MRR)
		}
		if !near(m.NDCG10, (1+1+0)/3.0) {
			t.Errorf("%s: nDCG %.3f", m.Mode, m.NDCG10)
		}
		if m.P99ms < m.P50ms || m.P50ms <= 0 {
			t.Errorf("%s: latency p50 %v p99 %v", m.Mode, m.P50ms, m.P99ms)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestRunOutputs(t *testing.T) {
	tools, queries := writeFiles(t)
	var buf bytes.Buffer
	if err := Run(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Output: "json"}, &buf); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Modes []map[string]any `json:"modes"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Modes) != len(AllModes) {
		t.Fatalf("%d modes", len(rep.Modes))
	}
	for _, key := range []string{"recall@1", "recall@3", "recall@5", "recall@10", "ndcg@10", "mrr", "latency_p50_ms", "latency_p99_ms"} {
		if _, ok := rep.Modes[0][key]; !ok {
			t.Errorf("json lacks %q", key)
		}
	}
	buf.Reset()
	if err := Run(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Modes: []string{"auto"}}, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "R@5") || !strings.Contains(buf.String(), "auto") {
		t.Fatalf("table:\n%s", buf.String())
	}
	if err := Run(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Output: "xml"}, &buf); err == nil {
		t.Fatal("xml output accepted")
	}
	if err := Run(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Modes: []string{"fuzzy"}}, &buf); err == nil {
		t.Fatal("unknown mode accepted")
	}
	if err := Run(context.Background(), Options{ToolsPath: filepath.Join(t.TempDir(), "missing"), QueriesPath: queries}, &buf); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestSplit(t *testing.T) {
	// The README rule: first 8 hex digits of SHA-256(id) mod 100 < 30.
	dev := 0
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"} {
		if IsDev(id) {
			dev++
		}
		if IsDev(id) != IsDev(id) {
			t.Fatal("not deterministic")
		}
	}
	if dev == 0 || dev == 20 {
		t.Fatalf("%d of 20 ids are DEV", dev)
	}
	// Every query of the shared DEV files is DEV by the rule.
	_, path := toolret(t, "livemcpbench")
	qs, err := readJSONL[Query](path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if !IsDev(q.ID) {
			t.Fatalf("query %s in the DEV file is not DEV by the README rule", q.ID)
		}
	}
}

func TestBasicTokens(t *testing.T) {
	got := strings.Join(basicTokens("getWeather for 北京, v2!"), " ")
	if got != "get weather for 北 京 v2" {
		t.Fatalf("got %q", got)
	}
}

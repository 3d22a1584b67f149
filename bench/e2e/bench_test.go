//go:build benche2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// mode is TOOLPLANE_BENCH_E2E: "short" (CI: one 8,010-tool process, median
// of 3 rounds, ratio gate) or "long" (make bench-e2e: the scaling table, the
// hops and RSS after 60 s of mixed traffic).
func mode() string {
	if m := os.Getenv("TOOLPLANE_BENCH_E2E"); m != "" {
		return m
	}
	return "short"
}

// ratios are the gated figures: each a Toolplane cost over its baseline
// from the same round (lower is better).
type ratios map[string]float64

// hopRound measures, on one process with the echo server, every hop figure
// once and prints it next to its baseline. It returns the round's ratios.
func hopRound(t *testing.T, b *bench, direct func(), n int) ratios {
	noop := b.noop(n)
	dir := timeN(n, direct)
	cat := b.callCatalog(n)
	rt := b.callRuntime(n)
	ts := b.toolSearch(max(1, n/40))
	py := b.python(max(3, n/20))
	warm := b.assembleWarm(n)
	rest := b.restAssemble(max(10, n/4))
	after := b.assembleAfterPolicyChange(max(5, n/20))
	a1, l1 := b.authorize(1, 2*time.Second)
	a4, l4 := b.authorize(4, 2*time.Second)
	a16, l16 := b.authorize(16, 2*time.Second)
	logf(t, "load average %s", loadAvg())
	logf(t, "%-44s %-24s %-24s %s", "measure (p50 / p99)", "Toolplane", "baseline", "ratio")
	row := func(name string, got, base stats, baseName string) {
		logf(t, "%-44s %-24s %-24s %.2fx", name, ms(got.p50)+" / "+ms(got.p99), ms(base.p50)+" / "+ms(base.p99)+" "+baseName, float64(got.p50)/float64(base.p50))
	}
	row(fmt.Sprintf("tool_search via runtime (%d tools)", b.tools), ts, py, "(python3 DeerFlow)")
	row("CallTool via catalog", cat, dir, "(direct mcp-go)")
	row("CallTool via runtime", rt, dir, "(direct mcp-go)")
	logf(t, "%-44s catalog +%s (goal <= 1 rtt + 25us = %s), runtime +%s (goal <= 2 rtt + 60us = %s)", "added p50 over direct",
		ms(cat.p50-dir.p50), ms(noop.p50+25*time.Microsecond), ms(rt.p50-dir.p50), ms(2*noop.p50+60*time.Microsecond))
	row("gRPC no-op (health Check)", noop, noop, "(floor)")
	row(fmt.Sprintf("AssembleTools warm (%d tools)", b.tools), warm, noop, "(no-op)")
	row("AssembleTools warm over REST", rest, warm, "(gRPC)")
	row("AssembleTools after a policy change", after, warm, "(warm)")
	logf(t, "%-44s 1: %.0f/s p99 %s | 4: %.0f/s p99 %s | 16: %.0f/s p99 %s (goal >= 20000/s at 16, p99 < 1 ms at 4)", "Authorize over gRPC", a1, ms(l1.p99), a4, ms(l4.p99), a16, ms(l16.p99))
	return ratios{
		"tool_search_runtime_over_python_p50": float64(ts.p50) / float64(py.p50),
		"calltool_catalog_over_direct_p50":    float64(cat.p50) / float64(dir.p50),
		"calltool_runtime_over_direct_p50":    float64(rt.p50) / float64(dir.p50),
		"assemble_warm_over_noop_p50":         float64(warm.p50) / float64(noop.p50),
		"authorize_1_caller_over_noop_p50":    float64(l1.p50) / float64(noop.p50),
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2]
}

// baselineFile holds the committed ratios of the short form.
type baselineFile struct {
	Note      string             `json:"note"`
	Tolerance float64            `json:"tolerance"`
	Ratios    map[string]float64 `json:"ratios"`
}

// TestShort is the CI form: one process with the 8,010-tool catalog and
// server-everything, three rounds, the median of each ratio compared with
// baseline.json; it fails only when a ratio is more than 25% worse.
func TestShort(t *testing.T) {
	if mode() != "short" {
		t.Skip("TOOLPLANE_BENCH_E2E=long runs TestLong")
	}
	t0 := time.Now()
	b := startBench(t, 8010, true)
	direct := directEcho(t)
	rounds := map[string][]float64{}
	for r := 0; r < 3; r++ {
		logf(t, "--- round %d", r+1)
		for k, v := range hopRound(t, b, direct, 200) {
			rounds[k] = append(rounds[k], v)
		}
	}
	got := map[string]float64{}
	for k, v := range rounds {
		got[k] = math.Round(median(v)*100) / 100
	}
	var base baselineFile
	raw, err := os.ReadFile("baseline.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &base); err != nil {
		t.Fatalf("baseline.json: %v", err)
	}
	if os.Getenv("TOOLPLANE_BENCH_E2E_WRITE") == "1" {
		base.Ratios = got
		out, _ := json.MarshalIndent(base, "", "  ")
		if err := os.WriteFile("baseline.json", append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		logf(t, "wrote baseline.json")
	}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var bad []string
	for _, k := range keys {
		want, ok := base.Ratios[k]
		if !ok {
			t.Errorf("ratio %s has no baseline in baseline.json", k)
			continue
		}
		verdict := "ok"
		if got[k] > want*(1+base.Tolerance) {
			verdict = "REGRESSION"
			bad = append(bad, k)
		}
		logf(t, "gate %-40s median %.2fx  baseline %.2fx  (fails above %.2fx)  %s", k, got[k], want, want*(1+base.Tolerance), verdict)
	}
	if len(bad) > 0 {
		t.Errorf("ratio regression beyond %.0f%%: %s", base.Tolerance*100, strings.Join(bad, ", "))
	}
	logf(t, "short form done in %.0fs (load average %s)", time.Since(t0).Seconds(), loadAvg())
}

// TestLong is make bench-e2e: the scaling table at 500, 2k, 8,010, 32k and
// 100k tools (one process each), the hop figures at 8,010 tools (median of
// 3 rounds) and RSS of the process with every real tool (10,257 less the few named like runtime tools) after 60 s of
// mixed traffic.
func TestLong(t *testing.T) {
	if mode() != "long" {
		t.Skip("set TOOLPLANE_BENCH_E2E=long")
	}
	sizes := []int{500, 2000, 8010, 32000, 100000}
	if s := os.Getenv("TOOLPLANE_BENCH_E2E_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			var n int
			fmt.Sscan(f, &n)
			sizes = append(sizes, n)
		}
	}
	type line struct {
		n              int
		ts, py, warm   stats
		after          stats
		load           string
		deferred       int
		startS, bytesK float64
	}
	var table []line
	for _, n := range sizes {
		t.Run(fmt.Sprintf("scale_%d", n), func(t *testing.T) {
			t0 := time.Now()
			b := startBench(t, n, false)
			l := line{n: n, startS: time.Since(t0).Seconds()}
			l.ts = b.toolSearch(5)
			l.py = b.python(5)
			l.warm = b.assembleWarm(50)
			l.after = b.assembleAfterPolicyChange(10)
			l.load = loadAvg()
			table = append(table, l)
			logf(t, "%d tools: tool_search %s / %s, python3 %s / %s, AssembleTools warm %s / %s, after a policy change %s / %s (load %s)", n,
				ms(l.ts.p50), ms(l.ts.p99), ms(l.py.p50), ms(l.py.p99), ms(l.warm.p50), ms(l.warm.p99), ms(l.after.p50), ms(l.after.p99), l.load)
		})
	}
	logf(t, "\nscaling (p50 / p99; python3 = DeerFlow's algorithm on the same file and queries)")
	logf(t, "| tools | tool_search via runtime | python3 DeerFlow | speed-up p50 | AssembleTools warm | after policy change | start s | load |")
	logf(t, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, l := range table {
		logf(t, "| %d | %s / %s | %s / %s | %.1fx | %s / %s | %s / %s | %.1f | %s |", l.n, ms(l.ts.p50), ms(l.ts.p99), ms(l.py.p50), ms(l.py.p99),
			float64(l.py.p50)/float64(l.ts.p50), ms(l.warm.p50), ms(l.warm.p99), ms(l.after.p50), ms(l.after.p99), l.startS, l.load)
	}

	t.Run("hops_8010", func(t *testing.T) {
		b := startBench(t, 8010, true)
		direct := directEcho(t)
		for r := 0; r < 3; r++ {
			logf(t, "--- round %d", r+1)
			hopRound(t, b, direct, 300)
		}
	})

	t.Run("rss_real", func(t *testing.T) {
		b := startBench(t, len(realRows(t)), true)
		settled := b.rssMiB()
		stop := time.Now().Add(60 * time.Second)
		n := 0
		for time.Now().Before(stop) {
			b.toolSearch(1)
			b.assembleWarm(5)
			b.callRuntime(5)
			b.callCatalog(5)
			b.authorize(4, 200*time.Millisecond)
			n++
		}
		logf(t, "RSS with %d real tools: %.0f MiB settled, %.0f MiB after 60 s of mixed traffic (%d mixes; goal < 150 MB; load %s)", b.tools, settled, b.rssMiB(), n, loadAvg())
	})
}

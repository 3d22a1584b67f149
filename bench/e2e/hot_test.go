//go:build benche2e

package e2e

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestHot drives one hop without pause for TOOLPLANE_BENCH_E2E_SECONDS
// (default 20) so that a profile of the process can be taken under that
// load (TOOLPLANE_BENCH_E2E=hot; TOOLPLANE_BENCH_E2E_HOT = catalog, runtime,
// authorize or authorize16; TOOLPLANE_BENCH_E2E_TOOLS, default 500).
func TestHot(t *testing.T) {
	if mode() != "hot" {
		t.Skip("set TOOLPLANE_BENCH_E2E=hot")
	}
	secs, _ := strconv.Atoi(os.Getenv("TOOLPLANE_BENCH_E2E_SECONDS"))
	if secs <= 0 {
		secs = 20
	}
	tools, _ := strconv.Atoi(os.Getenv("TOOLPLANE_BENCH_E2E_TOOLS"))
	if tools <= 0 {
		tools = 500
	}
	b := startBench(t, tools, true)
	logf(t, "pid %d grpc %s http %s", b.p.Pid(), b.p.GRPCAddr, b.p.HTTPAddr)
	if f := os.Getenv("TOOLPLANE_BENCH_E2E_READY"); f != "" {
		_ = os.WriteFile(f, []byte(strconv.Itoa(b.p.Pid())), 0o644)
	}
	d := time.Duration(secs) * time.Second
	stop := time.Now().Add(d)
	n := 0
	switch h := os.Getenv("TOOLPLANE_BENCH_E2E_HOT"); h {
	case "catalog", "runtime":
		for time.Now().Before(stop) {
			var s stats
			if h == "catalog" {
				s = b.callCatalog(200)
			} else {
				s = b.callRuntime(200)
			}
			n += 200
			logf(t, "%s p50 %s p99 %s", h, ms(s.p50), ms(s.p99))
		}
	case "authorize", "authorize16":
		c := 4
		if h == "authorize16" {
			c = 16
		}
		rate, l := b.authorize(c, d)
		logf(t, "authorize %d callers: %.0f/s p50 %s p99 %s", c, rate, ms(l.p50), ms(l.p99))
	default:
		t.Fatalf("TOOLPLANE_BENCH_E2E_HOT=%q: want catalog, runtime, authorize or authorize16", h)
	}
	logf(t, "done: %d calls, load %s", n, loadAvg())
}

// TestHops prints the hop figures only (no search, assembly or Python),
// three rounds on one process: the quick before/after of a change to the
// call path (TOOLPLANE_BENCH_E2E=hops; TOOLPLANE_BENCH_E2E_TOOLS, default 500).
func TestHops(t *testing.T) {
	if mode() != "hops" {
		t.Skip("set TOOLPLANE_BENCH_E2E=hops")
	}
	tools, _ := strconv.Atoi(os.Getenv("TOOLPLANE_BENCH_E2E_TOOLS"))
	if tools <= 0 {
		tools = 500
	}
	b := startBench(t, tools, true)
	direct := directEcho(t)
	for r := 0; r < 3; r++ {
		noop := b.noop(400)
		dir := timeN(400, direct)
		cat := b.callCatalog(400)
		rt := b.callRuntime(400)
		a1, l1 := b.authorize(1, time.Second)
		a4, l4 := b.authorize(4, time.Second)
		a16, l16 := b.authorize(16, time.Second)
		logf(t, "round %d load %s: noop %s direct %s | catalog %s (%.2fx, +%s) runtime %s (%.2fx, +%s) | authorize 1: %.0f/s p50 %s | 4: %.0f/s p99 %s | 16: %.0f/s p99 %s",
			r+1, loadAvg(), ms(noop.p50), ms(dir.p50), ms(cat.p50), float64(cat.p50)/float64(dir.p50), ms(cat.p50-dir.p50),
			ms(rt.p50), float64(rt.p50)/float64(dir.p50), ms(rt.p50-dir.p50), a1, ms(l1.p50), a4, ms(l4.p99), a16, ms(l16.p99))
	}
}

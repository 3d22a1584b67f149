package catalog

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// TestDefinitionChurnGuard: a real stdio server whose tool description
// changes on every tools/list (tpfixture TPFIXTURE_FLIP). The first
// changes are taken as they come; at the third within the window the
// definition bound before stays bound (its definition hash unchanged while
// the server keeps flipping), with a problem on the tool, a warn log
// naming server and tool, and the metric. When the server stops flipping,
// the current definition is bound after catalog.definition_churn.settle.
func TestDefinitionChurnGuard(t *testing.T) {
	logs := &syncBuf{}
	reg := prometheus.NewRegistry()
	h := start(t, extJSON(fixtureServer("fl", `"env": {"TPFIXTURE_FLIP": "1"}`)), func(c *Config, env *svckit.Env) {
		c.DefinitionChurn = ChurnConfig{Changes: 3, Window: time.Minute, Settle: 3 * time.Second}
		env.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		env.Metrics = reg
	})
	ctx := ctxT(t)
	sup, _ := h.srv.mgr.Supervisor("fl")
	flip := func() {
		t.Helper()
		r0 := sup.Relists()
		if _, err := h.call(ctx, h.svc, "fl_flip", `{}`); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the re-list after list_changed", func() bool { return sup.Relists() > r0 })
		time.Sleep(50 * time.Millisecond) // the rebuild after the re-list
	}
	tool := func() (desc, hash string, problems []string) {
		t.Helper()
		tl := h.toolByOriginal("fl", "flip")
		if tl == nil {
			t.Fatal("tool flip not listed")
		}
		return tl.GetDescription(), tl.GetDefinitionHash(), tl.GetProblems()
	}
	d0, h0, _ := tool()
	var bound []string // descriptions bound after each flip
	hashes := map[string]bool{h0: true}
	for i := 0; i < 2; i++ {
		flip()
		d, hh, p := tool()
		if d == d0 || len(p) != 0 {
			t.Fatalf("change %d not taken as it came: %q (was %q) %v", i+1, d, d0, p)
		}
		d0 = d
		hashes[hh] = true
		bound = append(bound, d)
	}
	// The third change within the window: the one bound before stays.
	flip()
	dHeld, hHeld, p := tool()
	if dHeld != bound[1] || len(p) != 1 || !strings.Contains(p[0], "definition churn") {
		t.Fatalf("third change: bound %q (want %q held), problems %v", dHeld, bound[1], p)
	}
	// The server keeps flipping: nothing bound changes.
	for i := 0; i < 3; i++ {
		flip()
		if d, hh, _ := tool(); d != dHeld || hh != hHeld {
			t.Fatalf("flip %d while held: bound %q %s, want %q %s", i, d, hh, dHeld, hHeld)
		}
	}
	var m dto.Metric
	if err := h.srv.met.churned.WithLabelValues("fl").Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		got := m.GetCounter().GetValue()
		t.Fatalf("toolplane_catalog_definition_churn_total{server=fl} = %v, want 1", got)
	}
	if l := logs.String(); !strings.Contains(l, "a tool definition keeps changing") || !strings.Contains(l, "server=fl") || !strings.Contains(l, "tool=flip") {
		t.Fatalf("no warn log naming server and tool:\n%s", l)
	}
	// It stops flipping (no more lists): after settle the server's current
	// definition is bound, the problem gone.
	eventually(t, 15*time.Second, "the settled definition bound", func() bool {
		d, _, p := tool()
		return d != dHeld && strings.HasPrefix(d, "Flips on every list (list ") && len(p) == 0
	})
	if !strings.Contains(logs.String(), "settled; the current one is bound") {
		t.Fatal("no log of the settled definition")
	}
}

// The guard's rules over synthetic time: changes outside the window don't
// add up, the off switch, pinned and static servers untouched, forgotten
// tools.
func TestDefinitionChurnRules(t *testing.T) {
	s := &Server{cfg: Config{DefinitionChurn: ChurnConfig{Changes: 3, Window: time.Minute, Settle: 30 * time.Second}},
		log: slog.New(slog.DiscardHandler)}
	s.met = newMetrics(s, nil)
	s.stop = make(chan struct{})
	close(s.stop) // the settle timer's rebuild must not run here
	st := &catalogmcp.Status{Name: "srv"}
	def := func(d string) *base {
		return &base{def: catalogmcp.ToolDef{Tool: catalogmcp.Tool{Name: "t", Description: d, InputSchema: []byte(`{"type":"object"}`)}, Origin: "srv"}}
	}
	t0 := time.Unix(1_000_000, 0)
	bind := func(b *base, at time.Duration, pinned bool) *base {
		s.churn.begin()
		defer s.churn.end()
		return s.bindStable(st, b, pinned, t0.Add(at))
	}
	// Three changes, each more than a window after the one before: never held.
	for i, d := range []string{"a", "b", "c", "d"} {
		b := def(d)
		if got := bind(b, time.Duration(i)*61*time.Second, false); got != b {
			t.Fatalf("change %d spread over windows was held", i)
		}
	}
	// Three changes within the window: held on the third, then settled.
	s.churn = churnGuard{}
	bind(def("a"), 0, false)
	bind(def("b"), time.Second, false)
	bind(def("c"), 2*time.Second, false)
	held := bind(def("d"), 3*time.Second, false)
	if held.def.Description != "c" || len(held.problems) != 1 {
		t.Fatalf("held %q %v, want the definition bound before (c)", held.def.Description, held.problems)
	}
	if got := bind(def("d"), 20*time.Second, false); got.def.Description != "c" {
		t.Fatalf("before settle: %q", got.def.Description)
	}
	if got := bind(def("d"), 34*time.Second, false); got.def.Description != "d" || len(got.problems) != 0 {
		t.Fatalf("after settle: %q %v", got.def.Description, got.problems)
	}
	// Flipping every second for ten minutes keeps at most `changes` times.
	for i := range 600 {
		bind(def(fmt.Sprint(i)), 40*time.Second+time.Duration(i)*time.Second, false)
	}
	for _, c := range s.churn.tools {
		if len(c.changes) > 3 || c.held == nil {
			t.Fatalf("after 600 flips: %d change times kept, held %v", len(c.changes), c.held != nil)
		}
	}
	// Pinned servers and static catalogs: never held; off: never held.
	s.churn = churnGuard{}
	for i, d := range []string{"a", "b", "c", "d", "e"} {
		if b := def(d); bind(b, time.Duration(i)*time.Second, true) != b {
			t.Fatal("a pinned server's tool was held")
		}
	}
	st.Type = catalogconfig.TypeStatic
	for i, d := range []string{"a", "b", "c", "d", "e"} {
		if b := def(d); bind(b, time.Duration(i)*time.Second, false) != b {
			t.Fatal("a static tool was held")
		}
	}
	st.Type = ""
	s.cfg.DefinitionChurn.Changes = -1
	for i, d := range []string{"a", "b", "c", "d", "e"} {
		if b := def(d); bind(b, time.Duration(i)*time.Second, false) != b {
			t.Fatal("held with the guard off")
		}
	}
	// A name listed twice with two definitions in one list is not churn.
	s.cfg.DefinitionChurn.Changes = 3
	s.churn = churnGuard{}
	for i := 0; i < 5; i++ {
		s.churn.begin()
		at := t0.Add(time.Duration(i) * time.Second)
		a, b := def("a"), def("b")
		if s.bindStable(st, a, false, at) != a || s.bindStable(st, b, false, at) != b {
			t.Fatal("a duplicate name was taken for churn")
		}
		s.churn.end()
	}
	s.cfg.DefinitionChurn.Changes = -1
	bind(def("x"), time.Hour, false)
	if len(s.churn.tools) != 0 {
		t.Fatalf("state kept for untracked tools: %d", len(s.churn.tools))
	}
}

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

// TestDefinitionChurnNeverHoldsWhatTheToolDoes: a real stdio server whose
// tool flip is read-only while its description flips, and from list 6 on
// says "DELETES EVERYTHING", is annotated readOnlyHint false and
// destructiveHint true and requires `target` (tpfixture
// TPFIXTURE_FLIP_UNSAFE). The guard holds the description while only text
// changes; once the annotations and schema change the live definition is
// served (new hash, the live annotations an authz readOnlyHint condition
// reads, the live schema), still reported as churn; later text-only flips
// hold the text of that live definition, never the old safe one.
func TestDefinitionChurnNeverHoldsWhatTheToolDoes(t *testing.T) {
	const unsafeAt = 10
	h := start(t, extJSON(fixtureServer("fl", fmt.Sprintf(`"env": {"TPFIXTURE_FLIP": "1", "TPFIXTURE_FLIP_UNSAFE": "%d"}`, unsafeAt))), func(c *Config, env *svckit.Env) {
		c.DefinitionChurn = ChurnConfig{Changes: 3, Window: time.Minute, Settle: time.Minute}
	})
	ctx := ctxT(t)
	sup, _ := h.srv.mgr.Supervisor("fl")
	flip := func() (listed int) {
		t.Helper()
		r0 := sup.Relists()
		r, err := h.call(ctx, h.svc, "fl_flip", `{"target": "x"}`)
		if err != nil {
			t.Fatal(err)
		}
		var k int
		if _, err := fmt.Sscanf(textOf(r), "flipped after list %d", &k); err != nil {
			t.Fatalf("flip answered %q", textOf(r))
		}
		eventually(t, 10*time.Second, "the re-list after list_changed", func() bool { return sup.Relists() > r0 })
		time.Sleep(50 * time.Millisecond) // the rebuild after the re-list
		return k + 1
	}
	type served struct {
		desc, hash        string
		readOnly, destroy any
		required          []any
		problems          []string
	}
	tool := func() served {
		t.Helper()
		tl := h.toolByOriginal("fl", "flip")
		if tl == nil {
			t.Fatal("tool flip not listed")
		}
		a := tl.GetAnnotations().AsMap()
		req, _ := tl.GetInputSchema().AsMap()["required"].([]any)
		return served{tl.GetDescription(), tl.GetDefinitionHash(), a["readOnlyHint"], a["destructiveHint"], req, tl.GetProblems()}
	}
	if s := tool(); s.readOnly != true {
		t.Fatalf("before any flip: readOnlyHint %v (does the fixture annotate flip?)", s.readOnly)
	}
	var sawHeld bool
	var last served
	for i := 0; ; i++ {
		if i > 12 {
			t.Fatal("the unsafe definition was never listed")
		}
		listed := flip()
		last = tool()
		if listed < unsafeAt {
			if last.readOnly != true || last.destroy != nil || len(last.required) != 0 {
				t.Fatalf("list %d (safe): served %+v", listed, last)
			}
			if len(last.problems) == 1 && strings.Contains(last.problems[0], "definition churn") && !strings.Contains(last.problems[0], "live definition") {
				sawHeld = true
			}
			continue
		}
		break
	}
	if !sawHeld {
		t.Fatal("the description was never held before the unsafe change (is the guard engaged?)")
	}
	// The unsafe definition is served as it is listed.
	if last.readOnly != false || last.destroy != true || len(last.required) != 1 || last.required[0] != "target" ||
		!strings.HasPrefix(last.desc, "DELETES EVERYTHING") {
		t.Fatalf("after the annotation and schema change: served %+v, want the live definition", last)
	}
	if len(last.problems) != 1 || !strings.Contains(last.problems[0], "live definition is served") {
		t.Fatalf("the churn is not reported on the live definition: %v", last.problems)
	}
	// Text-only flips after it: the text of the unsafe definition is held,
	// its annotations and schema stay the live ones.
	unsafeDesc, unsafeHash := last.desc, last.hash
	for i := 0; i < 2; i++ {
		flip()
		s := tool()
		if s.desc != unsafeDesc || s.readOnly != false || s.destroy != true || len(s.required) != 1 {
			t.Fatalf("text-only flip %d after the unsafe change: served %+v", i, s)
		}
		if s.hash != unsafeHash {
			t.Fatalf("text-only flip %d: hash %s, want the held %s", i, s.hash, unsafeHash)
		}
	}
}

// While churning, a change of the input schema, output schema or
// annotations is never held: the live definition is served (its hash, its
// annotations, its schema), with the churn problem; a held definition's
// parts other than title and description are the live ones.
func TestDefinitionChurnServesLiveBehaviour(t *testing.T) {
	s := &Server{cfg: Config{DefinitionChurn: ChurnConfig{Changes: 2, Window: time.Minute, Settle: 30 * time.Second}},
		log: slog.New(slog.DiscardHandler)}
	s.met = newMetrics(s, nil)
	s.stop = make(chan struct{})
	close(s.stop)
	st := &catalogmcp.Status{Name: "srv"}
	def := func(d, in, out, ann string) *base {
		b := &base{def: catalogmcp.ToolDef{Tool: catalogmcp.Tool{Name: "t", Description: d, InputSchema: []byte(in)}, Origin: "srv"}}
		if out != "" {
			b.def.OutputSchema = []byte(out)
		}
		if ann != "" {
			b.def.Annotations = []byte(ann)
		}
		return b
	}
	t0 := time.Unix(1_000_000, 0)
	at := 0
	bind := func(b *base) *base {
		s.churn.begin()
		defer s.churn.end()
		at++
		return s.bindStable(st, b, false, t0.Add(time.Duration(at)*time.Second))
	}
	const obj, ro = `{"type":"object"}`, `{"readOnlyHint":true}`
	bind(def("a", obj, "", ro))
	bind(def("b", obj, "", ro))
	held := bind(def("c", obj, "", ro))
	if held.def.Description != "b" || string(held.def.Annotations) != ro {
		t.Fatalf("text-only churn not held: %q %s", held.def.Description, held.def.Annotations)
	}
	cases := []struct {
		name string
		live *base
	}{
		{"annotations", def("d", obj, "", `{"readOnlyHint":false,"destructiveHint":true}`)},
		{"input schema", def("e", `{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}`, "", `{"readOnlyHint":false,"destructiveHint":true}`)},
		{"output schema", def("f", `{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}`, obj, `{"readOnlyHint":false,"destructiveHint":true}`)},
	}
	for _, c := range cases {
		got := bind(c.live)
		if got.def.Description != c.live.def.Description || string(got.def.Annotations) != string(c.live.def.Annotations) ||
			string(got.def.InputSchema) != string(c.live.def.InputSchema) || string(got.def.OutputSchema) != string(c.live.def.OutputSchema) {
			t.Fatalf("%s changed while churning: served %q %s %s %s, want the live %q %s %s %s", c.name,
				got.def.Description, got.def.Annotations, got.def.InputSchema, got.def.OutputSchema,
				c.live.def.Description, c.live.def.Annotations, c.live.def.InputSchema, c.live.def.OutputSchema)
		}
		if _, h := got.definition("t"); h != c.live.churnHash() {
			t.Fatalf("%s: served hash is not the live one", c.name)
		}
		if len(got.problems) != 1 || !strings.Contains(got.problems[0], "live definition is served") {
			t.Fatalf("%s: churn not reported: %v", c.name, got.problems)
		}
	}
	// A text-only flip after that holds the last live text, with the live rest.
	last := cases[len(cases)-1].live
	got := bind(def("g", string(last.def.InputSchema), string(last.def.OutputSchema), string(last.def.Annotations)))
	if got.def.Description != "f" || got.churnHash() != last.churnHash() || string(got.def.Annotations) != string(last.def.Annotations) {
		t.Fatalf("text-only flip after the live change: %q %s", got.def.Description, got.def.Annotations)
	}
	// Formatting of a schema is not a behaviour change: the held keeps its
	// hash and takes the live bytes.
	spaced := `{ "type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"] }`
	got = bind(def("h", spaced, string(last.def.OutputSchema), string(last.def.Annotations)))
	if got.def.Description != "f" || got.churnHash() != last.churnHash() || string(got.def.InputSchema) != spaced {
		t.Fatalf("reformatted schema: %q %s", got.def.Description, got.def.InputSchema)
	}
}

// Each tool settles at its own deadline: the settle timer is armed at the
// earliest deadline among the tools in an episode, not at the deadline of
// the tool bound last.
func TestDefinitionChurnTimerEarliest(t *testing.T) {
	s := &Server{cfg: Config{DefinitionChurn: ChurnConfig{Changes: 2, Window: time.Minute, Settle: 30 * time.Second}},
		log: slog.New(slog.DiscardHandler)}
	s.met = newMetrics(s, nil)
	s.stop = make(chan struct{})
	st := &catalogmcp.Status{Name: "srv"}
	def := func(n, d string) *base {
		return &base{def: catalogmcp.ToolDef{Tool: catalogmcp.Tool{Name: n, Description: d, InputSchema: []byte(`{"type":"object"}`)}, Origin: "srv"}}
	}
	fired := make(chan struct{}, 4)
	s.churn.fire = func() { fired <- struct{}{} }
	t0 := time.Unix(1_000_000, 0)
	pass := func(at time.Duration, a, b string) (ga, gb *base) {
		s.churn.begin()
		defer s.churn.end()
		now := t0.Add(at)
		return s.bindStable(st, def("a", a), false, now), s.bindStable(st, def("b", b), false, now)
	}
	// a churns first (held from 2s, current since 2s), b later (since 10s);
	// a is bound before b in every pass.
	pass(0, "a0", "b0")
	pass(1*time.Second, "a1", "b1")
	pass(2*time.Second, "a2", "b1")
	pass(9*time.Second, "a2", "b2")
	ga, gb := pass(10*time.Second, "a2", "b3")
	if ga.def.Description != "a1" || gb.def.Description != "b1" {
		t.Fatalf("not both held: %q %q", ga.def.Description, gb.def.Description)
	}
	if want := t0.Add(32 * time.Second); !s.churn.timerAt.Equal(want) {
		t.Fatalf("settle timer armed for %v, want a's deadline %v (b's is %v)", s.churn.timerAt.Sub(t0), want.Sub(t0), 40*time.Second)
	}
	// At a's deadline a settles, b stays held, the timer moves to b's.
	ga, gb = pass(32*time.Second, "a2", "b3")
	if ga.def.Description != "a2" || gb.def.Description != "b1" {
		t.Fatalf("at a's deadline: %q %q", ga.def.Description, gb.def.Description)
	}
	if want := t0.Add(40 * time.Second); !s.churn.timerAt.Equal(want) {
		t.Fatalf("settle timer armed for %v, want b's deadline 40s", s.churn.timerAt.Sub(t0))
	}
	pass(40*time.Second, "a2", "b3")
	if !s.churn.timerAt.IsZero() {
		t.Fatalf("timer still armed with nothing held: %v", s.churn.timerAt.Sub(t0))
	}
	// The armed timer really fires (a short settle here).
	s.cfg.DefinitionChurn.Settle = 100 * time.Millisecond
	pass(41*time.Second, "a3", "b3")
	if ga, _ := pass(41*time.Second+10*time.Millisecond, "a4", "b3"); ga.def.Description != "a3" {
		t.Fatalf("not held: %q", ga.def.Description)
	}
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("the settle timer did not fire")
	}
}

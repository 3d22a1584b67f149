package authzsqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

func openStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "authz.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func mustRules(t *testing.T, text, source string) ([]authzcasbin.Rule, []authzcasbin.Link) {
	t.Helper()
	r, l, err := authzcasbin.ParsePolicyText(text, source)
	if err != nil {
		t.Fatal(err)
	}
	return r, l
}

func newAdapterEnforcer(t *testing.T, s *Store) *casbin.Enforcer {
	t.Helper()
	m, err := model.NewModelFromString(authzcasbin.DefaultModel)
	if err != nil {
		t.Fatal(err)
	}
	e, err := casbin.NewEnforcer(m, s.Adapter())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestAdapterContract drives a Casbin enforcer with auto-save through every
// adapter operation and checks, after each, that a fresh enforcer loading from
// the store sees exactly the live enforcer's policy (Casbin's adapter
// contract: the store mirrors the model), and that each write bumped the
// policy version.
func TestAdapterContract(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	e := newAdapterEnforcer(t, s)
	check := func(step string) {
		t.Helper()
		fresh := newAdapterEnforcer(t, s)
		lp, _ := e.GetPolicy()
		fp, _ := fresh.GetPolicy()
		lg, _ := e.GetGroupingPolicy()
		fg, _ := fresh.GetGroupingPolicy()
		if !slices.EqualFunc(lp, fp, slices.Equal) || !slices.EqualFunc(lg, fg, slices.Equal) {
			t.Fatalf("%s: store differs from model\nlive p=%v g=%v\nstored p=%v g=%v", step, lp, lg, fp, fg)
		}
	}
	v0, _ := s.Version(ctx)
	steps := []struct {
		name string
		do   func() (bool, error)
	}{
		{"AddPolicy", func() (bool, error) { return e.AddPolicy("r1", "*", "tool", "a_*", "call", "allow", "") }},
		{"AddPolicies", func() (bool, error) {
			return e.AddPolicies([][]string{{"r1", "t1", "tool", "b", "call", "deny", ""}, {"r2", "*", "skill", "*", "use", "allow", "!subagent"}})
		}},
		{"AddGroupingPolicy", func() (bool, error) { return e.AddGroupingPolicy("r2", "r1", "*") }},
		{"RemovePolicy", func() (bool, error) { return e.RemovePolicy("r1", "t1", "tool", "b", "call", "deny", "") }},
		{"RemoveFilteredPolicy", func() (bool, error) { return e.RemoveFilteredPolicy(0, "r2") }},
		{"AddPolicies again", func() (bool, error) {
			return e.AddPolicies([][]string{{"r3", "*", "model", "gpt-*", "use", "allow", ""}, {"r3", "*", "model", "x", "use", "deny", ""}})
		}},
		{"RemovePolicies", func() (bool, error) {
			return e.RemovePolicies([][]string{{"r3", "*", "model", "x", "use", "deny", ""}})
		}},
		{"RemoveGroupingPolicy", func() (bool, error) { return e.RemoveGroupingPolicy("r2", "r1", "*") }},
	}
	for _, st := range steps {
		ok, err := st.do()
		if err != nil || !ok {
			t.Fatalf("%s: ok=%v err=%v", st.name, ok, err)
		}
		check(st.name)
		v, _ := s.Version(ctx)
		if v <= v0 {
			t.Fatalf("%s: version %d not bumped from %d", st.name, v, v0)
		}
		v0 = v
	}
	// SavePolicy rewrites the table from the model.
	e.GetModel().AddPolicy("p", "p", []string{"r9", "*", "tool", "z", "list", "allow", ""})
	if err := e.SavePolicy(); err != nil {
		t.Fatal(err)
	}
	check("SavePolicy")
	// Invalid lines are refused before they are stored.
	if _, err := e.AddPolicy("r1", "*", "boat", "x", "call", "allow", ""); !errors.Is(err, authzcasbin.ErrInvalidPolicy) {
		t.Fatalf("invalid line: %v", err)
	}
	check("refused invalid")
	// File-owned lines cannot be removed through the adapter.
	r, l := mustRules(t, "p, f, *, tool, x, call, allow\ng, f2, f, *", authzcasbin.SourceFile)
	if _, _, err := s.ReplaceSource(ctx, authzcasbin.SourceFile, r, l, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.LoadPolicy(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.RemovePolicy("f", "*", "tool", "x", "call", "allow", ""); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("remove file line: %v", err)
	}
	if _, err := e.RemoveFilteredPolicy(0, "f"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("remove filtered file line: %v", err)
	}
	// The adapter's view equals the store snapshot the engine uses.
	set, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := newAdapterEnforcer(t, s).GetPolicy()
	if len(p) != len(set.Rules) {
		t.Fatalf("adapter %d lines, snapshot %d", len(p), len(set.Rules))
	}
	for i := range p {
		if !slices.Equal(p[i], set.Rules[i].CasbinRule()) {
			t.Fatalf("line %d: adapter %v snapshot %v", i, p[i], set.Rules[i].CasbinRule())
		}
	}
}

func TestApplySeedReplace(t *testing.T) {
	ctx := context.Background()
	s, path := openStore(t)
	seeded, err := s.SeedDefault(ctx, authzcasbin.DefaultRules())
	if err != nil || !seeded {
		t.Fatalf("seed: %v %v", seeded, err)
	}
	if seeded, _ := s.SeedDefault(ctx, authzcasbin.DefaultRules()); seeded {
		t.Fatal("seeded a non-empty store")
	}
	set, _ := s.Snapshot(ctx)
	if set.Version != 1 || len(set.Rules) != len(authzcasbin.DefaultRules()) || set.Rules[0].Source != authzcasbin.SourceDefault {
		t.Fatalf("after seed: v%d %d rules", set.Version, len(set.Rules))
	}
	// DeerFlow import owns role "user": its default lines go.
	df, roles, err := authzcasbin.TranslateDeerFlow(map[string]any{"roles": map[string]any{"user": map[string]any{"tools": map[string]any{"allow": []any{"a"}}}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	v, changed, err := s.ReplaceSource(ctx, authzcasbin.SourceDeerFlow, df, nil, roles)
	if err != nil || !changed || v != 2 {
		t.Fatalf("deerflow import: v%d %v %v", v, changed, err)
	}
	set, _ = s.Snapshot(ctx)
	for _, r := range set.Rules {
		if r.Subject == "user" && r.Source != authzcasbin.SourceDeerFlow {
			t.Fatalf("default line of user survived: %s", r.String())
		}
	}
	// Same import again: no change, no version bump, same order.
	v, changed, err = s.ReplaceSource(ctx, authzcasbin.SourceDeerFlow, df, nil, roles)
	if err != nil || changed || v != 2 {
		t.Fatalf("repeat import: v%d %v %v", v, changed, err)
	}
	set2, _ := s.Snapshot(ctx)
	if !slices.EqualFunc(set.Rules, set2.Rules, func(a, b authzcasbin.Rule) bool { return a == b }) {
		t.Fatal("repeat import reordered lines")
	}
	// API change: add, then remove by id and by content, atomically.
	add, links := mustRules(t, "p, ops, acme, tool, x, call, allow\np, ops, acme, tool, y, call, deny\ng, alice2, ops, acme", authzcasbin.SourceAPI)
	v, n, err := s.Apply(ctx, Change{AddRules: add, AddLinks: links})
	if err != nil || n != 3 || v != 3 {
		t.Fatalf("apply add: v%d n%d %v", v, n, err)
	}
	// Idempotent re-add: no change.
	if v, n, _ := s.Apply(ctx, Change{AddRules: add}); n != 0 || v != 3 {
		t.Fatalf("re-add: v%d n%d", v, n)
	}
	// A bad item anywhere rolls back the whole change.
	_, _, err = s.Apply(ctx, Change{RemoveRuleIDs: []string{add[0].ID(), "p:nothere"}})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "policy_ids[1]") {
		t.Fatalf("remove missing: %v", err)
	}
	if set, _ := s.Snapshot(ctx); !slices.ContainsFunc(set.Rules, func(r authzcasbin.Rule) bool { return r.ID() == add[0].ID() }) || set.Version != 3 {
		t.Fatal("failed change was not rolled back")
	}
	bad := authzcasbin.Rule{Subject: "ops", Tenant: "*", Resource: "tool", Target: "[", Action: "call", Effect: "allow"}
	if _, _, err := s.Apply(ctx, Change{AddRules: []authzcasbin.Rule{add[0], bad}}); !errors.Is(err, authzcasbin.ErrInvalidPolicy) || !strings.Contains(err.Error(), "policies[1].target") {
		t.Fatalf("invalid add: %v", err)
	}
	if _, _, err := s.Apply(ctx, Change{RemoveRules: []authzcasbin.Rule{df[0]}}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("remove deerflow line: %v", err)
	}
	v, n, err = s.Apply(ctx, Change{RemoveRuleIDs: []string{add[0].ID()}, RemoveRules: []authzcasbin.Rule{add[1]}, RemoveLinks: links})
	if err != nil || n != 3 || v != 4 {
		t.Fatalf("remove: v%d n%d %v", v, n, err)
	}
	// Everything survives a reopen.
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	set3, _ := s2.Snapshot(ctx)
	if set3.Version != 4 || len(set3.Rules) != len(set.Rules) {
		t.Fatalf("after reopen: v%d %d rules", set3.Version, len(set3.Rules))
	}
}

func TestDecisionLogGroupCommit(t *testing.T) {
	ctx := context.Background()
	s, path := openStore(t)
	log := s.NewLog(64)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	base := time.Unix(1_700_000_000, 0)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				rec := &DecisionRecord{ID: fmt.Sprintf("d-%d-%d", g, i), Kind: KindAuthorize, Time: base.Add(time.Duration(g*50+i) * time.Second),
					Tenant: []string{"acme", "globex"}[g%2], Subject: fmt.Sprintf("u%d", g), Resource: "tool", Action: "call", Target: "x",
					Allow: i%2 == 0, PolicyVersion: 3, Reasons: []authzcasbin.Reason{{Code: authzcasbin.CodeDenied, Message: "m"}}}
				if err := log.Append(ctx, rec, i%2 == 1); err != nil {
					errs <- err
				}
			}
		}(g)
	}
	wg.Wait()
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := log.Append(ctx, &DecisionRecord{ID: "late"}, true); !errors.Is(err, ErrLogClosed) {
		t.Fatalf("append after close: %v", err)
	}
	var n int
	_ = s.DB().QueryRow(`SELECT count(*) FROM decisions`).Scan(&n)
	if n != 400 {
		t.Fatalf("%d records, want 400", n)
	}
	// Tenant scope, filters and pagination (newest first, no duplicates).
	f := false
	seen := map[string]bool{}
	var before int64
	pages := 0
	for {
		recs, next, err := s.ListDecisions(ctx, Filter{Tenant: "acme", Allow: &f}, 30, before)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for i, r := range recs {
			if r.Tenant != "acme" || r.Allow || seen[r.ID] {
				t.Fatalf("bad record %+v", r)
			}
			if i > 0 && r.Seq >= recs[i-1].Seq {
				t.Fatal("not newest first")
			}
			seen[r.ID] = true
		}
		if next == 0 {
			break
		}
		before = next
	}
	if len(seen) != 100 || pages != 4 {
		t.Fatalf("%d denies of acme over %d pages, want 100 over 4", len(seen), pages)
	}
	recs, _, _ := s.ListDecisions(ctx, Filter{Tenant: "globex", Subject: "u1", Since: base.Add(90 * time.Second)}, 1000, 0)
	if len(recs) != 10 {
		t.Fatalf("since filter: %d records", len(recs))
	}
	if _, _, err := s.ListDecisions(ctx, Filter{}, 10, 0); err == nil {
		t.Fatal("list without tenant accepted")
	}
	// Retention: by age, then by count.
	k, err := s.Prune(ctx, base.Add(100*time.Second), 0)
	if err != nil || k != 100 {
		t.Fatalf("prune by age: %d %v", k, err)
	}
	k, err = s.Prune(ctx, time.Time{}, 50)
	if err != nil || k != 250 {
		t.Fatalf("prune by count: %d %v", k, err)
	}
	// Durable: a reopened store has the rest.
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_ = s2.DB().QueryRow(`SELECT count(*) FROM decisions`).Scan(&n)
	if n != 50 {
		t.Fatalf("after reopen %d records", n)
	}
}

func TestDecisionLogStoreFailure(t *testing.T) {
	s, _ := openStore(t)
	log := s.NewLog(8)
	defer log.Close()
	s.DB().Close() // the store goes away under the log
	err := log.Append(context.Background(), &DecisionRecord{ID: "x", Tenant: "t", Time: time.Now()}, true)
	if err == nil {
		t.Fatal("append to a closed store succeeded")
	}
}

func TestBoundInput(t *testing.T) {
	in := map[string]any{"a": strings.Repeat("x", 1000), "b": map[string]any{"c": []any{"1", 2.0}}, "z": strings.Repeat("y", 5000)}
	out := BoundInput(in, 100, 600)
	if s := out["a"].(string); len(s) > 104 || !strings.HasSuffix(s, "…") {
		t.Fatalf("a not truncated: %d", len(s))
	}
	if out["_truncated"] != true {
		t.Fatal("no truncation marker")
	}
	if _, ok := out["b"].(map[string]any); !ok {
		t.Fatal("nested map lost")
	}
	if BoundInput(nil, 1, 1) != nil {
		t.Fatal("nil input")
	}
}

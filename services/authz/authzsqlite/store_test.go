package authzsqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
	"github.com/toolplane/toolplane/services/authz/authztest"
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

func TestStoreSuite(t *testing.T) {
	authztest.RunStoreSuite(t, func(t *testing.T) authzstore.Store {
		s, err := Open(filepath.Join(t.TempDir(), "authz.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestReopen: policy, version and decisions survive closing and reopening the file.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	s, path := openStore(t)
	if _, err := s.SeedDefault(ctx, authzcasbin.DefaultRules()); err != nil {
		t.Fatal(err)
	}
	add, links := mustRules(t, "p, ops, acme, tool, x, call, allow, !subagent\ng, a, ops, acme", authzcasbin.SourceAPI)
	if _, _, err := s.Apply(ctx, authzstore.Change{AddRules: add, AddLinks: links}); err != nil {
		t.Fatal(err)
	}
	log := authzstore.NewLog(s, 8)
	for i := 0; i < 10; i++ {
		if err := log.Append(ctx, &authzstore.DecisionRecord{ID: fmt.Sprint(i), Tenant: "t", Time: time.Now()}, i == 9); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	before, _ := s.Snapshot(ctx)
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	after, _ := s2.Snapshot(ctx)
	if after.Version != before.Version || !slices.Equal(after.Rules, before.Rules) || !slices.Equal(after.Links, before.Links) {
		t.Fatalf("policy changed across reopen: v%d/%d", before.Version, after.Version)
	}
	recs, _, _ := s2.ListDecisions(ctx, authzstore.Filter{Tenant: "t"}, 100, 0)
	if len(recs) != 10 {
		t.Fatalf("%d decisions after reopen", len(recs))
	}
}

func TestDecisionLogStoreFailure(t *testing.T) {
	s, _ := openStore(t)
	log := authzstore.NewLog(s, 8)
	defer log.Close()
	s.DB().Close() // the store goes away under the log
	err := log.Append(context.Background(), &authzstore.DecisionRecord{ID: "x", Tenant: "t", Time: time.Now()}, true)
	if err == nil {
		t.Fatal("append to a closed store succeeded")
	}
}

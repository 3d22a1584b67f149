package authztest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

func newAdapterEnforcer(t *testing.T, adapter func() persist.Adapter) *casbin.Enforcer {
	t.Helper()
	m, err := model.NewModelFromString(authzcasbin.DefaultModel)
	if err != nil {
		t.Fatal(err)
	}
	e, err := casbin.NewEnforcer(m, adapter())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// RunAdapterContract drives a Casbin enforcer with auto-save through every
// adapter operation and checks, after each, that a fresh enforcer loading from
// the store sees exactly the live enforcer's policy (Casbin's adapter
// contract: the store mirrors the model), and that each write bumped the
// policy version.
func RunAdapterContract(t *testing.T, s authzstore.Store, adapter func() persist.Adapter) {
	ctx := context.Background()
	e := newAdapterEnforcer(t, adapter)
	check := func(step string) {
		t.Helper()
		fresh := newAdapterEnforcer(t, adapter)
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
	if _, err := e.RemovePolicy("f", "*", "tool", "x", "call", "allow", ""); !errors.Is(err, authzstore.ErrReadOnly) {
		t.Fatalf("remove file line: %v", err)
	}
	if _, err := e.RemoveFilteredPolicy(0, "f"); !errors.Is(err, authzstore.ErrReadOnly) {
		t.Fatalf("remove filtered file line: %v", err)
	}
	// The adapter's view equals the store snapshot the engine uses.
	set, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := newAdapterEnforcer(t, adapter).GetPolicy()
	if len(p) != len(set.Rules) {
		t.Fatalf("adapter %d lines, snapshot %d", len(p), len(set.Rules))
	}
	for i := range p {
		if !slices.Equal(p[i], set.Rules[i].CasbinRule()) {
			t.Fatalf("line %d: adapter %v snapshot %v", i, p[i], set.Rules[i].CasbinRule())
		}
	}
}

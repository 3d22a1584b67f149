// Package authztest is the conformance suite every authzstore.Store
// implementation passes (authzsqlite, authzmem): policy versions, sources and
// ownership, atomic changes, the decision log with group commit, filters,
// pagination and retention.
package authztest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// RunStoreSuite runs the conformance suite; open returns a new, empty store
// (closed by the suite).
func RunStoreSuite(t *testing.T, open func(t *testing.T) authzstore.Store) {
	t.Run("SeedReplaceApply", func(t *testing.T) { testSeedReplaceApply(t, open(t)) })
	t.Run("SnapshotOrder", func(t *testing.T) { testSnapshotOrder(t, open(t)) })
	t.Run("DecisionLog", func(t *testing.T) { testDecisionLog(t, open(t)) })
}

func mustRules(t *testing.T, text, source string) ([]authzcasbin.Rule, []authzcasbin.Link) {
	t.Helper()
	r, l, err := authzcasbin.ParsePolicyText(text, source)
	if err != nil {
		t.Fatal(err)
	}
	return r, l
}

func testSeedReplaceApply(t *testing.T, s authzstore.Store) {
	defer s.Close()
	ctx := context.Background()
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Version(ctx); err != nil || v != 0 {
		t.Fatalf("empty store version %d %v", v, err)
	}
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
	// A DeerFlow import owns the roles it defines: their default lines go.
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
	// The same import again: no change, no bump, same order.
	v, changed, err = s.ReplaceSource(ctx, authzcasbin.SourceDeerFlow, df, nil, roles)
	if err != nil || changed || v != 2 {
		t.Fatalf("repeat import: v%d %v %v", v, changed, err)
	}
	set2, _ := s.Snapshot(ctx)
	if !slices.Equal(set.Rules, set2.Rules) {
		t.Fatal("repeat import reordered lines")
	}
	if _, _, err := s.ReplaceSource(ctx, authzcasbin.SourceAPI, nil, nil, nil); err == nil {
		t.Fatal("replaced the api source")
	}
	// API change: add, then remove by id and by content, atomically.
	add, links := mustRules(t, "p, ops, acme, tool, x, call, allow\np, ops, acme, tool, y, call, deny\ng, alice2, ops, acme", authzcasbin.SourceAPI)
	v, n, err := s.Apply(ctx, authzstore.Change{AddRules: add, AddLinks: links})
	if err != nil || n != 3 || v != 3 {
		t.Fatalf("apply add: v%d n%d %v", v, n, err)
	}
	if v, n, _ := s.Apply(ctx, authzstore.Change{AddRules: add}); n != 0 || v != 3 {
		t.Fatalf("idempotent re-add: v%d n%d", v, n)
	}
	_, _, err = s.Apply(ctx, authzstore.Change{RemoveRuleIDs: []string{add[0].ID(), "p:nothere"}})
	if !errors.Is(err, authzstore.ErrNotFound) || !strings.Contains(err.Error(), "policy_ids[1]") {
		t.Fatalf("remove missing: %v", err)
	}
	if set, _ := s.Snapshot(ctx); !slices.ContainsFunc(set.Rules, func(r authzcasbin.Rule) bool { return r.ID() == add[0].ID() }) || set.Version != 3 {
		t.Fatal("failed change was not rolled back")
	}
	bad := authzcasbin.Rule{Subject: "ops", Tenant: "*", Resource: "tool", Target: "[", Action: "call", Effect: "allow"}
	if _, _, err := s.Apply(ctx, authzstore.Change{AddRules: []authzcasbin.Rule{add[0], bad}}); !errors.Is(err, authzcasbin.ErrInvalidPolicy) || !strings.Contains(err.Error(), "policies[1].target") {
		t.Fatalf("invalid add: %v", err)
	}
	if _, _, err := s.Apply(ctx, authzstore.Change{RemoveRules: []authzcasbin.Rule{df[0]}}); !errors.Is(err, authzstore.ErrReadOnly) {
		t.Fatalf("remove deerflow line: %v", err)
	}
	if _, _, err := s.Apply(ctx, authzstore.Change{RemoveLinks: []authzcasbin.Link{{Member: "no", Role: "body", Tenant: "*"}}}); !errors.Is(err, authzstore.ErrNotFound) {
		t.Fatalf("remove missing link: %v", err)
	}
	v, n, err = s.Apply(ctx, authzstore.Change{RemoveRuleIDs: []string{add[0].ID()}, RemoveRules: []authzcasbin.Rule{add[1]}, RemoveLinks: links})
	if err != nil || n != 3 || v != 4 {
		t.Fatalf("remove: v%d n%d %v", v, n, err)
	}
	// File lines: replaced as a whole; a line equal to another source's keeps its owner.
	fr, fl := mustRules(t, "p, f, *, tool, x, call, allow\np, admin, *, tool, *, call, allow\ng, f2, f, *", authzcasbin.SourceFile)
	v, changed, err = s.ReplaceSource(ctx, authzcasbin.SourceFile, fr, fl, nil)
	if err != nil || !changed || v != 5 {
		t.Fatalf("file import: v%d %v %v", v, changed, err)
	}
	set, _ = s.Snapshot(ctx)
	for _, r := range set.Rules {
		if r.Subject == "admin" && r.Target == "*" && r.Resource == "tool" && r.Action == "call" && r.Source != authzcasbin.SourceDefault {
			t.Fatalf("default line taken over by the file: %+v", r)
		}
	}
	if len(set.Links) != 1 || set.Links[0].Source != authzcasbin.SourceFile {
		t.Fatalf("links %+v", set.Links)
	}
	v, changed, err = s.ReplaceSource(ctx, authzcasbin.SourceFile, nil, nil, nil)
	if err != nil || !changed || v != 6 {
		t.Fatalf("file cleared: v%d %v %v", v, changed, err)
	}
	if set, _ := s.Snapshot(ctx); len(set.Links) != 0 || slices.ContainsFunc(set.Rules, func(r authzcasbin.Rule) bool { return r.Source == authzcasbin.SourceFile }) {
		t.Fatal("file lines survived clearing")
	}
}

func testSnapshotOrder(t *testing.T, s authzstore.Store) {
	defer s.Close()
	ctx := context.Background()
	var want []string
	for i := 0; i < 20; i++ {
		r := authzcasbin.Rule{Subject: fmt.Sprintf("r%d", 19-i), Tenant: "*", Resource: "tool", Target: fmt.Sprintf("t%d", i), Action: "call", Effect: "allow"}
		if _, _, err := s.Apply(ctx, authzstore.Change{AddRules: []authzcasbin.Rule{r}}); err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ID())
	}
	set, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range set.Rules {
		got = append(got, r.ID())
		if r.Source != authzcasbin.SourceAPI {
			t.Fatalf("source %q", r.Source)
		}
	}
	if !slices.Equal(got, want) || set.Version != 20 {
		t.Fatalf("snapshot order/version: v%d %v", set.Version, got)
	}
}

func testDecisionLog(t *testing.T, s authzstore.Store) {
	defer s.Close()
	ctx := context.Background()
	log := authzstore.NewLog(s, 64)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	base := time.Unix(1_700_000_000, 0)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				rec := &authzstore.DecisionRecord{ID: fmt.Sprintf("d-%d-%d", g, i), Kind: authzstore.KindAuthorize, Time: base.Add(time.Duration(g*50+i) * time.Second),
					Tenant: []string{"acme", "globex"}[g%2], Subject: fmt.Sprintf("u%d", g), Resource: "tool", Action: "call", Target: "x",
					Allow: i%2 == 0, PolicyVersion: 3, Reasons: []authzcasbin.Reason{{Code: authzcasbin.CodeDenied, Message: "m"}},
					Input: map[string]any{"k": "v"}, CallContext: &authzstore.CallContext{Agent: "a", IsSubagent: true}}
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
	if err := log.Append(ctx, &authzstore.DecisionRecord{ID: "late"}, true); !errors.Is(err, authzstore.ErrLogClosed) {
		t.Fatalf("append after close: %v", err)
	}
	count := func(tenant string) int {
		recs, _, err := s.ListDecisions(ctx, authzstore.Filter{Tenant: tenant}, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	if n := count("acme") + count("globex"); n != 400 {
		t.Fatalf("%d records, want 400", n)
	}
	// Tenant scope, filters, pagination (newest first, no duplicates), round trip.
	f := false
	seen := map[string]bool{}
	var before int64
	pages := 0
	for {
		recs, next, err := s.ListDecisions(ctx, authzstore.Filter{Tenant: "acme", Allow: &f, Resource: "tool", Kind: authzstore.KindAuthorize}, 30, before)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for i, r := range recs {
			if r.Tenant != "acme" || r.Allow || seen[r.ID] || r.Input["k"] != "v" || !r.CallContext.IsSubagent || r.Reasons[0].Code != authzcasbin.CodeDenied {
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
	recs, _, _ := s.ListDecisions(ctx, authzstore.Filter{Tenant: "globex", Subject: "u1", Since: base.Add(90 * time.Second)}, 1000, 0)
	if len(recs) != 10 {
		t.Fatalf("subject+since filter: %d records", len(recs))
	}
	if recs, _, _ := s.ListDecisions(ctx, authzstore.Filter{Tenant: "acme", Kind: authzstore.KindFilter}, 1000, 0); len(recs) != 0 {
		t.Fatalf("kind filter: %d", len(recs))
	}
	if _, _, err := s.ListDecisions(ctx, authzstore.Filter{}, 10, 0); err == nil {
		t.Fatal("list without tenant accepted")
	}
	// Retention (authzstore.Retention): clear, then a deterministic log.
	far := base.Add(1000 * time.Hour)
	if _, err := s.Prune(ctx, authzstore.Retention{AllowsBefore: far, DeniesBefore: far}); err != nil || count("acme")+count("globex") != 0 {
		t.Fatalf("prune everything: %v, %d left", err, count("acme")+count("globex"))
	}
	var batch []*authzstore.DecisionRecord
	add := func(tenant string, i int, allow bool, kind authzstore.Kind) {
		batch = append(batch, &authzstore.DecisionRecord{ID: fmt.Sprintf("%s-%d-%v", tenant, i, allow), Kind: kind, Time: base.Add(time.Duration(i) * time.Second),
			Tenant: tenant, Subject: "u", Resource: "tool", Action: "call", Allow: allow})
	}
	for i := 0; i < 10; i++ {
		add("acme", i, false, authzstore.KindAuthorize) // denies, oldest
	}
	for i := 10; i < 110; i++ {
		kind := authzstore.KindAuthorize
		if i%10 == 0 {
			kind = authzstore.KindFilter // a summary with denied names counts as evictable
			add("acme", i, false, kind)
			continue
		}
		add("acme", i, true, kind)
	}
	for i := 0; i < 5; i++ {
		add("globex", i, true, authzstore.KindAuthorize)
	}
	if err := s.AppendDecisions(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// Denies have their own age bound; allows younger than theirs stay.
	if k, err := s.Prune(ctx, authzstore.Retention{AllowsBefore: base.Add(-time.Second), DeniesBefore: base.Add(5 * time.Second)}); err != nil || k != 5 {
		t.Fatalf("prune denies by age: %d %v", k, err)
	}
	// The cap is per tenant and evicts the oldest allows and summaries first.
	if k, err := s.Prune(ctx, authzstore.Retention{MaxRowsPerTenant: 20}); err != nil || k != 85 || count("acme") != 20 || count("globex") != 5 {
		t.Fatalf("cap 20: deleted %d (%v), acme %d, globex %d; want 85, 20, 5", k, err, count("acme"), count("globex"))
	}
	// Over the cap with only denies left: denies stay; the other tenant loses only its own oldest.
	if k, err := s.Prune(ctx, authzstore.Retention{MaxRowsPerTenant: 3}); err != nil || k != 17 {
		t.Fatalf("cap 3: deleted %d %v, want 17", k, err)
	}
	left, _, _ := s.ListDecisions(ctx, authzstore.Filter{Tenant: "acme"}, 1000, 0)
	if len(left) != 5 {
		t.Fatalf("acme keeps %d records, want its 5 denies", len(left))
	}
	for i, r := range left {
		if r.Allow || r.ID != fmt.Sprintf("acme-%d-false", 9-i) {
			t.Fatalf("acme record %d is %s", i, r.ID)
		}
	}
	if g, _, _ := s.ListDecisions(ctx, authzstore.Filter{Tenant: "globex"}, 1000, 0); len(g) != 3 || g[2].ID != "globex-2-true" {
		t.Fatalf("globex keeps %d records (want its newest 3)", len(g))
	}
}

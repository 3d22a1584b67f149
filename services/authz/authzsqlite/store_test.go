package authzsqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/casbin/casbin/v2/persist"

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

// TestAdapterContract runs the Casbin adapter contract of authztest.
func TestAdapterContract(t *testing.T) {
	s, _ := openStore(t)
	authztest.RunAdapterContract(t, s, func() persist.Adapter { return s.Adapter() })
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

package authz

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzmem"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// faultyStore injects failures into an in-memory store.
type faultyStore struct {
	*authzmem.Store
	failLog, failRead atomic.Bool
}

var errInjected = errors.New("injected store failure")

func (f *faultyStore) AppendDecisions(ctx context.Context, recs []*authzstore.DecisionRecord) error {
	if f.failLog.Load() {
		return errInjected
	}
	return f.Store.AppendDecisions(ctx, recs)
}

func (f *faultyStore) Snapshot(ctx context.Context) (authzcasbin.PolicySet, error) {
	if f.failRead.Load() {
		return authzcasbin.PolicySet{}, errInjected
	}
	return f.Store.Snapshot(ctx)
}

// TestInjectedStoreFailures: over the store seam, with the in-memory store:
// a log failure turns an audited allow into a deny (authz.audit_error first)
// and adds the reason to a deny; a read failure on reload denies everything
// with authz.store_error, and a later good reload recovers.
func TestInjectedStoreFailures(t *testing.T) {
	ctx := context.Background()
	cfg := Config{AuditAllows: true}
	cfg.SetDefaults()
	engine, _ := authzcasbin.NewEngine("")
	fs := &faultyStore{Store: authzmem.New()}
	srv, err := newWithStore(ctx, cfg, svckit.Env{DataDir: t.TempDir(), Logger: quietLogger()}, quietLogger(), engine, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	uctx := auth.WithIdentity(ctx, auth.Identity{Principal: alice, Kind: auth.KindUser})
	call := func(target string) *authzv1.Decision {
		r, err := srv.Authorize(uctx, &authzv1.AuthorizeRequest{ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Action: authzv1.Action_ACTION_CALL, Target: target})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetDecision()
	}
	if d := call("web_search"); !d.GetAllow() {
		t.Fatalf("healthy: %+v", d)
	}
	fs.failLog.Store(true)
	d := call("web_search")
	if d.GetAllow() || d.GetReasons()[0].GetCode() != authzcasbin.CodeAuditError || d.GetReasons()[1].GetCode() != authzcasbin.CodeAllowed {
		t.Fatalf("audited allow with a failing log: %+v", d)
	}
	fs.failLog.Store(false)
	fs.failRead.Store(true)
	if _, err := srv.AddPolicies(auth.WithIdentity(ctx, auth.Identity{Principal: &typev1.Principal{Subject: "root", Roles: []string{"admin"}}, GlobalAdmin: true}),
		&authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{{Role: "x", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "y", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}}}); err == nil {
		t.Fatal("AddPolicies reported success although the reload failed")
	}
	if d := call("web_search"); d.GetAllow() || d.GetReasons()[0].GetCode() != authzcasbin.CodeStoreError {
		t.Fatalf("after a failed reload: %+v", d)
	}
	if err := srv.Ready(ctx); err == nil {
		t.Fatal("ready after a failed reload")
	}
	fs.failRead.Store(false)
	eventually(t, 5*time.Second, "recovery", func() bool { return call("web_search").GetAllow() })
}

package authz

import (
	"strings"
	"testing"
	"time"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// TestDecisionLogFlood: one principal flooding denies is rate-limited in the
// log (its answers stay denies), the flood is recorded once per window, and
// another tenant's denies — recorded before and during the flood — are all
// kept, also after the per-tenant cap ran.
func TestDecisionLogFlood(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := start(t, func(c *Config) {
		c.DecisionRate, c.DecisionBurst, c.DecisionFloodWindow, c.DecisionMaxRows = 1, 20, time.Minute, 5
	})
	h.srv.setNow(func() time.Time { return now })
	ctx := ctxT(t)
	deny := func(c authzv1.AuthzServiceClient, target string) *authzv1.Decision {
		return h.authorize(c, toolCall(nil, target))
	}
	if _, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "forbidden_*", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY},
	}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ { // bob (tenant acme): the victim's evidence
		if d := deny(h.bob, "forbidden_bob"); d.GetAllow() {
			t.Fatal("bob allowed")
		}
	}
	for i := 0; i < 500; i++ { // alice (tenant default) floods
		d := deny(h.user, "forbidden_flood")
		if d.GetAllow() {
			t.Fatal("flooded deny answered allow")
		}
		if i >= 20 && d.GetReasons()[len(d.GetReasons())-1].GetCode() != authzcasbin.CodeAuditFlood {
			t.Fatalf("deny %d beyond the burst does not say it was not recorded: %v", i, d.GetReasons())
		}
		if i == 250 {
			for j := 0; j < 5; j++ {
				deny(h.bob, "forbidden_bob")
			}
		}
	}
	count := func(tenant string, code string) (n int) {
		recs, _, err := h.srv.store.ListDecisions(ctx, authzstore.Filter{Tenant: tenant}, 10000, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if code == "" || (len(r.Reasons) > 0 && r.Reasons[0].Code == code) {
				n++
			}
		}
		return n
	}
	if n := count("default", authzcasbin.CodeAuditFlood); n != 1 {
		t.Fatalf("%d flood records in one window, want 1", n)
	}
	if n := count("default", authzcasbin.CodeDenied); n != 20 {
		t.Fatalf("%d of alice's denies stored, want the burst (20)", n)
	}
	// The next window: one more flood record naming the count of the previous.
	now = now.Add(61 * time.Second)
	for i := 0; i < 100; i++ {
		deny(h.user, "forbidden_flood")
	}
	recs, _, _ := h.srv.store.ListDecisions(ctx, authzstore.Filter{Tenant: "default"}, 10000, 0)
	floods := 0
	for _, r := range recs {
		if len(r.Reasons) > 0 && r.Reasons[0].Code == authzcasbin.CodeAuditFlood {
			floods++
			if floods == 1 && !strings.Contains(r.Reasons[0].Message, "480 were not stored in the previous window") {
				t.Errorf("second flood record: %q", r.Reasons[0].Message)
			}
		}
	}
	if floods != 2 {
		t.Fatalf("%d flood records over two windows, want 2", floods)
	}
	// The per-tenant cap (5) runs: bob's 10 denies all survive (denies are not evicted by the cap).
	h.srv.prune(ctx)
	if n := count("acme", authzcasbin.CodeDenied); n != 10 {
		t.Fatalf("bob's denies after alice's flood and the cap: %d, want 10", n)
	}
	// An audited allow over the rate is denied (it could not be recorded).
	h.srv.cfg.AuditAllows = true
	if d := h.authorize(h.user, toolCall(nil, "allowed_tool")); d.GetAllow() || d.GetReasons()[0].GetCode() != authzcasbin.CodeAuditFlood {
		t.Fatalf("audited allow during a flood: %+v", d)
	}
}

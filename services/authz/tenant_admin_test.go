package authz

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// TestTenantAdmin: an admin of tenant acme (not in auth.global_admin_tenants)
// sees and changes only acme's policy lines, sees only acme's decisions and
// asks only about acme's principals; every refusal changes nothing.
func TestTenantAdmin(t *testing.T) {
	h := start(t, nil)
	ctx := ctxT(t)
	line := func(tenant, target string) *authzv1.Policy {
		return &authzv1.Policy{Role: "user", Tenant: tenant, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: target, Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY}
	}
	add, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{line("globex", "globex_secret"), line("acme", "acme_tool")}})
	if err != nil {
		t.Fatal(err)
	}
	globexID := add.GetPolicies()[0].GetId()
	v0 := add.GetPolicyVersion()

	lp, err := h.acme.ListPolicies(ctx, &authzv1.ListPoliciesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lp.GetPolicies() {
		if p.GetTenant() != "acme" && p.GetTenant() != "*" {
			t.Errorf("tenant admin sees a line of tenant %q: %v", p.GetTenant(), p)
		}
	}
	if lp2, _ := h.acme.ListPolicies(ctx, &authzv1.ListPoliciesRequest{Tenant: "globex"}); len(lp2.GetPolicies()) != 0 {
		t.Errorf("tenant admin listing tenant globex got %d lines", len(lp2.GetPolicies()))
	}

	hostile := []struct {
		name string
		call func() error
		code codes.Code
		want string
	}{
		{"add a global line", func() error {
			_, err := h.acme.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{line("acme", "ok_tool"), line("*", "x")}})
			return err
		}, codes.PermissionDenied, "policies[1].tenant"},
		{"add another tenant's line", func() error {
			_, err := h.acme.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{line("globex", "x")}})
			return err
		}, codes.PermissionDenied, "policies[0].tenant"},
		{"link in every tenant", func() error {
			_, err := h.acme.AddPolicies(ctx, &authzv1.AddPoliciesRequest{RoleLinks: []*authzv1.RoleLink{{Member: "user:ann", Role: "admin", Tenant: "*"}}})
			return err
		}, codes.PermissionDenied, "role_links[0].tenant"},
		{"remove another tenant's line by id", func() error {
			_, err := h.acme.RemovePolicies(ctx, &authzv1.RemovePoliciesRequest{PolicyIds: []string{globexID}})
			return err
		}, codes.NotFound, "policy_ids[0]"},
		{"remove another tenant's line by content", func() error {
			_, err := h.acme.RemovePolicies(ctx, &authzv1.RemovePoliciesRequest{Policies: []*authzv1.Policy{line("globex", "globex_secret")}})
			return err
		}, codes.PermissionDenied, "policies[0].tenant"},
		{"ask about another tenant's principal", func() error {
			_, err := h.acme.Authorize(ctx, toolCall(alice, "acme_tool"))
			return err
		}, codes.PermissionDenied, "tenant"},
	}
	for _, c := range hostile {
		err := c.call()
		if codeOf(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s naming %s", c.name, err, c.code, c.want)
		}
	}
	if v := h.srv.engine.Version(); v != v0 {
		t.Fatalf("a refused change moved the policy version %d -> %d", v0, v)
	}
	// Within its tenant it administers as before.
	if _, err := h.acme.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{line("acme", "acme_other")}}); err != nil {
		t.Fatalf("tenant admin adding its own line: %v", err)
	}
	bobAsk := toolCall(&typev1.Principal{Subject: "bob", Tenant: "acme", Roles: []string{"user"}}, "acme_tool")
	if d := h.authorize(h.acme, bobAsk); d.GetAllow() {
		t.Fatalf("acme_tool for bob: %+v", d)
	}
	// Decisions: alice's deny (tenant default) is invisible to the acme admin.
	h.authorize(h.user, toolCall(nil, "nothing_allows_this_one"))
	ld, err := h.acme.ListDecisions(ctx, &authzv1.ListDecisionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ld.GetDecisions()) == 0 {
		t.Fatal("the acme admin sees none of acme's decisions")
	}
	for _, d := range ld.GetDecisions() {
		if d.GetPrincipal().GetTenant() != "acme" {
			t.Errorf("tenant admin sees a decision of tenant %q", d.GetPrincipal().GetTenant())
		}
	}
	// The global admin still sees every tenant's lines.
	all, _ := h.admin.ListPolicies(ctx, &authzv1.ListPoliciesRequest{Tenant: "globex"})
	if len(all.GetPolicies()) != 1 {
		t.Fatalf("global admin sees %d globex lines, want 1", len(all.GetPolicies()))
	}
}

package authz

import (
	"testing"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

// TestResourceAttributesTrust: "viewer may call only read-only tools" is one
// line; the runtime's service credential supplies the annotations; a user
// credential claiming readOnlyHint is ignored (the defaults apply, so the
// claim cannot turn a deny into an allow), at call and at list time.
func TestResourceAttributesTrust(t *testing.T) {
	h := start(t, func(c *Config) { c.AnnotationDefaults = map[string]bool{"openWorldHint": false} })
	ctx := ctxT(t)
	if _, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "*", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY,
			Conditions: []*authzv1.Condition{{Check: &authzv1.Condition_Expression{Expression: "annotation.readOnlyHint == 'true'"}}}},
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "*", Action: authzv1.Action_ACTION_LIST, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY,
			Conditions: []*authzv1.Condition{{Check: &authzv1.Condition_Expression{Expression: "server != 'secret' && annotation.openWorldHint == 'false'"}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	ro := &authzv1.ResourceAttributes{Server: "fs", Annotations: mustStruct(t, map[string]any{"readOnlyHint": true})}
	call := func(c authzv1.AuthzServiceClient, p *typev1.Principal, ra *authzv1.ResourceAttributes) *authzv1.Decision {
		r := toolCall(p, "read_text_file")
		r.ResourceAttributes = ra
		return h.authorize(c, r)
	}
	if d := call(h.svc, alice, ro); !d.GetAllow() {
		t.Fatalf("read-only tool from the service credential: %+v", d)
	}
	if d := call(h.svc, alice, nil); d.GetAllow() || d.GetReasons()[0].GetCode() != authzcasbin.CodeConditionFailed {
		t.Fatalf("unannotated tool (default read-only false): %+v", d)
	}
	if d := call(h.svc, alice, &authzv1.ResourceAttributes{Annotations: mustStruct(t, map[string]any{"readOnlyHint": "true"})}); d.GetAllow() {
		t.Fatalf("a string hint counted as read-only: %+v", d)
	}
	if d := call(h.user, nil, ro); d.GetAllow() {
		t.Fatalf("a user credential's annotations were honoured: %+v", d)
	}

	// List time, per candidate: a server on the deny list is hidden, the
	// configured default (openWorldHint false) applies to an unannotated tool.
	req := &authzv1.FilterResourcesRequest{Principal: alice, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Candidates: []string{"a", "b", "c"},
		ResourceAttributes: map[string]*authzv1.ResourceAttributes{
			"a": {Server: "fs"},
			"b": {Server: "secret"},
			"c": {Server: "web", Annotations: mustStruct(t, map[string]any{"openWorldHint": true})},
		}}
	resp, err := h.svc.FilterResources(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetAllowed(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("service FilterResources allowed %v, want [a]", got)
	}
	req.Principal = nil
	resp, err = h.user.FilterResources(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetAllowed(); len(got) != 3 {
		t.Fatalf("user FilterResources: attributes should be ignored (server \"\", defaults), allowed %v", got)
	}
}

package authz

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzsqlite"
)

// TestForgedPrincipal: a user credential may only ask about itself (gRPC and
// REST); service and admin credentials may ask about anyone.
func TestForgedPrincipal(t *testing.T) {
	h := start(t, nil)
	ctx := ctxT(t)
	forged := []*typev1.Principal{
		bob, // someone else
		{Subject: "alice", Tenant: "default", Roles: []string{"admin"}, Attributes: alice.Attributes},                  // own subject, forged role
		{Subject: "alice", Tenant: "default", Roles: []string{"user"}, Attributes: map[string]string{"team": "infra"}}, // forged attribute
		{Subject: "alice", Tenant: "acme", Roles: []string{"user"}},                                                    // other tenant
	}
	for i, p := range forged {
		_, err := h.user.Authorize(ctx, toolCall(p, "web_search"))
		if codeOf(err) != codes.PermissionDenied || reasonOf(err) != "ERROR_REASON_FORGED_PRINCIPAL" {
			t.Fatalf("forged %d Authorize: %v", i, err)
		}
		_, err = h.user.FilterResources(ctx, &authzv1.FilterResourcesRequest{Principal: p, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Candidates: []string{"a"}})
		if codeOf(err) != codes.PermissionDenied {
			t.Fatalf("forged %d FilterResources: %v", i, err)
		}
	}
	// Own principal (explicit or absent) is fine.
	for _, p := range []*typev1.Principal{alice, nil} {
		if d := h.authorize(h.user, toolCall(p, "web_search")); !d.GetAllow() {
			t.Fatalf("own principal: %+v", d)
		}
	}
	// A service and an admin may ask about anyone; bob's decision uses bob's roles.
	for _, c := range []authzv1.AuthzServiceClient{h.svc, h.admin} {
		if d := h.authorize(c, toolCall(bob, "web_search")); !d.GetAllow() || d.GetPolicyVersion() == 0 {
			t.Fatalf("service asking about bob: %+v", d)
		}
		d := h.authorize(c, toolCall(&typev1.Principal{Subject: "eve", Roles: []string{"nobody"}}, "web_search"))
		if d.GetAllow() || d.GetReasons()[0].GetCode() != authzcasbin.CodeUnknownRole {
			t.Fatalf("unknown role: %+v", d)
		}
	}
	// A service acting for a user, without a principal in the body, decides about that user.
	actx := grpcx.WithActingFor(ctx, auth.FormatActingFor(&typev1.Principal{Subject: "dora", Tenant: "default", Roles: []string{"nobody"}}))
	if r, err := h.svc.Authorize(actx, toolCall(nil, "web_search")); err != nil || r.GetDecision().GetReasons()[0].GetCode() != authzcasbin.CodeUnknownRole {
		t.Fatalf("acting-for: %v %+v", err, r)
	}
	// Acting-for from a user credential is refused by the interceptor.
	if _, err := h.user.Authorize(actx, toolCall(nil, "web_search")); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("user acting-for: %v", err)
	}
	// REST: the same rule.
	body := map[string]any{"principal": map[string]any{"subject": "bob", "tenant": "acme", "roles": []string{"user"}},
		"resource_type": "RESOURCE_TYPE_TOOL", "action": "ACTION_CALL", "target": "web_search"}
	if code, out := h.restCall("POST", "/v1/authz:authorize", tokUser, body); code != http.StatusForbidden {
		t.Fatalf("REST forged: %d %v", code, out)
	}
	code, out := h.restCall("POST", "/v1/authz:authorize", tokSvc, body)
	if code != http.StatusOK || out["decision"].(map[string]any)["allow"] != true {
		t.Fatalf("REST service: %d %v", code, out)
	}
	code, out = h.restCall("POST", "/v1/authz:filter", tokUser, map[string]any{"principal": body["principal"], "resource_type": "RESOURCE_TYPE_TOOL", "candidates": []string{"x"}})
	if code != http.StatusForbidden {
		t.Fatalf("REST forged filter: %d %v", code, out)
	}
}

// TestAuthorizeConditionsAndAudit: API-added conditional lines decide at call
// time, every deny is in the audit log before the answer, with a bounded
// input and the trusted call context.
func TestAuthorizeConditionsAndAudit(t *testing.T) {
	h := start(t, nil)
	ctx := ctxT(t)
	add, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "filesystem_write_file", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY,
			Conditions: []*authzv1.Condition{{Check: &authzv1.Condition_PathPrefix{PathPrefix: &authzv1.PathPrefix{Arg: "path", Prefixes: []string{"/mnt/user-data/"}}}}}},
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "bash", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY,
			Conditions: []*authzv1.Condition{{Check: &authzv1.Condition_Expression{Expression: `!input.command matches 'rm\s+-rf'`}}}},
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "deploy_*", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY,
			Conditions: []*authzv1.Condition{{Check: &authzv1.Condition_IsSubagent{IsSubagent: false}}, {Check: &authzv1.Condition_AttributeEquals{AttributeEquals: &authzv1.AttributeEquals{Key: "team", Values: []string{"infra", "sre"}}}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(add.GetPolicies()) != 3 || !strings.HasPrefix(add.GetPolicies()[0].GetId(), "p:") {
		t.Fatalf("AddPolicies response: %+v", add)
	}
	v := add.GetPolicyVersion()
	call := func(c authzv1.AuthzServiceClient, target string, in map[string]any, cc *typev1.CallContext) *authzv1.Decision {
		r := toolCall(nil, target)
		r.Input = mustStruct(t, in)
		r.CallContext = cc
		return h.authorize(c, r)
	}
	d := call(h.user, "filesystem_write_file", map[string]any{"path": "/mnt/user-data/outputs/a.txt"}, nil)
	if !d.GetAllow() || d.GetPolicyVersion() != v {
		t.Fatalf("write inside: %+v (want version %d)", d, v)
	}
	long := strings.Repeat("x", 20000)
	d = call(h.user, "filesystem_write_file", map[string]any{"path": "/etc/passwd", "content": long}, &typev1.CallContext{Agent: "ignored-from-user"})
	if d.GetAllow() || d.GetReasons()[0].GetCode() != authzcasbin.CodeConditionFailed || !strings.Contains(d.GetReasons()[0].GetMessage(), "input.path") {
		t.Fatalf("write outside: %+v", d)
	}
	denyID := d.GetDecisionId()
	if d := call(h.user, "bash", map[string]any{"command": "sudo rm -rf /"}, nil); d.GetAllow() || d.GetReasons()[0].GetCode() != authzcasbin.CodeConditionFailed {
		t.Fatalf("bash rm: %+v", d)
	}
	if d := call(h.user, "bash", map[string]any{"command": "ls"}, nil); !d.GetAllow() {
		t.Fatalf("bash ls: %+v", d)
	}
	// deploy_*: denied unless (not a subagent AND team in infra/sre). Alice is team web.
	if d := call(h.user, "deploy_prod", map[string]any{}, nil); d.GetAllow() {
		t.Fatalf("deploy as web team: %+v", d)
	}
	infra := &typev1.Principal{Subject: "carl", Roles: []string{"user"}, Attributes: map[string]string{"team": "infra"}}
	r := toolCall(infra, "deploy_prod")
	r.CallContext = &typev1.CallContext{IsSubagent: true, Agent: "planner", ThreadId: "th1", ToolCallId: "tc9"}
	if d := h.authorize(h.svc, r); d.GetAllow() {
		t.Fatalf("deploy from subagent: %+v", d)
	}
	r.CallContext.IsSubagent = false
	if d := h.authorize(h.svc, r); !d.GetAllow() {
		t.Fatalf("deploy infra, lead agent: %+v", d)
	}
	// The audit log (admin, tenant default) has every deny, newest first.
	deny := false
	list, err := h.admin.ListDecisions(ctx, &authzv1.ListDecisionsRequest{Allow: &deny, Kind: authzv1.DecisionKind_DECISION_KIND_AUTHORIZE})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetDecisions()); n != 4 {
		t.Fatalf("%d deny records, want 4", n)
	}
	var rec *authzv1.DecisionRecord
	for _, x := range list.GetDecisions() {
		if x.GetId() == denyID {
			rec = x
		}
	}
	if rec == nil {
		t.Fatalf("deny %s not in the log", denyID)
	}
	if rec.GetTarget() != "filesystem_write_file" || rec.GetPolicyVersion() != v || rec.GetPrincipal().GetSubject() != "alice" || rec.GetAllow() {
		t.Fatalf("record: %+v", rec)
	}
	if rec.GetCallContext() != nil {
		t.Fatal("call context from a user credential was recorded as trusted")
	}
	if c := rec.GetInput().GetFields()["content"].GetStringValue(); len(c) > 600 || rec.GetInput().GetFields()["path"].GetStringValue() != "/etc/passwd" {
		t.Fatalf("input not bounded: %d bytes", len(c))
	}
	subagentDeny := list.GetDecisions()[0]
	if subagentDeny.GetCallContext().GetToolCallId() != "tc9" || !subagentDeny.GetCallContext().GetIsSubagent() {
		t.Fatalf("service call context not recorded: %+v", subagentDeny)
	}
	// Allows are not recorded by default.
	allow := true
	if l, _ := h.admin.ListDecisions(ctx, &authzv1.ListDecisionsRequest{Allow: &allow, Kind: authzv1.DecisionKind_DECISION_KIND_AUTHORIZE}); len(l.GetDecisions()) != 0 {
		t.Fatalf("allows recorded: %d", len(l.GetDecisions()))
	}
	// ListDecisions is admin-only and tenant-scoped: bob's tenant sees nothing of default.
	if _, err := h.user.ListDecisions(ctx, &authzv1.ListDecisionsRequest{}); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("user ListDecisions: %v", err)
	}
	// Pagination.
	p1, _ := h.admin.ListDecisions(ctx, &authzv1.ListDecisionsRequest{PageSize: 3})
	p2, _ := h.admin.ListDecisions(ctx, &authzv1.ListDecisionsRequest{PageSize: 3, PageToken: p1.GetNextPageToken()})
	if len(p1.GetDecisions()) != 3 || p1.GetNextPageToken() == "" || len(p2.GetDecisions()) != 1 || p2.GetNextPageToken() != "" {
		t.Fatalf("pages: %d %q %d %q", len(p1.GetDecisions()), p1.GetNextPageToken(), len(p2.GetDecisions()), p2.GetNextPageToken())
	}
	if _, err := h.admin.ListDecisions(ctx, &authzv1.ListDecisionsRequest{PageToken: "garbage!"}); codeOf(err) != codes.InvalidArgument {
		t.Fatalf("bad token: %v", err)
	}
}

func TestAuditAllows(t *testing.T) {
	h := start(t, func(c *Config) { c.AuditAllows = true })
	d := h.authorize(h.user, toolCall(nil, "web_search"))
	allow := true
	l, err := h.admin.ListDecisions(ctxT(t), &authzv1.ListDecisionsRequest{Allow: &allow})
	if err != nil || len(l.GetDecisions()) != 1 || l.GetDecisions()[0].GetId() != d.GetDecisionId() {
		t.Fatalf("audited allow: %v %+v", err, l)
	}
}

// TestFilterResources: order and duplicates kept, never adds, denied with
// reasons, one summary record, one policy version.
func TestFilterResources(t *testing.T) {
	h := start(t, nil)
	ctx := ctxT(t)
	if _, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "secret_*", Action: authzv1.Action_ACTION_LIST, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY},
		// Input conditions do not hide a tool at list time.
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "bash", Action: authzv1.Action_ACTION_LIST, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY,
			Conditions: []*authzv1.Condition{{Check: &authzv1.Condition_ArgPattern{ArgPattern: &authzv1.ArgPattern{Arg: "command", Pattern: "^ls"}}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	cands := []string{"b_tool", "secret_x", "a_tool", "b_tool", "bash", "secret_y"}
	resp, err := h.user.FilterResources(ctx, &authzv1.FilterResourcesRequest{ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Candidates: cands})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.GetAllowed(), []string{"b_tool", "a_tool", "b_tool", "bash"}) {
		t.Fatalf("allowed %v", resp.GetAllowed())
	}
	if len(resp.GetDenied()) != 2 || resp.GetDenied()[0].GetName() != "secret_x" || resp.GetDenied()[0].GetReasons()[0].GetCode() != authzcasbin.CodeDenied {
		t.Fatalf("denied %+v", resp.GetDenied())
	}
	if resp.GetPolicyVersion() != h.srv.engine.Version() {
		t.Fatal("policy version")
	}
	// Models: the default policy lets a user list and use every model.
	for _, a := range []authzv1.Action{authzv1.Action_ACTION_UNSPECIFIED, authzv1.Action_ACTION_USE} {
		mr, _ := h.user.FilterResources(ctx, &authzv1.FilterResourcesRequest{ResourceType: authzv1.ResourceType_RESOURCE_TYPE_MODEL, Action: a, Candidates: []string{"m1", "m2"}})
		if len(mr.GetAllowed()) != 2 {
			t.Fatalf("models (%v): %+v", a, mr)
		}
	}
	eventually(t, 5*time.Second, "filter summary", func() bool {
		l, err := h.admin.ListDecisions(ctx, &authzv1.ListDecisionsRequest{Kind: authzv1.DecisionKind_DECISION_KIND_FILTER})
		if err != nil || len(l.GetDecisions()) != 3 {
			return false
		}
		s := l.GetDecisions()[2]
		return s.GetCandidateCount() == 6 && s.GetAllowedCount() == 4 && slices.Equal(s.GetDenied(), []string{"secret_x", "secret_y"})
	})
	// Validation.
	if _, err := h.user.FilterResources(ctx, &authzv1.FilterResourcesRequest{Candidates: []string{"x"}}); codeOf(err) != codes.InvalidArgument || reasonOf(err) != "ERROR_REASON_INVALID_REQUEST" {
		t.Fatalf("no resource type: %v", err)
	}
	if _, err := h.user.FilterResources(ctx, &authzv1.FilterResourcesRequest{ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Candidates: []string{"x", ""}}); codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "candidates[1]") {
		t.Fatalf("empty candidate: %v", err)
	}
}

// TestPolicyAPI: validation naming fields, admin only, atomic changes,
// ownership, listing, and the version reported by decisions.
func TestPolicyAPI(t *testing.T) {
	dir := t.TempDir()
	pf := filepath.Join(dir, "policy.csv")
	writeFile(t, pf, "p, auditor, *, tool, audit_*, call, allow\ng, user:alice, auditor, default\n")
	h := startIn(t, dir, func(c *Config) { c.PolicyFile = pf })
	ctx := ctxT(t)
	good := &authzv1.Policy{Role: "ops", Tenant: "acme", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "k8s_*", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}
	if _, err := h.user.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{good}}); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("user AddPolicies: %v", err)
	}
	for _, c := range []struct {
		p     *authzv1.Policy
		field string
	}{
		{&authzv1.Policy{Role: "ops", Tenant: "acme", Target: "x", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}, "policies[1].resource_type"},
		{&authzv1.Policy{Role: "ops", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "x", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}, "policies[1].tenant"},
		{&authzv1.Policy{Role: "ops", Tenant: "acme", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "[", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}, "policies[1].target"},
		{&authzv1.Policy{Role: "ops", Tenant: "acme", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "x", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW,
			Conditions: []*authzv1.Condition{{Check: &authzv1.Condition_PathPrefix{PathPrefix: &authzv1.PathPrefix{Arg: "path", Prefixes: []string{"relative"}}}}}}, "policies[1].conditions[0].path_prefix.prefixes[0]"},
		{&authzv1.Policy{Role: "ops", Tenant: "acme", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "x", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW,
			Conditions: []*authzv1.Condition{{Check: &authzv1.Condition_Expression{Expression: "input.x =="}}}}, "policies[1].conditions[0]"},
	} {
		_, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{good, c.p}})
		if codeOf(err) != codes.InvalidArgument || reasonOf(err) != "ERROR_REASON_INVALID_POLICY" || !strings.Contains(err.Error(), c.field) {
			t.Fatalf("want INVALID_ARGUMENT naming %s, got %v", c.field, err)
		}
	}
	// Nothing of the refused requests was stored.
	if l, _ := h.admin.ListPolicies(ctx, &authzv1.ListPoliciesRequest{Role: "ops"}); len(l.GetPolicies()) != 0 {
		t.Fatal("refused request stored lines")
	}
	bobReq := toolCall(bob, "k8s_apply")
	bobReq.Principal = &typev1.Principal{Subject: "bob", Tenant: "acme", Roles: []string{"ops"}}
	if d := h.authorize(h.svc, bobReq); d.GetAllow() {
		t.Fatalf("before add: %+v", d)
	}
	add, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{good}, RoleLinks: []*authzv1.RoleLink{{Member: "sre", Role: "ops", Tenant: "*"}}})
	if err != nil {
		t.Fatal(err)
	}
	d := h.authorize(h.svc, bobReq)
	if !d.GetAllow() || d.GetPolicyVersion() != add.GetPolicyVersion() || d.GetPolicyId() != add.GetPolicies()[0].GetId() {
		t.Fatalf("after add (v%d): %+v", add.GetPolicyVersion(), d)
	}
	bobReq.Principal.Roles = []string{"sre"} // inherits ops
	if d := h.authorize(h.svc, bobReq); !d.GetAllow() {
		t.Fatalf("inherited: %+v", d)
	}
	// Listing with sources and filters.
	l, err := h.admin.ListPolicies(ctx, &authzv1.ListPoliciesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sources := map[authzv1.PolicySource]int{}
	for _, p := range l.GetPolicies() {
		sources[p.GetSource()]++
	}
	if sources[authzv1.PolicySource_POLICY_SOURCE_DEFAULT] != len(authzcasbin.DefaultRules()) || sources[authzv1.PolicySource_POLICY_SOURCE_FILE] != 1 || sources[authzv1.PolicySource_POLICY_SOURCE_API] != 1 {
		t.Fatalf("sources %v", sources)
	}
	if l.GetPolicyVersion() != add.GetPolicyVersion() || len(l.GetRoleLinks()) != 2 {
		t.Fatalf("list: v%d links %d", l.GetPolicyVersion(), len(l.GetRoleLinks()))
	}
	if l, _ := h.admin.ListPolicies(ctx, &authzv1.ListPoliciesRequest{Tenant: "acme"}); len(l.GetPolicies()) != 1 {
		t.Fatalf("tenant filter: %d", len(l.GetPolicies()))
	}
	// File-owned lines are read-only through the API; missing ones NOT_FOUND; atomic.
	fileLine := &authzv1.Policy{Role: "auditor", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "audit_*", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}
	if _, err := h.admin.RemovePolicies(ctx, &authzv1.RemovePoliciesRequest{PolicyIds: []string{add.GetPolicies()[0].GetId()}, Policies: []*authzv1.Policy{fileLine}}); codeOf(err) != codes.FailedPrecondition || reasonOf(err) != "ERROR_REASON_POLICY_READ_ONLY" {
		t.Fatalf("remove file line: %v", err)
	}
	if _, err := h.admin.RemovePolicies(ctx, &authzv1.RemovePoliciesRequest{PolicyIds: []string{"p:000000000000"}}); codeOf(err) != codes.NotFound {
		t.Fatalf("remove missing: %v", err)
	}
	if d := h.authorize(h.svc, bobReq); !d.GetAllow() {
		t.Fatal("failed removal removed something")
	}
	rm, err := h.admin.RemovePolicies(ctx, &authzv1.RemovePoliciesRequest{PolicyIds: []string{add.GetPolicies()[0].GetId()}, RoleLinks: []*authzv1.RoleLink{{Member: "sre", Role: "ops", Tenant: "*"}}})
	if err != nil || rm.GetRemoved() != 2 || rm.GetPolicyVersion() <= add.GetPolicyVersion() {
		t.Fatalf("remove: %+v %v", rm, err)
	}
	if d := h.authorize(h.svc, bobReq); d.GetAllow() || d.GetPolicyVersion() != rm.GetPolicyVersion() {
		t.Fatalf("after remove: %+v", d)
	}
	if _, err := h.admin.RemovePolicies(ctx, &authzv1.RemovePoliciesRequest{PolicyIds: []string{"nope"}}); codeOf(err) != codes.InvalidArgument {
		t.Fatalf("bad id: %v", err)
	}
	// REST listing works for the admin.
	if code, out := h.restCall("GET", "/v1/policies?role=auditor", tokAdmin, nil); code != http.StatusOK || len(out["policies"].([]any)) != 1 {
		t.Fatalf("REST list: %d %v", code, out)
	}
}

// TestWatchPolicy: the stream starts with the current version and follows changes.
func TestWatchPolicy(t *testing.T) {
	h := start(t, nil)
	ctx := ctxT(t)
	st, err := h.user.WatchPolicy(ctx, &authzv1.WatchPolicyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil || first.GetPolicyVersion() != h.srv.engine.Version() {
		t.Fatalf("first: %v %v", first, err)
	}
	add, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{{Role: "x", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_SKILL, Target: "s", Action: authzv1.Action_ACTION_USE, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}}})
	if err != nil {
		t.Fatal(err)
	}
	next, err := st.Recv()
	if err != nil || next.GetPolicyVersion() != add.GetPolicyVersion() {
		t.Fatalf("next: %v %v (want %d)", next, err, add.GetPolicyVersion())
	}
}

// TestPolicyFileHotReload: an edited policy file applies without a restart;
// an invalid edit keeps the previous file lines; the file's lines replace only
// file-owned lines.
func TestPolicyFileHotReload(t *testing.T) {
	dir := t.TempDir()
	pf := filepath.Join(dir, "policy.csv")
	writeFile(t, pf, "p, analyst, *, tool, report_*, call, allow\n")
	h := startIn(t, dir, func(c *Config) { c.PolicyFile = pf })
	req := toolCall(&typev1.Principal{Subject: "z", Roles: []string{"analyst"}}, "report_q1")
	if d := h.authorize(h.svc, req); !d.GetAllow() {
		t.Fatalf("initial file line: %+v", d)
	}
	v0 := h.srv.engine.Version()
	writeFile(t, pf, "# edited\np, analyst, *, tool, report_*, call, deny\n")
	eventually(t, 10*time.Second, "file edit applied", func() bool {
		d := h.authorize(h.svc, req)
		return !d.GetAllow() && d.GetReasons()[0].GetCode() == authzcasbin.CodeDenied && d.GetPolicyVersion() > v0
	})
	v1 := h.srv.engine.Version()
	writeFile(t, pf, "p, analyst, *, boat, x, call, allow\n") // invalid: keeps the previous lines
	time.Sleep(300 * time.Millisecond)
	if d := h.authorize(h.svc, req); d.GetAllow() || d.GetPolicyVersion() != v1 {
		t.Fatalf("invalid edit changed the policy: %+v", d)
	}
	// Default lines untouched by file reloads.
	if d := h.authorize(h.user, toolCall(nil, "web_search")); !d.GetAllow() {
		t.Fatalf("default lines lost: %+v", d)
	}
}

// TestDeerFlowSection: the config's DeerFlow section is imported at start with
// DeerFlow semantics, replaces the default lines of the roles it defines, and
// a restart with another section replaces the previous import.
func TestDeerFlowSection(t *testing.T) {
	dir := t.TempDir()
	sec := map[string]any{"roles": map[string]any{"user": map[string]any{
		"tools":  map[string]any{"allow": []any{"web_search", "read_file"}, "deny": []any{"read_file"}},
		"models": map[string]any{"allow": false},
	}}}
	h := startIn(t, dir, func(c *Config) { c.Authorization = sec })
	cases := []struct {
		req   *authzv1.AuthorizeRequest
		allow bool
	}{
		{toolCall(nil, "web_search"), true},
		{toolCall(nil, "read_file"), false},
		{toolCall(nil, "bash"), false}, // default "user: call every tool" was replaced
		{&authzv1.AuthorizeRequest{ResourceType: authzv1.ResourceType_RESOURCE_TYPE_MODEL, Action: authzv1.Action_ACTION_USE, Target: "gpt"}, false},
		{&authzv1.AuthorizeRequest{ResourceType: authzv1.ResourceType_RESOURCE_TYPE_SKILL, Action: authzv1.Action_ACTION_USE, Target: "pdf"}, true}, // unrestricted
	}
	for i, c := range cases {
		if d := h.authorize(h.user, c.req); d.GetAllow() != c.allow {
			t.Fatalf("case %d: %+v", i, d)
		}
	}
	h.srv.Close()
	// Restart with a section that no longer restricts tools.
	sec = map[string]any{"roles": map[string]any{"user": map[string]any{"models": map[string]any{"allow": false}}}}
	h2 := startIn(t, dir, func(c *Config) { c.Authorization = sec })
	if d := h2.authorize(h2.user, toolCall(nil, "bash")); !d.GetAllow() {
		t.Fatalf("after re-import: %+v", d)
	}
	if d := h2.authorize(h2.user, toolCall(nil, "read_file")); !d.GetAllow() {
		t.Fatalf("old deerflow deny survived: %+v", d)
	}
}

// TestStoreFailureDenies: when the store fails, decisions deny with a reason
// (audit_error for a deny that cannot be logged, store_error once the policy
// cannot be reloaded); nothing crashes; FilterResources fail-open is a switch.
func TestStoreFailureDenies(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		h := start(t, func(c *Config) { c.FilterFailOpen = failOpen })
		if _, err := h.admin.AddPolicies(ctxT(t), &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "nuke", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY}}}); err != nil {
			t.Fatal(err)
		}
		h.srv.store.(*authzsqlite.Store).DB().Close() // inject: the store goes away
		d := h.authorize(h.user, toolCall(nil, "nuke"))
		if d.GetAllow() || !slices.ContainsFunc(d.GetReasons(), func(r *authzv1.Reason) bool { return r.GetCode() == authzcasbin.CodeAuditError }) {
			t.Fatalf("deny with failed store: %+v", d)
		}
		eventually(t, 5*time.Second, "store failure detected", func() bool {
			d := h.authorize(h.user, toolCall(nil, "web_search"))
			return !d.GetAllow() && d.GetReasons()[0].GetCode() == authzcasbin.CodeStoreError
		})
		resp, err := h.user.FilterResources(ctxT(t), &authzv1.FilterResourcesRequest{ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Candidates: []string{"a", "b"}})
		if err != nil {
			t.Fatal(err)
		}
		if failOpen != resp.GetFailOpen() || (failOpen && len(resp.GetAllowed()) != 2) || (!failOpen && len(resp.GetAllowed()) != 0) {
			t.Fatalf("fail-open=%v: %+v", failOpen, resp)
		}
		if _, err := h.admin.AddPolicies(ctxT(t), &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{{Role: "x", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "y", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}}}); codeOf(err) != codes.Unavailable {
			t.Fatalf("AddPolicies on a failed store: %v", err)
		}
		if err := h.srv.Ready(ctxT(t)); err == nil {
			t.Fatal("Ready with a failed store")
		}
	}
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	writeFile(t, bad, "p, a, *, tool, x, fly, allow\n")
	for _, c := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.ReloadInterval = time.Millisecond }, "authz.reload_interval"},
		{func(c *Config) { c.MaxAuditInputBytes = 1 }, "authz.max_audit_input_bytes"},
		{func(c *Config) { c.PolicyFile = filepath.Join(dir, "missing.csv") }, "authz.policy_file"},
		{func(c *Config) { c.PolicyFile = bad }, "line 1: action"},
		{func(c *Config) { c.ModelFile = bad }, "authz.model_file"},
		{func(c *Config) {
			c.Authorization = map[string]any{"roles": map[string]any{"u": map[string]any{"tool": nil}}}
		}, "authz.authorization.roles.u.tool"},
	} {
		var cfg Config
		cfg.SetDefaults()
		c.mut(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want error naming %s, got %v", c.want, err)
		}
	}
	var cfg Config
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// A negative decision_rate is the documented "no limit".
	cfg.DecisionRate = -1
	if err := cfg.Validate(); err != nil {
		t.Fatalf("decision_rate -1 (no limit) refused: %v", err)
	}
	if g := newFloodGuard(cfg); g != nil {
		t.Fatalf("decision_rate -1 built a flood guard %+v; want none (no limit)", g)
	}
}

// TestConcurrentDecisionsDuringPolicyChanges: over gRPC, 8 clients decide
// while an admin toggles a deny line 40 times; every decision matches the
// policy of exactly the version it reports.
func TestConcurrentDecisionsDuringPolicyChanges(t *testing.T) {
	h := start(t, nil)
	ctx := ctxT(t)
	denyLine := &authzv1.Policy{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "flip", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY}
	denied := map[int64]bool{h.srv.engine.Version(): false} // version -> "flip" denied
	type obs struct {
		v     int64
		allow bool
	}
	results := make(chan obs, 100000)
	stop := make(chan struct{})
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := h.svc.Authorize(ctx, toolCall(alice, "flip"))
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case results <- obs{r.GetDecision().GetPolicyVersion(), r.GetDecision().GetAllow()}:
				default:
				}
			}
		}()
	}
	for i := 0; i < 40; i++ {
		if i%2 == 0 {
			r, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{denyLine}})
			if err != nil {
				t.Fatal(err)
			}
			denied[r.GetPolicyVersion()] = true
		} else {
			r, err := h.admin.RemovePolicies(ctx, &authzv1.RemovePoliciesRequest{Policies: []*authzv1.Policy{denyLine}})
			if err != nil {
				t.Fatal(err)
			}
			denied[r.GetPolicyVersion()] = false
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	for g := 0; g < 8; g++ {
		<-done
	}
	close(results)
	n, versions := 0, map[int64]bool{}
	for o := range results {
		want, ok := denied[o.v]
		if !ok {
			t.Fatalf("decision reports unknown version %d", o.v)
		}
		if o.allow == want {
			t.Fatalf("version %d: allow=%v but flip denied=%v", o.v, o.allow, want)
		}
		n++
		versions[o.v] = true
	}
	if n < 100 || len(versions) < 10 {
		t.Fatalf("only %d decisions over %d versions", n, len(versions))
	}
}

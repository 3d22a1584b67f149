package public_test

import (
	"io/fs"
	"testing"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/skills/public"
)

// TestCasbinTemplateDecides loads the casbin-policy-writer template into the
// real authz engine and checks the decisions its comments promise.
func TestCasbinTemplateDecides(t *testing.T) {
	text, err := fs.ReadFile(public.FS, "casbin-policy-writer/templates/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	rules, links, err := authzcasbin.ParsePolicyText(string(text), "template")
	if err != nil {
		t.Fatalf("template does not parse: %v", err)
	}
	e, err := authzcasbin.NewEngine("")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(authzcasbin.PolicySet{Version: 1, Rules: rules, Links: links}); err != nil {
		t.Fatal(err)
	}
	call := func(input map[string]any, sub bool) authzcasbin.CondInput {
		return authzcasbin.CondInput{Input: input, CallTime: true, IsSubagent: sub}
	}
	cases := []struct {
		name string
		req  authzcasbin.Request
		want bool
	}{
		{"user lists a list tool", authzcasbin.Request{Subject: "bob", Roles: []string{"user"}, Resource: "tool", Action: "list", Target: "github_list_repos"}, true},
		{"user calls a get tool", authzcasbin.Request{Subject: "bob", Roles: []string{"user"}, Resource: "tool", Action: "call", Target: "jira_get_issue", Cond: call(map[string]any{}, false)}, true},
		{"user calls a create tool", authzcasbin.Request{Subject: "bob", Roles: []string{"user"}, Resource: "tool", Action: "call", Target: "github_create_issue", Cond: call(map[string]any{}, false)}, false},
		{"write inside outputs", authzcasbin.Request{Subject: "bob", Roles: []string{"user"}, Resource: "tool", Action: "call", Target: "filesystem_write_file",
			Cond: call(map[string]any{"path": "/mnt/user-data/outputs/report.md"}, false)}, true},
		{"write outside outputs", authzcasbin.Request{Subject: "bob", Roles: []string{"user"}, Resource: "tool", Action: "call", Target: "filesystem_write_file",
			Cond: call(map[string]any{"path": "/mnt/user-data/outputs/../../etc/passwd"}, false)}, false},
		{"alice deploys in acme", authzcasbin.Request{Subject: "alice", Tenant: "acme", Roles: []string{"user"}, Resource: "tool", Action: "call", Target: "deploy_service",
			Cond: call(map[string]any{}, false)}, true},
		{"alice's subagent cannot deploy", authzcasbin.Request{Subject: "alice", Tenant: "acme", Roles: []string{"user"}, Resource: "tool", Action: "call", Target: "deploy_service",
			Cond: call(map[string]any{}, true)}, false},
		{"alice is not ops in another tenant", authzcasbin.Request{Subject: "alice", Tenant: "other", Roles: []string{"user"}, Resource: "tool", Action: "call", Target: "deploy_service",
			Cond: call(map[string]any{}, false)}, false},
		{"user uses a skill", authzcasbin.Request{Subject: "bob", Roles: []string{"user"}, Resource: "skill", Action: "use", Target: "tool-search-guide"}, true},
	}
	for _, c := range cases {
		if d := e.DecideUncached(&c.req); d.Allow != c.want {
			t.Errorf("%s: allow=%v want %v (%s)", c.name, d.Allow, c.want, d.Code())
		}
	}
}

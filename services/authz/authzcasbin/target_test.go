package authzcasbin

import "testing"

// Resource names are flat identifiers: "*" and "?" match "/" too, in the
// index and in the Casbin model alike (docs/decisions/0143).
func TestMatchTargetFlatNames(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "acme/tools_search", true},
		{"*", "@scope/pkg/deep_tool", true},
		{"**", "a/b/c", true},
		{"acme/*", "acme/tools_search", true},
		{"acme/*", "acme/x/y", true},
		{"acme/*", "acmex/tools", false},
		{"*_search", "acme/tools_search", true},
		{"github_*", "acme/github_search", false},
		{"a?b", "a/b", true},
		{`a\/b`, "a/b", true},
		{"{acme/a,b}_x", "acme/a_x", true},
		{"(?i)ACME/*", "acme/Tools", true},
		{"(?i)*DELETE*", "notion/API-Delete-a-block", true},
		{"github_*", "github_search", true},
		{"github_*", "gitlab_search", false},
		{"*", "bad\x1fname/x", false}, // the stand-in byte is never a name's
		{"[", "x", false},             // invalid pattern matches nothing
	}
	for _, c := range cases {
		if got := MatchTarget(c.pattern, c.name); got != c.want {
			t.Errorf("MatchTarget(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

// The default policy lets a user see and call tools of servers whose names
// contain "/", decided the same by the engine and the Casbin oracle.
func TestDefaultPolicySlashNames(t *testing.T) {
	rules, links, err := ParsePolicyText(DefaultPolicy+"p, ops, *, tool, acme/*, call, allow\n", SourceAPI)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := NewEngine("")
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Load(PolicySet{Version: 1, Rules: rules, Links: links}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		req  Request
		code string
	}{
		{Request{Subject: "u", Roles: []string{"user"}, Resource: ResourceTool, Action: "list", Target: "@smithery/toolbox_search_servers"}, CodeAllowed},
		{Request{Subject: "u", Roles: []string{"user"}, Resource: ResourceTool, Action: "call", Target: "acme/tools_run"}, CodeAllowed},
		{Request{Subject: "u", Roles: []string{"user"}, Resource: ResourceMCPServer, Action: "list", Target: "@scope/pkg"}, CodeAllowed},
		{Request{Subject: "o", Roles: []string{"ops"}, Resource: ResourceTool, Action: "call", Target: "acme/deep/tool"}, CodeAllowed},
		{Request{Subject: "o", Roles: []string{"ops"}, Resource: ResourceTool, Action: "call", Target: "acmex/tool"}, CodeNoPolicy},
	}
	for _, c := range cases {
		for _, d := range []Decision{eng.Decide(&c.req), eng.DecideOracle(&c.req)} {
			if d.Code() != c.code {
				t.Errorf("%s %s %q: got %s (%v), want %s", c.req.Roles, c.req.Action, c.req.Target, d.Code(), d.Reasons, c.code)
			}
		}
	}
}

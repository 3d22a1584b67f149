package authzcasbin

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func decodeYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTranslateDeerFlow(t *testing.T) {
	rules, roles, err := TranslateDeerFlow(decodeYAML(t, `
roles:
  user:
    tools: {allow: [web_search, "a*b"], deny: [bash]}
    models: {allow: false}
    skills: {allow: "*"}
    acp_agents: {allow: [coder]}
  guest: {}
`), "authz.authorization")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(roles, ",") != "guest,user" {
		t.Fatalf("roles %v", roles)
	}
	var lines []string
	for _, r := range rules {
		if r.Source != SourceDeerFlow || r.Tenant != Wildcard {
			t.Fatalf("bad rule %+v", r)
		}
		if r.Action == ActionCall {
			lines = append(lines, r.String())
		}
	}
	want := []string{
		"p, guest, *, tool, *, call, allow", "p, guest, *, model, *, call, allow", "p, guest, *, skill, *, call, allow", "p, guest, *, mcp_server, *, call, allow",
		"p, guest, *, acp_agent, *, call, allow",
		"p, user, *, tool, web_search, call, allow", `p, user, *, tool, a\*b, call, allow`, "p, user, *, tool, bash, call, deny",
		"p, user, *, skill, *, call, allow", "p, user, *, mcp_server, *, call, allow", "p, user, *, acp_agent, coder, call, allow",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if len(rules) != 3*len(want) {
		t.Fatalf("%d rules, want one per action", len(rules))
	}
	// The escaped name matches only itself.
	e, _ := NewEngine("")
	_ = e.Load(PolicySet{Version: 1, Rules: rules})
	for target, allow := range map[string]bool{"a*b": true, "axxb": false, "web_search": true, "bash": false} {
		if d := e.Decide(&Request{Roles: []string{"user"}, Resource: ResourceTool, Action: ActionCall, Target: target}); d.Allow != allow {
			t.Errorf("%s: %+v", target, d)
		}
	}
}

func TestTranslateDeerFlowErrors(t *testing.T) {
	for doc, want := range map[string]string{
		"enabled: true":                            "authorization.enabled: unknown key",
		"roles: [a]":                               "authorization.roles: want a mapping",
		"roles: {user: {tool: {allow: true}}}":     `authorization.roles.user.tool: singular resource key; use "tools"`,
		"roles: {user: {sandbox: {allow: true}}}":  "authorization.roles.user.sandbox: resource key not supported",
		"roles: {user: {widgets: {allow: true}}}":  "authorization.roles.user.widgets: unknown resource key",
		"roles: {user: {tools: {allow: null}}}":    "authorization.roles.user.tools.allow: null is not allowed",
		"roles: {user: {tools: {allow: some}}}":    `authorization.roles.user.tools.allow: string "some"`,
		"roles: {user: {tools: {allow: 3}}}":       "authorization.roles.user.tools.allow: want true",
		"roles: {user: {tools: {allow: [a, '']}}}": "authorization.roles.user.tools.allow[1]: want a non-empty string",
		"roles: {user: {tools: {deny: null}}}":     "authorization.roles.user.tools.deny: want a list of names, got null",
		"roles: {user: {tools: {allwo: [a]}}}":     "authorization.roles.user.tools.allwo: unknown key",
		"roles: {user: {tools: [a]}}":              "authorization.roles.user.tools: want a mapping",
		"roles: {'bad role': {}}":                  "authorization.roles.bad role: invalid role name",
		"roles: {user: [x]}":                       "authorization.roles.user: want a mapping of resource keys",
	} {
		_, _, err := TranslateDeerFlow(decodeYAML(t, doc), "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", doc, err, want)
		}
	}
}

func TestParsePolicyTextAndDefault(t *testing.T) {
	rules := DefaultRules()
	if len(rules) != 21+14 { // admin's "*" over 7 resource types × 3 actions; user: 14 lines
		t.Fatalf("default policy has %d lines", len(rules))
	}
	for _, r := range rules {
		if r.Resource == Wildcard || r.Action == Wildcard || r.Source != SourceDefault {
			t.Fatalf("unexpanded default line %+v", r)
		}
	}
	for text, want := range map[string]string{
		"p, a, *, tool, x, call":               "want 7 fields",
		"p, a, *, boat, x, call, allow":        "line 1: resource",
		"p, a, *, tool, x, call, maybe":        "effect",
		"p, a, *, tool, x, fly, allow":         "action",
		"p, a, *, tool, x, call, allow, bogus": "condition",
		"\n\ng, a, a, *":                       "line 3: role: a role cannot inherit itself",
		"g, a, user:x, *":                      "role",
		"x, a, b":                              "line type",
		"p, 'bad', *, tool, x, call, allow":    "subject",
		"p, a, t/1, tool, x, call, allow":      "tenant",
		"p, a, *, tool, , call, allow":         "target",
	} {
		_, _, err := ParsePolicyText(text, SourceFile)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
	// Round trip through String.
	r := Rule{Subject: "a", Tenant: "*", Resource: "tool", Target: "{x,y}", Action: "call", Effect: "deny", Condition: `input.p under '/a' && attr.k == "v"`}
	got, _, err := ParsePolicyText(r.String(), SourceAPI)
	if err != nil || len(got) != 1 || got[0].ID() != r.ID() {
		t.Fatalf("round trip of %s: %v %+v", r.String(), err, got)
	}
}

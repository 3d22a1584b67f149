package authzcasbin

import (
	"strings"
	"testing"
)

func TestConditionEval(t *testing.T) {
	call := func(kv map[string]any) *CondInput { return &CondInput{CallTime: true, Input: kv} }
	cases := []struct {
		cond string
		in   *CondInput
		want Tri
	}{
		{"subagent", &CondInput{IsSubagent: true}, True},
		{"!subagent", &CondInput{IsSubagent: true}, False},
		{"attr.team in ['a', 'b']", &CondInput{Attributes: map[string]string{"team": "b"}}, True},
		{"attr.team in ['a', 'b']", &CondInput{}, False},
		{"attr.team != ['a', 'b']", &CondInput{Attributes: map[string]string{"team": "c"}}, True},
		{"attr.team != ['a', 'b']", &CondInput{Attributes: map[string]string{"team": "a"}}, False},
		{"agent == 'x' || subagent", &CondInput{IsSubagent: true}, True},
		{"agent == 'x' || subagent", &CondInput{Agent: "y"}, False},
		{"(agent == 'x' || subagent) && attr.k == 'v'", &CondInput{Agent: "x", Attributes: map[string]string{"k": "v"}}, True},
		{"!(agent == 'x' && subagent)", &CondInput{Agent: "x", IsSubagent: true}, False},
		{"input.path under '/data'", call(map[string]any{"path": "/data"}), True},
		{"input.path under '/data/'", call(map[string]any{"path": "/data/a/b"}), True},
		{"input.path under '/data'", call(map[string]any{"path": "/data/../etc"}), False},
		{"input.path under '/data'", call(map[string]any{"path": "data/x"}), False},
		{"input.path under ['/a', '/b']", call(map[string]any{"path": "/b/x"}), True},
		{"input.path under '/data'", call(map[string]any{}), Unknown},
		{"input.path under '/data'", &CondInput{}, Unknown},
		{"input.n == '3'", call(map[string]any{"n": 3.0}), True},
		{"input.flag == 'true'", call(map[string]any{"flag": true}), True},
		{"input.a.b glob 'x*'", call(map[string]any{"a": map[string]any{"b": "xyz"}}), True},
		{"input.a.b glob 'x*'", call(map[string]any{"a": []any{"x"}}), Unknown},
		{"input.cmd matches \"^ls\\\\b\"", call(map[string]any{"cmd": "ls -l"}), True},
		{"input.cmd prefix 'git '", call(map[string]any{"cmd": "git status"}), True},
		{"input.x == 'a' && input.y == 'b'", call(map[string]any{"x": "z"}), False},   // false wins over unknown
		{"input.x == 'a' || input.y == 'b'", call(map[string]any{"y": "b"}), True},    // true wins over unknown
		{"input.x == 'a' || input.y == 'b'", call(map[string]any{"y": "c"}), Unknown}, // unknown over false
		{"!input.x == 'a'", call(map[string]any{}), Unknown},
	}
	for _, c := range cases {
		cond, err := ParseCondition(c.cond)
		if err != nil {
			t.Fatalf("%s: %v", c.cond, err)
		}
		got, detail := cond.Eval(c.in)
		if got != c.want {
			t.Errorf("%s: got %v want %v (%s)", c.cond, got, c.want, detail)
		}
		if got != True && detail == "" {
			t.Errorf("%s: no detail for %v", c.cond, got)
		}
	}
}

func TestConditionParseErrors(t *testing.T) {
	for cond, want := range map[string]string{
		"":                         "empty",
		"input.path":               "missing operator",
		"input.path under 'rel'":   "absolute",
		"input.cmd matches '('":    "matches",
		"input.path equals 'x'":    "operator",
		"user.x == 'y'":            "operand",
		"attr. == 'y'":             "empty attribute",
		"input..x == 'y'":          "empty field",
		"(subagent":                "missing )",
		"subagent &&":              "end of condition",
		"subagent subagent":        "unexpected",
		"input.a == 'x":            "unterminated",
		"input.a in ['x', 3]":      "list of strings",
		"input.a glob '[' ":        "glob",
		"input.a == 'x' # comment": "unexpected character",
		strings.Repeat("(", 40) + "subagent" + strings.Repeat(")", 40): "nested",
	} {
		_, err := ParseCondition(cond)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to mention %q", cond, err, want)
		}
	}
}

func TestRuleAppliesRequirementSemantics(t *testing.T) {
	c, _ := ParseCondition("input.path under '/ok'")
	listTime := &CondInput{}
	callNoField := &CondInput{CallTime: true, Input: map[string]any{}}
	callOK := &CondInput{CallTime: true, Input: map[string]any{"path": "/ok/x"}}
	callBad := &CondInput{CallTime: true, Input: map[string]any{"path": "/bad"}}
	for _, x := range []struct {
		eft  string
		in   *CondInput
		want bool
	}{
		{EffectAllow, listTime, true}, {EffectDeny, listTime, false},
		{EffectAllow, callNoField, false}, {EffectDeny, callNoField, true},
		{EffectAllow, callOK, true}, {EffectDeny, callOK, false},
		{EffectAllow, callBad, false}, {EffectDeny, callBad, true},
	} {
		if got, _, _ := ruleApplies(c, x.eft, x.in); got != x.want {
			t.Errorf("%s %+v: applies=%v want %v", x.eft, x.in, got, x.want)
		}
	}
}

// TestResourceAttributeClauses: server and annotation.<key> read the
// resource's attributes; an unannotated tool matches the defaults (read-only
// false, destructive true), a non-boolean hint cannot claim read-only.
func TestResourceAttributeClauses(t *testing.T) {
	ro := ResolveAnnotations(map[string]any{"readOnlyHint": true, "title": "Read file"}, nil)
	cases := []struct {
		cond string
		in   *CondInput
		want Tri
	}{
		{"annotation.readOnlyHint == 'true'", &CondInput{Annotations: ro}, True},
		{"annotation.destructiveHint == 'true'", &CondInput{Annotations: ro}, True}, // default: destructive
		{"annotation.title glob 'Read*'", &CondInput{Annotations: ro}, True},
		{"annotation.readOnlyHint == 'true'", &CondInput{}, False},   // no attributes: defaults
		{"annotation.readOnlyHint == 'true'", nil, False},            // no input at all
		{"annotation.destructiveHint == 'true'", &CondInput{}, True}, // MCP default
		{"annotation.readOnlyHint == 'true'", &CondInput{Annotations: ResolveAnnotations(map[string]any{"readOnlyHint": "true"}, nil)}, False},
		{"annotation.readOnlyHint == 'true'", &CondInput{Annotations: ResolveAnnotations(nil, map[string]bool{"readOnlyHint": true})}, True},
		{"annotation.title == ''", &CondInput{}, True},
		{"server == 'github'", &CondInput{Server: "github"}, True},
		{"server in ['git', 'filesystem']", &CondInput{Server: "github"}, False},
		{"server == 'github'", &CondInput{}, False},
		{"server != 'github' || annotation.readOnlyHint == 'true'", &CondInput{Server: "github", Annotations: ro}, True},
	}
	for _, c := range cases {
		cond, err := ParseCondition(c.cond)
		if err != nil {
			t.Fatalf("%s: %v", c.cond, err)
		}
		if got, detail := cond.Eval(c.in); got != c.want {
			t.Errorf("%s: got %v want %v (%s)", c.cond, got, c.want, detail)
		}
	}
	for _, bad := range []string{"annotation. == 'x'", "annotation.a.b == 'x'", "server", "server ~ 'x'"} {
		if _, err := ParseCondition(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestCaseInsensitiveTarget: a "(?i)" target matches regardless of case on
// the index and on Casbin, a plain one stays case-sensitive.
func TestCaseInsensitiveTarget(t *testing.T) {
	set := PolicySet{Version: 1, Rules: []Rule{
		{Subject: "viewer", Tenant: Wildcard, Resource: ResourceTool, Target: "*", Action: Wildcard, Effect: EffectAllow},
		{Subject: "viewer", Tenant: Wildcard, Resource: ResourceTool, Target: "(?i)*delete*", Action: Wildcard, Effect: EffectDeny},
		{Subject: "viewer", Tenant: Wildcard, Resource: ResourceTool, Target: "*Write*", Action: Wildcard, Effect: EffectDeny},
	}}
	e, _ := NewEngine("")
	if err := e.Load(set); err != nil {
		t.Fatal(err)
	}
	for name, allow := range map[string]bool{"delete_x": false, "DELETE_X": false, "API-Delete-a-block": false, "Write": false, "write": true, "read": true} {
		req := Request{Roles: []string{"viewer"}, Resource: ResourceTool, Action: ActionCall, Target: name}
		if d, o := e.Decide(&req), e.DecideOracle(&req); d.Allow != allow || o.Allow != allow {
			t.Errorf("%s: index %v, casbin %v, want %v", name, d.Allow, o.Allow, allow)
		}
	}
	if err := (Rule{Subject: "r", Tenant: Wildcard, Resource: ResourceTool, Target: "(?i)", Action: ActionCall, Effect: EffectAllow}).Validate(); err == nil {
		t.Error("empty case-insensitive glob accepted")
	}
}

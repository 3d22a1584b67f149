package authzcasbin

import (
	"strings"
	"testing"
)

const tablePolicy = DefaultPolicy + `
# tenants and inheritance
p, editor, acme, tool, docs_*, call, allow
p, editor, acme, tool, docs_delete, call, deny
p, viewer, acme, tool, docs_read, call, allow
p, viewer, *, skill, pdf, use, allow
g, editor, viewer, acme
g, lead, editor, *
g, user:carol, lead, globex
p, lead, globex, tool, report_*, call, allow
p, ops, *, tool, deploy_*, call, allow, attr.team == 'infra' && !subagent
p, ops, *, tool, bash, call, allow
p, ops, *, tool, bash, call, deny, !input.command matches 'rm\s+-rf'
p, ops, *, tool, filesystem_write_file, call, allow
p, ops, *, tool, filesystem_write_file, call, deny, input.path under '/mnt/user-data'
p, ops, *, model, gpt-*, use, allow
p, ops, *, model, gpt-4o, use, deny
p, ops, *, mcp_server, github, list, allow
p, ops, *, tool, agent_only, call, allow, agent == 'planner'
p, ops, *, tool, nested, call, allow, "input.opts.mode == ""safe"""
p, guest, *, tool, ?eb_search, list, allow
p, guest, *, tool, "{web,news}_fetch", call, allow
p, guest, *, tool, web_**, call, deny
p, user:dave, *, tool, secret_tool, call, allow
p, user, *, tool, nuke, call, deny
`

func TestDecisionTable(t *testing.T) {
	rules, links, err := ParsePolicyText(tablePolicy, SourceAPI)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := NewEngine("")
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Load(PolicySet{Version: 7, Rules: rules, Links: links}); err != nil {
		t.Fatal(err)
	}
	in := func(kv ...string) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	type tc struct {
		name    string
		req     Request
		allow   bool
		code    string
		inMsg   string // substring of the first reason message
		oracleX bool   // oracle has no unknown-role pre-check distinction (same engine path): always compared
	}
	tool := func(roles []string, tenant, action, target string) Request {
		return Request{Subject: "u1", Tenant: tenant, Roles: roles, Resource: ResourceTool, Action: action, Target: target}
	}
	cases := []tc{
		{name: "admin everything", req: tool([]string{"admin"}, "acme", "call", "bash"), allow: true, code: CodeAllowed},
		{name: "admin model", req: Request{Roles: []string{"admin"}, Resource: ResourceModel, Action: "use", Target: "x"}, allow: true, code: CodeAllowed},
		{name: "user list tool", req: tool([]string{"user"}, "", "list", "anything"), allow: true, code: CodeAllowed},
		{name: "user call tool", req: tool([]string{"user"}, "t9", "call", "web_search"), allow: true, code: CodeAllowed},
		{name: "user use skill", req: Request{Roles: []string{"user"}, Resource: ResourceSkill, Action: "use", Target: "pdf"}, allow: true, code: CodeAllowed},
		{name: "user use model", req: Request{Roles: []string{"user"}, Resource: ResourceModel, Action: "use", Target: "gpt-4o"}, allow: true, code: CodeAllowed},
		{name: "user mcp server list", req: Request{Roles: []string{"user"}, Resource: ResourceMCPServer, Action: "list", Target: "github"}, allow: true, code: CodeAllowed},
		{name: "user explicit deny nuke", req: tool([]string{"user"}, "", "call", "nuke"), allow: false, code: CodeDenied, inMsg: "denied by rule"},
		{name: "user list nuke still allowed", req: tool([]string{"user"}, "", "list", "nuke"), allow: true, code: CodeAllowed},
		{name: "admin+user deny wins across roles", req: tool([]string{"admin", "user"}, "", "call", "nuke"), allow: false, code: CodeDenied},
		{name: "editor tenant acme glob", req: tool([]string{"editor"}, "acme", "call", "docs_write"), allow: true, code: CodeAllowed},
		{name: "editor other tenant", req: tool([]string{"editor"}, "globex", "call", "docs_write"), allow: false, code: CodeNoPolicy},
		{name: "editor deny overrides glob allow", req: tool([]string{"editor"}, "acme", "call", "docs_delete"), allow: false, code: CodeDenied},
		{name: "editor inherits viewer in acme", req: tool([]string{"editor"}, "acme", "call", "docs_read"), allow: true, code: CodeAllowed},
		{name: "editor inherits viewer skill", req: Request{Roles: []string{"editor"}, Tenant: "acme", Resource: ResourceSkill, Action: "use", Target: "pdf"}, allow: true, code: CodeAllowed},
		{name: "lead inherits editor everywhere then viewer in acme", req: tool([]string{"lead"}, "acme", "call", "docs_read"), allow: true, code: CodeAllowed},
		{name: "lead in globex has no acme rules", req: tool([]string{"lead"}, "globex", "call", "docs_read"), allow: false, code: CodeNoPolicy},
		{name: "user subject link carol in globex", req: Request{Subject: "carol", Tenant: "globex", Resource: ResourceTool, Action: "call", Target: "report_q3"}, allow: true, code: CodeAllowed},
		{name: "carol does not reach viewer outside acme", req: Request{Subject: "carol", Tenant: "globex", Resource: ResourceSkill, Action: "use", Target: "pdf"}, allow: false, code: CodeNoPolicy},
		{name: "carol link does not apply in acme", req: Request{Subject: "carol", Tenant: "acme", Resource: ResourceTool, Action: "call", Target: "docs_read"}, allow: false, code: CodeNoPolicy},
		{name: "user subject rule dave", req: Request{Subject: "dave", Resource: ResourceTool, Action: "call", Target: "secret_tool"}, allow: true, code: CodeAllowed},
		{name: "wrong action", req: tool([]string{"editor"}, "acme", "list", "docs_write"), allow: false, code: CodeNoPolicy},
		{name: "wrong resource type", req: Request{Roles: []string{"editor"}, Tenant: "acme", Resource: ResourceModel, Action: "call", Target: "docs_write"}, allow: false, code: CodeNoPolicy},
		{name: "attr condition holds", req: withCond(tool([]string{"ops"}, "", "call", "deploy_prod"), CondInput{Attributes: map[string]string{"team": "infra"}, CallTime: true, Input: in()}), allow: true, code: CodeAllowed},
		{name: "attr condition fails", req: withCond(tool([]string{"ops"}, "", "call", "deploy_prod"), CondInput{Attributes: map[string]string{"team": "web"}, CallTime: true, Input: in()}), allow: false, code: CodeConditionFailed, inMsg: "attr.team"},
		{name: "subagent blocked", req: withCond(tool([]string{"ops"}, "", "call", "deploy_prod"), CondInput{Attributes: map[string]string{"team": "infra"}, IsSubagent: true, CallTime: true, Input: in()}), allow: false, code: CodeConditionFailed, inMsg: "subagent"},
		{name: "bash safe command", req: withCond(tool([]string{"ops"}, "", "call", "bash"), CondInput{CallTime: true, Input: in("command", "ls -la")}), allow: true, code: CodeAllowed},
		{name: "bash dangerous command", req: withCond(tool([]string{"ops"}, "", "call", "bash"), CondInput{CallTime: true, Input: in("command", "rm  -rf /")}), allow: false, code: CodeConditionFailed, inMsg: "input.command"},
		{name: "bash missing command fails closed", req: withCond(tool([]string{"ops"}, "", "call", "bash"), CondInput{CallTime: true, Input: in()}), allow: false, code: CodeConditionFailed, inMsg: "cannot be decided"},
		{name: "bash list time ignores input deny", req: withCond(tool([]string{"ops"}, "", "call", "bash"), CondInput{}), allow: true, code: CodeAllowed},
		{name: "write inside prefix", req: withCond(tool([]string{"ops"}, "", "call", "filesystem_write_file"), CondInput{CallTime: true, Input: in("path", "/mnt/user-data/outputs/a.txt")}), allow: true, code: CodeAllowed},
		{name: "write outside prefix", req: withCond(tool([]string{"ops"}, "", "call", "filesystem_write_file"), CondInput{CallTime: true, Input: in("path", "/etc/passwd")}), allow: false, code: CodeConditionFailed, inMsg: "input.path"},
		{name: "write dotdot escape", req: withCond(tool([]string{"ops"}, "", "call", "filesystem_write_file"), CondInput{CallTime: true, Input: in("path", "/mnt/user-data/../../etc/x")}), allow: false, code: CodeConditionFailed},
		{name: "write sibling prefix", req: withCond(tool([]string{"ops"}, "", "call", "filesystem_write_file"), CondInput{CallTime: true, Input: in("path", "/mnt/user-data-evil/x")}), allow: false, code: CodeConditionFailed},
		{name: "agent condition holds", req: withCond(tool([]string{"ops"}, "", "call", "agent_only"), CondInput{Agent: "planner", CallTime: true, Input: in()}), allow: true, code: CodeAllowed},
		{name: "agent condition fails", req: withCond(tool([]string{"ops"}, "", "call", "agent_only"), CondInput{Agent: "other", CallTime: true, Input: in()}), allow: false, code: CodeConditionFailed},
		{name: "nested input holds", req: withCond(tool([]string{"ops"}, "", "call", "nested"), CondInput{CallTime: true, Input: map[string]any{"opts": map[string]any{"mode": "safe"}}}), allow: true, code: CodeAllowed},
		{name: "nested input unknown at call time", req: withCond(tool([]string{"ops"}, "", "call", "nested"), CondInput{CallTime: true, Input: map[string]any{"opts": "x"}}), allow: false, code: CodeConditionFailed},
		{name: "nested input list time optimistic", req: withCond(tool([]string{"ops"}, "", "call", "nested"), CondInput{}), allow: true, code: CodeAllowed},
		{name: "model glob allow", req: Request{Roles: []string{"ops"}, Resource: ResourceModel, Action: "use", Target: "gpt-4.1"}, allow: true, code: CodeAllowed},
		{name: "model deny beats glob", req: Request{Roles: []string{"ops"}, Resource: ResourceModel, Action: "use", Target: "gpt-4o"}, allow: false, code: CodeDenied},
		{name: "mcp server list", req: Request{Roles: []string{"ops"}, Resource: ResourceMCPServer, Action: "list", Target: "github"}, allow: true, code: CodeAllowed},
		{name: "mcp server other", req: Request{Roles: []string{"ops"}, Resource: ResourceMCPServer, Action: "list", Target: "slack"}, allow: false, code: CodeNoPolicy},
		{name: "question mark glob", req: tool([]string{"guest"}, "", "list", "web_search"), allow: true, code: CodeAllowed},
		{name: "brace glob allow but deny web_**", req: tool([]string{"guest"}, "", "call", "web_fetch"), allow: false, code: CodeDenied},
		{name: "brace glob news", req: tool([]string{"guest"}, "", "call", "news_fetch"), allow: true, code: CodeAllowed},
		{name: "unknown role", req: tool([]string{"nobody"}, "", "call", "x"), allow: false, code: CodeUnknownRole},
		{name: "unknown role plus known role", req: tool([]string{"nobody", "user"}, "", "call", "x"), allow: true, code: CodeAllowed},
		{name: "no roles no subject", req: Request{Resource: ResourceTool, Action: "call", Target: "x"}, allow: false, code: CodeInvalidRequest},
		{name: "bad action", req: tool([]string{"admin"}, "", "delete", "x"), allow: false, code: CodeInvalidRequest},
		{name: "bad tenant", req: tool([]string{"admin"}, "*", "call", "x"), allow: false, code: CodeInvalidRequest},
		{name: "empty target", req: tool([]string{"admin"}, "", "call", ""), allow: false, code: CodeInvalidRequest},
		{name: "role with user prefix is not a user subject", req: tool([]string{"user:dave"}, "", "call", "secret_tool"), allow: false, code: CodeUnknownRole},
		{name: "invalid role names are dropped", req: tool([]string{"bad role", "user"}, "", "call", "web_search"), allow: true, code: CodeAllowed},
		{name: "only invalid roles and no subject", req: Request{Roles: []string{"a/b"}, Resource: ResourceTool, Action: "call", Target: "x"}, allow: false, code: CodeInvalidRequest},
	}
	// DeerFlow-form policies in the same engine.
	df, _, err := TranslateDeerFlow(map[string]any{"roles": map[string]any{
		"analyst": map[string]any{"tools": map[string]any{"allow": []any{"web_search", "read_file"}, "deny": []any{"read_file"}}, "models": map[string]any{"allow": false}},
	}}, "")
	if err != nil {
		t.Fatal(err)
	}
	eng2, _ := NewEngine("")
	if err := eng2.Load(PolicySet{Version: 1, Rules: df}); err != nil {
		t.Fatal(err)
	}
	dfCases := []tc{
		{name: "deerflow allow list", req: tool([]string{"analyst"}, "", "call", "web_search"), allow: true, code: CodeAllowed},
		{name: "deerflow deny wins over allow list", req: tool([]string{"analyst"}, "", "call", "read_file"), allow: false, code: CodeDenied},
		{name: "deerflow not in allow list", req: tool([]string{"analyst"}, "", "call", "bash"), allow: false, code: CodeNoPolicy},
		{name: "deerflow allow false", req: Request{Roles: []string{"analyst"}, Resource: ResourceModel, Action: "use", Target: "gpt"}, allow: false, code: CodeNoPolicy},
		{name: "deerflow no policy = unrestricted", req: Request{Roles: []string{"analyst"}, Resource: ResourceSkill, Action: "use", Target: "any"}, allow: true, code: CodeAllowed},
		{name: "deerflow action ignored", req: Request{Roles: []string{"analyst"}, Resource: ResourceMCPServer, Action: "list", Target: "x"}, allow: true, code: CodeAllowed},
	}
	run := func(t *testing.T, e *Engine, cases []tc) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				for i := 0; i < 2; i++ { // second round may come from the cache
					for _, d := range []Decision{e.Decide(&c.req), e.DecideOracle(&c.req)} {
						if d.Allow != c.allow || d.Code() != c.code {
							t.Fatalf("got allow=%v code=%s (%v), want allow=%v code=%s", d.Allow, d.Code(), d.Reasons, c.allow, c.code)
						}
						if c.inMsg != "" && !strings.Contains(d.Reasons[0].Message, c.inMsg) {
							t.Fatalf("reason %q does not mention %q", d.Reasons[0].Message, c.inMsg)
						}
						if d.PolicyVersion != e.Version() {
							t.Fatalf("policy version %d, want %d", d.PolicyVersion, e.Version())
						}
						if (c.code == CodeAllowed || c.code == CodeDenied) && d.PolicyID == "" {
							t.Fatal("decision without policy id")
						}
					}
				}
			})
		}
	}
	run(t, eng, cases)
	run(t, eng2, dfCases)
	if n := len(cases) + len(dfCases); n < 40 {
		t.Fatalf("only %d cases", n)
	}
}

func withCond(r Request, c CondInput) Request { r.Cond = c; return r }

func TestEngineNotLoadedAndFailed(t *testing.T) {
	e, err := NewEngine("")
	if err != nil {
		t.Fatal(err)
	}
	req := &Request{Roles: []string{"admin"}, Resource: ResourceTool, Action: ActionCall, Target: "x"}
	if d := e.Decide(req); d.Allow || d.Code() != CodeStoreError {
		t.Fatalf("unloaded engine: %+v", d)
	}
	if err := e.Load(PolicySet{Version: 3, Rules: DefaultRules()}); err != nil {
		t.Fatal(err)
	}
	if d := e.Decide(req); !d.Allow || d.PolicyVersion != 3 {
		t.Fatalf("loaded engine: %+v", d)
	}
	ch := e.Changed()
	e.Fail(errTest("disk gone"))
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed on Fail")
	}
	d := e.Decide(req)
	if d.Allow || d.Code() != CodeStoreError || !strings.Contains(d.Reasons[0].Message, "disk gone") {
		t.Fatalf("failed engine: %+v", d)
	}
	// A bad set is refused and the current snapshot stays.
	if err := e.Load(PolicySet{Version: 4, Rules: []Rule{{Subject: "x", Tenant: "*", Resource: "boat", Target: "*", Action: "*", Effect: "allow"}}}); err == nil {
		t.Fatal("invalid set loaded")
	}
	if e.Version() != 3 {
		t.Fatalf("version %d after refused load", e.Version())
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

func TestCustomModel(t *testing.T) {
	// Same shape, but targets use keyMatch (prefix) and there is no deny.
	custom := strings.Replace(DefaultModel, "targetMatch(r.obj, p.obj)", "keyMatch(r.obj, p.obj)", 1)
	custom = strings.Replace(custom, "e = some(where (p.eft == allow)) && !some(where (p.eft == deny))", "e = some(where (p.eft == allow))", 1)
	e, err := NewEngine(custom)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Custom() {
		t.Fatal("not custom")
	}
	rules, _, _ := ParsePolicyText("p, r1, *, tool, a*, call, allow\np, r1, *, tool, ab, call, deny", SourceAPI)
	if err := e.Load(PolicySet{Version: 1, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	d := e.Decide(&Request{Roles: []string{"r1"}, Resource: ResourceTool, Action: ActionCall, Target: "ab/c"})
	if !d.Allow {
		t.Fatalf("keyMatch custom model: %+v", d)
	}
	if _, err := NewEngine("[request_definition]\nr = sub, obj, act\n[policy_definition]\np = sub, obj, act\n[policy_effect]\ne = some(where (p.eft == allow))\n[matchers]\nm = r.sub == p.sub"); err == nil {
		t.Fatal("model with wrong tokens accepted")
	}
}

package authzcasbin

import (
	"fmt"
	"slices"
	"strings"
)

// DeerFlow resource keys (plural, docs/deerflow.md §3.8) and the resource
// type each becomes. acp_agents is Toolplane's: DeerFlow does not gate ACP
// agents, so a role without it keeps them unrestricted, as in DeerFlow.
var deerflowKeys = []struct{ key, resource string }{
	{"tools", ResourceTool},
	{"models", ResourceModel},
	{"skills", ResourceSkill},
	{"mcp_servers", ResourceMCPServer},
	{"acp_agents", ResourceACPAgent},
}

// TranslateDeerFlow translates a DeerFlow `authorization` section, decoded
// from YAML into generic values ({"roles": {<role>: {<resource_key>: {allow,
// deny}}}}), into policy lines with source "deerflow", keeping DeerFlow's
// built-in RBAC semantics (docs/deerflow.md §3.8):
//
//   - Only the key "roles" is accepted. Resource keys are the plural tools,
//     models, skills, mcp_servers; a singular alias, "sandbox", "routes" (no
//     Toolplane resource type) or any other key is an error naming it.
//   - No policy for (role, resource) = unrestricted:  p, <role>, *, <type>, *, *, allow
//   - allow absent, true or "*" = all (the same line); false = none (no
//     allow line: the role grants nothing for that type); a list of non-empty
//     names = one allow line per name; null or another string = error.
//   - deny absent = none; a list = one deny line per name; null = error.
//     Deny always wins (explicit deny beats allow).
//   - Policy keys other than allow and deny are errors.
//   - Tenant is "*" (DeerFlow has no tenants) and every line is emitted once
//     per action (call, list, use: DeerFlow ignores the action). Names are
//     matched exactly (glob metacharacters are escaped).
//
// Example:
//
//	roles:
//	  user:
//	    tools: {allow: [web_search, read_file], deny: [bash]}
//	    models: {allow: false}
//
// becomes
//
//	p, user, *, tool, web_search, <action>, allow    (for each of call, list, use)
//	p, user, *, tool, read_file, <action>, allow
//	p, user, *, tool, bash, <action>, deny
//	p, user, *, skill, *, <action>, allow            (skills: no policy = unrestricted)
//	p, user, *, mcp_server, *, <action>, allow       (mcp_servers: no policy = unrestricted)
//
// and nothing for models. Roles are translated in name order. The returned
// role names are the roles the section defines (their "default" lines are
// replaced by the import, see the store).
func TranslateDeerFlow(section map[string]any, keyPath string) (rules []Rule, roles []string, err error) {
	if keyPath == "" {
		keyPath = "authorization"
	}
	for k := range section {
		if k != "roles" {
			return nil, nil, fmt.Errorf("%s.%s: unknown key (only roles is accepted)", keyPath, k)
		}
	}
	rawRoles, present := section["roles"]
	if !present {
		return nil, nil, nil
	}
	roleMap, ok := rawRoles.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("%s.roles: want a mapping of role name to policy, got %s", keyPath, typeName(rawRoles))
	}
	for name := range roleMap {
		roles = append(roles, name)
	}
	slices.Sort(roles)
	for _, role := range roles {
		rp := fmt.Sprintf("%s.roles.%s", keyPath, role)
		if strings.HasPrefix(role, UserPrefix) || !nameRe.MatchString(role) {
			return nil, nil, fmt.Errorf("%s: invalid role name (want %s)", rp, nameRe)
		}
		var res map[string]any
		switch v := roleMap[role].(type) {
		case map[string]any:
			res = v
		case nil:
			res = map[string]any{}
		default:
			return nil, nil, fmt.Errorf("%s: want a mapping of resource keys, got %s", rp, typeName(v))
		}
		for k := range res {
			if err := checkResourceKey(k); err != nil {
				return nil, nil, fmt.Errorf("%s.%s: %w", rp, k, err)
			}
		}
		for _, dk := range deerflowKeys {
			kp := rp + "." + dk.key
			raw, has := res[dk.key]
			if !has {
				rules = append(rules, deerflowRules(role, dk.resource, Wildcard, EffectAllow)...)
				continue
			}
			pol, ok := raw.(map[string]any)
			if !ok {
				return nil, nil, fmt.Errorf("%s: want a mapping with allow and/or deny, got %s", kp, typeName(raw))
			}
			for k := range pol {
				if k != "allow" && k != "deny" {
					return nil, nil, fmt.Errorf("%s.%s: unknown key (want allow or deny)", kp, k)
				}
			}
			allowV, hasAllow := pol["allow"]
			switch v := allowV.(type) {
			case nil:
				if hasAllow {
					return nil, nil, fmt.Errorf("%s.allow: null is not allowed (want true, \"*\", false or a list of names)", kp)
				}
				rules = append(rules, deerflowRules(role, dk.resource, Wildcard, EffectAllow)...)
			case bool:
				if v {
					rules = append(rules, deerflowRules(role, dk.resource, Wildcard, EffectAllow)...)
				}
			case string:
				if v != "*" {
					return nil, nil, fmt.Errorf("%s.allow: string %q is not allowed (want true, \"*\", false or a list of names)", kp, v)
				}
				rules = append(rules, deerflowRules(role, dk.resource, Wildcard, EffectAllow)...)
			case []any:
				names, err := nameList(v, kp+".allow")
				if err != nil {
					return nil, nil, err
				}
				for _, n := range names {
					rules = append(rules, deerflowRules(role, dk.resource, escapeGlob(n), EffectAllow)...)
				}
			default:
				return nil, nil, fmt.Errorf("%s.allow: want true, \"*\", false or a list of names, got %s", kp, typeName(v))
			}
			if denyV, hasDeny := pol["deny"]; hasDeny {
				list, ok := denyV.([]any)
				if !ok {
					return nil, nil, fmt.Errorf("%s.deny: want a list of names, got %s", kp, typeName(denyV))
				}
				names, err := nameList(list, kp+".deny")
				if err != nil {
					return nil, nil, err
				}
				for _, n := range names {
					rules = append(rules, deerflowRules(role, dk.resource, escapeGlob(n), EffectDeny)...)
				}
			}
		}
	}
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%s.roles.%s: %w", keyPath, r.Subject, err)
		}
	}
	return rules, roles, nil
}

func checkResourceKey(k string) error {
	for _, dk := range deerflowKeys {
		if k == dk.key {
			return nil
		}
		if k == dk.resource || k+"s" == dk.key {
			return fmt.Errorf("singular resource key; use %q", dk.key)
		}
	}
	switch k {
	case "sandbox", "routes", "route":
		return fmt.Errorf("resource key not supported by Toolplane (supported: tools, models, skills, mcp_servers, acp_agents)")
	}
	return fmt.Errorf("unknown resource key (want tools, models, skills, mcp_servers or acp_agents)")
}

func deerflowRules(role, resource, target, effect string) []Rule {
	return Rule{Subject: role, Tenant: Wildcard, Resource: resource, Target: target, Action: Wildcard, Effect: effect, Source: SourceDeerFlow}.Expand()
}

func nameList(v []any, kp string) ([]string, error) {
	out := make([]string, 0, len(v))
	for i, x := range v {
		s, ok := x.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf("%s[%d]: want a non-empty string, got %s", kp, i, typeName(x))
		}
		out = append(out, s)
	}
	return out, nil
}

func escapeGlob(s string) string {
	if !strings.ContainsAny(s, `*?[]{}\`) {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]{}\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case int, int64, float64, uint64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

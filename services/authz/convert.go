package authz

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

var resourceNames = map[authzv1.ResourceType]string{
	authzv1.ResourceType_RESOURCE_TYPE_TOOL:       authzcasbin.ResourceTool,
	authzv1.ResourceType_RESOURCE_TYPE_SKILL:      authzcasbin.ResourceSkill,
	authzv1.ResourceType_RESOURCE_TYPE_MODEL:      authzcasbin.ResourceModel,
	authzv1.ResourceType_RESOURCE_TYPE_MCP_SERVER: authzcasbin.ResourceMCPServer,
	authzv1.ResourceType_RESOURCE_TYPE_RESOURCE:   authzcasbin.ResourceResource,
	authzv1.ResourceType_RESOURCE_TYPE_PROMPT:     authzcasbin.ResourcePrompt,
	authzv1.ResourceType_RESOURCE_TYPE_ACP_AGENT:  authzcasbin.ResourceACPAgent,
}

var actionNames = map[authzv1.Action]string{
	authzv1.Action_ACTION_LIST: authzcasbin.ActionList,
	authzv1.Action_ACTION_CALL: authzcasbin.ActionCall,
	authzv1.Action_ACTION_USE:  authzcasbin.ActionUse,
}

var sourceEnums = map[string]authzv1.PolicySource{
	authzcasbin.SourceDefault:  authzv1.PolicySource_POLICY_SOURCE_DEFAULT,
	authzcasbin.SourceDeerFlow: authzv1.PolicySource_POLICY_SOURCE_DEERFLOW,
	authzcasbin.SourceFile:     authzv1.PolicySource_POLICY_SOURCE_FILE,
	authzcasbin.SourceAPI:      authzv1.PolicySource_POLICY_SOURCE_API,
}

func resourceEnum(s string) authzv1.ResourceType {
	if s == "credential" { // recorded failed logins only (refusalResource)
		return authzv1.ResourceType_RESOURCE_TYPE_CREDENTIAL
	}
	for k, v := range resourceNames {
		if v == s {
			return k
		}
	}
	return authzv1.ResourceType_RESOURCE_TYPE_UNSPECIFIED
}

func actionEnum(s string) authzv1.Action {
	for k, v := range actionNames {
		if v == s {
			return k
		}
	}
	return authzv1.Action_ACTION_UNSPECIFIED
}

var argRe = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// conditionExpr translates one structured condition into the condition
// language (requirement semantics, authzcasbin cond.go); field names the
// condition for errors.
func conditionExpr(c *authzv1.Condition, field string) (string, error) {
	var expr string
	switch x := c.GetCheck().(type) {
	case *authzv1.Condition_PathPrefix:
		if !argRe.MatchString(x.PathPrefix.GetArg()) {
			return "", fmt.Errorf("%s.path_prefix.arg: %q is not an argument name", field, x.PathPrefix.GetArg())
		}
		if len(x.PathPrefix.GetPrefixes()) == 0 {
			return "", fmt.Errorf("%s.path_prefix.prefixes: at least one prefix is required", field)
		}
		for i, p := range x.PathPrefix.GetPrefixes() {
			if !strings.HasPrefix(p, "/") {
				return "", fmt.Errorf("%s.path_prefix.prefixes[%d]: %q must be an absolute path", field, i, p)
			}
		}
		expr = fmt.Sprintf("input.%s under %s", x.PathPrefix.GetArg(), quoteList(x.PathPrefix.GetPrefixes()))
	case *authzv1.Condition_ArgPattern:
		if !argRe.MatchString(x.ArgPattern.GetArg()) {
			return "", fmt.Errorf("%s.arg_pattern.arg: %q is not an argument name", field, x.ArgPattern.GetArg())
		}
		if n := len(x.ArgPattern.GetPattern()); n == 0 || n > 1024 {
			return "", fmt.Errorf("%s.arg_pattern.pattern: want 1..1024 characters", field)
		}
		expr = fmt.Sprintf("input.%s matches %s", x.ArgPattern.GetArg(), strconv.Quote(x.ArgPattern.GetPattern()))
	case *authzv1.Condition_AttributeEquals:
		if !argRe.MatchString(x.AttributeEquals.GetKey()) || strings.Contains(x.AttributeEquals.GetKey(), ".") {
			return "", fmt.Errorf("%s.attribute_equals.key: %q is not an attribute name", field, x.AttributeEquals.GetKey())
		}
		if len(x.AttributeEquals.GetValues()) == 0 {
			return "", fmt.Errorf("%s.attribute_equals.values: at least one value is required", field)
		}
		expr = fmt.Sprintf("attr.%s in %s", x.AttributeEquals.GetKey(), quoteList(x.AttributeEquals.GetValues()))
	case *authzv1.Condition_IsSubagent:
		expr = "subagent"
		if !x.IsSubagent {
			expr = "!subagent"
		}
	case *authzv1.Condition_Expression:
		expr = x.Expression
	default:
		return "", fmt.Errorf("%s: no check set", field)
	}
	if _, err := authzcasbin.ParseCondition(expr); err != nil {
		return "", fmt.Errorf("%s: %v", field, err)
	}
	return expr, nil
}

// ruleFromProto converts an API policy line; field prefixes errors (e.g.
// "policies[2]"). Conditions are joined with && (all must hold); a single
// expression is kept as written.
func ruleFromProto(p *authzv1.Policy, field string) (authzcasbin.Rule, error) {
	r := authzcasbin.Rule{Subject: p.GetRole(), Tenant: p.GetTenant(), Target: p.GetTarget(), Source: authzcasbin.SourceAPI}
	var ok bool
	if r.Resource, ok = resourceNames[p.GetResourceType()]; !ok {
		return r, fmt.Errorf("%s.resource_type: required (%s)", field, strings.Join(authzcasbin.ResourceTypes, ", "))
	}
	if r.Action, ok = actionNames[p.GetAction()]; !ok {
		return r, fmt.Errorf("%s.action: required (list, call or use)", field)
	}
	switch p.GetEffect() {
	case authzv1.PolicyEffect_POLICY_EFFECT_ALLOW:
		r.Effect = authzcasbin.EffectAllow
	case authzv1.PolicyEffect_POLICY_EFFECT_DENY:
		r.Effect = authzcasbin.EffectDeny
	default:
		return r, fmt.Errorf("%s.effect: required (allow or deny)", field)
	}
	if r.Tenant == "" {
		return r, fmt.Errorf(`%s.tenant: required (a tenant name, or "*" for every tenant)`, field)
	}
	var parts []string
	for i, c := range p.GetConditions() {
		e, err := conditionExpr(c, fmt.Sprintf("%s.conditions[%d]", field, i))
		if err != nil {
			return r, err
		}
		parts = append(parts, e)
	}
	if len(parts) == 1 {
		r.Condition = parts[0]
	} else if len(parts) > 1 {
		for i := range parts {
			parts[i] = "(" + parts[i] + ")"
		}
		r.Condition = strings.Join(parts, " && ")
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("%s.%v", field, err)
	}
	return r, nil
}

func ruleToProto(r authzcasbin.Rule) *authzv1.Policy {
	p := &authzv1.Policy{
		Role: r.Subject, Tenant: r.Tenant, ResourceType: resourceEnum(r.Resource), Target: r.Target,
		Action: actionEnum(r.Action), Source: sourceEnums[r.Source], Id: r.ID(),
		Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW,
	}
	if r.Effect == authzcasbin.EffectDeny {
		p.Effect = authzv1.PolicyEffect_POLICY_EFFECT_DENY
	}
	if r.Condition != "" {
		p.Conditions = []*authzv1.Condition{{Check: &authzv1.Condition_Expression{Expression: r.Condition}}}
	}
	return p
}

func linkFromProto(l *authzv1.RoleLink, field string) (authzcasbin.Link, error) {
	out := authzcasbin.Link{Member: l.GetMember(), Role: l.GetRole(), Tenant: l.GetTenant(), Source: authzcasbin.SourceAPI}
	if out.Tenant == "" {
		return out, fmt.Errorf(`%s.tenant: required (a tenant name, or "*" for every tenant)`, field)
	}
	if err := out.Validate(); err != nil {
		return out, fmt.Errorf("%s.%v", field, err)
	}
	return out, nil
}

func linkToProto(l authzcasbin.Link) *authzv1.RoleLink {
	return &authzv1.RoleLink{Member: l.Member, Role: l.Role, Tenant: l.Tenant, Source: sourceEnums[l.Source]}
}

func reasonsToProto(rs []authzcasbin.Reason) []*authzv1.Reason {
	out := make([]*authzv1.Reason, len(rs))
	for i, r := range rs {
		out[i] = &authzv1.Reason{Code: r.Code, Message: r.Message}
	}
	return out
}

func callContextFromProto(cc *typev1.CallContext) *authzstore.CallContext {
	if cc == nil {
		return nil
	}
	return &authzstore.CallContext{Agent: cc.GetAgent(), IsSubagent: cc.GetIsSubagent(), ThreadID: cc.GetThreadId(), RunID: cc.GetRunId(), ToolCallID: cc.GetToolCallId()}
}

func callContextToProto(cc *authzstore.CallContext) *typev1.CallContext {
	if cc == nil {
		return nil
	}
	return &typev1.CallContext{Agent: cc.Agent, IsSubagent: cc.IsSubagent, ThreadId: cc.ThreadID, RunId: cc.RunID, ToolCallId: cc.ToolCallID}
}

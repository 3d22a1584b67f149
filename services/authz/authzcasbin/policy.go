// Package authzcasbin is the decision core of the authz service: the embedded
// Casbin model, policy lines and role links with their validation, the
// call-time condition language, the shipped default policy, the translation of
// DeerFlow's `authorization.roles` section, and two deciders over one policy
// snapshot — plain Casbin Enforce (the oracle, and the only path for a custom
// model) and an indexed path that gives the same answers much faster.
//
// Semantics (docs/architecture.md §5, docs/deerflow.md §3):
//   - RBAC with domains: tenant = Casbin domain; rules and links in domain "*"
//     apply in every tenant.
//   - Subjects: every role of the principal plus "user:<subject>".
//   - Explicit deny beats allow, across all subjects of the principal.
//   - No matching rule = deny with authz.no_policy (fail closed).
package authzcasbin

import (
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Resource types known to the service (docs/architecture.md §2.2).
const (
	ResourceTool      = "tool"
	ResourceSkill     = "skill"
	ResourceModel     = "model"
	ResourceMCPServer = "mcp_server"
	// ResourceResource is an MCP resource or resource template by exposed
	// URI (docs/decisions/0161-front-door-resources-and-prompts.md).
	ResourceResource = "resource"
	// ResourcePrompt is an MCP prompt by exposed name.
	ResourcePrompt = "prompt"
	// ResourceACPAgent is an ACP agent of catalog.acp_agents
	// (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
	ResourceACPAgent = "acp_agent"
)

// Actions known to the service.
const (
	ActionCall = "call"
	ActionList = "list"
	ActionUse  = "use"
)

// Effects of a policy line.
const (
	EffectAllow = "allow"
	EffectDeny  = "deny"
)

// Wildcard matches every tenant, resource type or action in a rule (and every
// tenant in a role link).
const Wildcard = "*"

// UserPrefix marks a subject that names one user instead of a role:
// "user:<principal subject>".
const UserPrefix = "user:"

// Sources of a policy line. A source decides who may edit a line: the API edits
// SourceAPI and SourceDefault lines; SourceDeerFlow lines are replaced at every
// start from config; SourceFile lines are replaced by every policy file load.
const (
	SourceDefault  = "default"
	SourceAPI      = "api"
	SourceDeerFlow = "deerflow"
	SourceFile     = "file"
)

// ResourceTypes lists the valid resource types of a request, in documentation order.
var ResourceTypes = []string{ResourceTool, ResourceSkill, ResourceModel, ResourceMCPServer, ResourceResource, ResourcePrompt, ResourceACPAgent}

// Actions lists the valid actions of a request.
var Actions = []string{ActionCall, ActionList, ActionUse}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$`)

// Rule is one policy line ("p" in the Casbin model).
type Rule struct {
	Subject   string // role name or "user:<subject>"
	Tenant    string // tenant name or "*"
	Resource  string // resource type or "*"
	Target    string // glob over resource names (doublestar syntax, e.g. "github_*")
	Action    string // action or "*"
	Effect    string // "allow" or "deny"
	Condition string // condition language expression; "" = unconditional (see cond.go)
	Source    string // who owns the line (SourceAPI, ...); not part of the identity
}

// Link is one role link ("g"): Member inherits every rule of Role in Tenant.
type Link struct {
	Member string // role name or "user:<subject>"
	Role   string // role name
	Tenant string // tenant name or "*"
	Source string // who owns the link; not part of the identity
}

// PolicySet is a consistent snapshot of the whole policy at one version.
// Rules and Links are in store order (the order Casbin evaluates them).
type PolicySet struct {
	Version int64
	Rules   []Rule
	Links   []Link
}

// CasbinRule returns the Casbin "p" values of the rule.
func (r Rule) CasbinRule() []string {
	return []string{r.Subject, r.Tenant, r.Resource, r.Target, r.Action, r.Effect, r.Condition}
}

// CasbinRule returns the Casbin "g" values of the link.
func (l Link) CasbinRule() []string { return []string{l.Member, l.Role, l.Tenant} }

// RuleFromCasbin builds a rule from Casbin "p" values (7 fields).
func RuleFromCasbin(v []string) (Rule, error) {
	if len(v) != 7 {
		return Rule{}, fmt.Errorf("policy line: want 7 fields (sub, dom, rtype, obj, act, eft, cond), got %d", len(v))
	}
	return Rule{Subject: v[0], Tenant: v[1], Resource: v[2], Target: v[3], Action: v[4], Effect: v[5], Condition: v[6]}, nil
}

// LinkFromCasbin builds a link from Casbin "g" values (3 fields).
func LinkFromCasbin(v []string) (Link, error) {
	if len(v) != 3 {
		return Link{}, fmt.Errorf("role link: want 3 fields (member, role, domain), got %d", len(v))
	}
	return Link{Member: v[0], Role: v[1], Tenant: v[2]}, nil
}

// ID is the stable identifier of the rule: "p:" + 12 hex digits of SHA-256 over
// its canonical line. It is what decisions report as policy_id.
func (r Rule) ID() string { return lineID("p", r.CasbinRule()) }

// ID is the stable identifier of the link ("g:" + 12 hex digits).
func (l Link) ID() string { return lineID("g", l.CasbinRule()) }

func lineID(ptype string, v []string) string {
	h := sha256.New()
	h.Write([]byte(ptype))
	for _, s := range v {
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	return ptype + ":" + hex.EncodeToString(h.Sum(nil))[:12]
}

// String renders the rule as a policy-file line.
func (r Rule) String() string {
	return formatLine(append([]string{"p"}, trimCond(r.CasbinRule())...))
}

// String renders the link as a policy-file line.
func (l Link) String() string { return formatLine(append([]string{"g"}, l.CasbinRule()...)) }

func trimCond(v []string) []string {
	if v[len(v)-1] == "" {
		return v[:len(v)-1]
	}
	return v
}

func formatLine(v []string) string {
	var b strings.Builder
	for i, s := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		if strings.ContainsAny(s, ",\"#") || strings.TrimSpace(s) != s {
			b.WriteString(`"` + strings.ReplaceAll(s, `"`, `""`) + `"`)
		} else {
			b.WriteString(s)
		}
	}
	return b.String()
}

func validSubject(s string) error {
	if name, ok := strings.CutPrefix(s, UserPrefix); ok {
		if name == "" || len(name) > 256 || strings.ContainsAny(name, "\x00\n\r") {
			return fmt.Errorf("user subject %q: want user:<subject> with a non-empty subject", s)
		}
		return nil
	}
	if !nameRe.MatchString(s) {
		return fmt.Errorf("role %q: want a name matching %s or user:<subject>", s, nameRe)
	}
	return nil
}

func validTenant(s string) error {
	if s == Wildcard || nameRe.MatchString(s) {
		return nil
	}
	return fmt.Errorf("tenant %q: want a name matching %s or \"*\"", s, nameRe)
}

func oneOf(s string, allowed []string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

// Expand returns the rule with a "*" resource type replaced by one line per
// resource type and a "*" action by one line per action (the API's Policy
// message names exactly one of each). Decisions are the same either way.
func (r Rule) Expand() []Rule {
	res, acts := []string{r.Resource}, []string{r.Action}
	if r.Resource == Wildcard {
		res = ResourceTypes
	}
	if r.Action == Wildcard {
		acts = Actions
	}
	out := make([]Rule, 0, len(res)*len(acts))
	for _, rt := range res {
		for _, a := range acts {
			x := r
			x.Resource, x.Action = rt, a
			out = append(out, x)
		}
	}
	return out
}

// CaseInsensitive prefixes a target glob that matches regardless of case:
// "(?i)github_*" matches "GitHub_Search" and "github_search" (both sides are
// lower-cased with Unicode simple folding before doublestar matching).
const CaseInsensitive = "(?i)"

// MatchTarget reports whether a rule's target glob matches a resource name:
// doublestar syntax over a flat name — resource names are identifiers, not
// paths, so "*" and "?" also match "/" (a server named "acme/tools" exposes
// "acme/tools_search", which "*" and "acme/*" match, as DeerFlow's fnmatch
// does; docs/decisions/0143-target-globs-over-flat-names.md) — and
// case-insensitive with the CaseInsensitive prefix. An invalid pattern
// matches nothing. It is the globMatch of both the index and the Casbin
// model.
func MatchTarget(pattern, name string) bool {
	if g, ok := strings.CutPrefix(pattern, CaseInsensitive); ok {
		pattern, name = strings.ToLower(g), strings.ToLower(name)
	}
	// doublestar treats "/" as its only separator; a name with no "/" is
	// matched as is, one with "/" has it replaced on both sides by a byte a
	// valid name cannot hold, so no wildcard stops at it.
	if strings.IndexByte(name, '/') >= 0 || strings.IndexByte(pattern, '/') >= 0 {
		if strings.IndexByte(name, flatSep) >= 0 {
			return false
		}
		pattern = strings.ReplaceAll(pattern, "/", string(flatSep))
		name = strings.ReplaceAll(name, "/", string(flatSep))
	}
	m, _ := doublestar.Match(pattern, name)
	return m
}

// flatSep stands in for "/" while matching (a control character: no valid
// resource name contains one, and a name that does matches nothing).
const flatSep = '\x1f'

// Validate checks every field of the rule; the error names the field.
func (r Rule) Validate() error {
	if err := validSubject(r.Subject); err != nil {
		return fmt.Errorf("subject: %w", err)
	}
	if err := validTenant(r.Tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	if r.Resource != Wildcard && !oneOf(r.Resource, ResourceTypes) {
		return fmt.Errorf("resource: %q is not one of %s or \"*\"", r.Resource, strings.Join(ResourceTypes, ", "))
	}
	if r.Target == "" || len(r.Target) > 256 {
		return fmt.Errorf("target: want a non-empty glob of at most 256 bytes")
	}
	if g := strings.TrimPrefix(r.Target, CaseInsensitive); g == "" || !doublestar.ValidatePattern(g) {
		return fmt.Errorf("target: %q is not a valid glob", r.Target)
	}
	if r.Action != Wildcard && !oneOf(r.Action, Actions) {
		return fmt.Errorf("action: %q is not one of %s or \"*\"", r.Action, strings.Join(Actions, ", "))
	}
	if r.Effect != EffectAllow && r.Effect != EffectDeny {
		return fmt.Errorf("effect: %q is not allow or deny", r.Effect)
	}
	if r.Condition != "" {
		if _, err := ParseCondition(r.Condition); err != nil {
			return fmt.Errorf("condition: %w", err)
		}
	}
	return nil
}

// Validate checks every field of the link; the error names the field.
func (l Link) Validate() error {
	if err := validSubject(l.Member); err != nil {
		return fmt.Errorf("member: %w", err)
	}
	if strings.HasPrefix(l.Role, UserPrefix) || !nameRe.MatchString(l.Role) {
		return fmt.Errorf("role: %q: want a role name matching %s", l.Role, nameRe)
	}
	if l.Member == l.Role {
		return fmt.Errorf("role: a role cannot inherit itself (%q)", l.Role)
	}
	if err := validTenant(l.Tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	return nil
}

// ParsePolicyText parses policy-file text: one line per rule or link in
// Casbin CSV form, "#" comments and blank lines ignored:
//
//	p, <subject>, <tenant|*>, <resource|*>, <target glob>, <action|*>, <allow|deny>[, "<condition>"]
//	g, <member>, <role>, <tenant|*>
//
// Fields may be double-quoted (needed when a condition contains a comma).
// Every rule and link is validated; errors name the line number and field.
// A "*" resource type or action is expanded into one line per value (see
// Rule.Expand), so stored lines always name one resource type and action.
func ParsePolicyText(text, source string) ([]Rule, []Link, error) {
	var rules []Rule
	var links []Link
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cr := csv.NewReader(strings.NewReader(line))
		cr.TrimLeadingSpace = true
		cr.FieldsPerRecord = -1
		fields, err := cr.Read()
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		for j := range fields {
			fields[j] = strings.TrimSpace(fields[j])
		}
		switch fields[0] {
		case "p":
			v := fields[1:]
			if len(v) == 6 {
				v = append(v, "")
			}
			r, err := RuleFromCasbin(v)
			if err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			if err := r.Validate(); err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			r.Source = source
			rules = append(rules, r.Expand()...)
		case "g":
			l, err := LinkFromCasbin(fields[1:])
			if err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			if err := l.Validate(); err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			l.Source = source
			links = append(links, l)
		default:
			return nil, nil, fmt.Errorf("line %d: line type %q: want p or g", i+1, fields[0])
		}
	}
	return rules, links, nil
}

// ErrInvalidPolicy wraps every validation failure of a policy change.
var ErrInvalidPolicy = errors.New("invalid policy")

// DefaultPolicy is the shipped default policy, imported only into an empty
// store (docs/architecture.md §5): role admin may do everything in every tenant (the
// "*" line expands to one line per resource type and action); role user may
// list and call every tool, list and use every skill and model, and list
// and call every MCP server (the runtime filters servers before tools, so
// without the mcp_server lines a user would see no MCP tool at all), and
// list and read (call) every MCP resource and prompt the front door
// re-exports, and list and call every ACP agent (the roles that may call
// MCP tools, docs/decisions/0150-where-acp-and-workspace-servers-run.md).
const DefaultPolicy = `# Toolplane default policy (source "default").
p, admin, *, *, *, *, allow
p, user, *, tool, *, list, allow
p, user, *, tool, *, call, allow
p, user, *, skill, *, list, allow
p, user, *, skill, *, use, allow
p, user, *, model, *, list, allow
p, user, *, model, *, use, allow
p, user, *, mcp_server, *, list, allow
p, user, *, mcp_server, *, call, allow
p, user, *, resource, *, list, allow
p, user, *, resource, *, call, allow
p, user, *, prompt, *, list, allow
p, user, *, prompt, *, call, allow
p, user, *, acp_agent, *, list, allow
p, user, *, acp_agent, *, call, allow
`

// DefaultRules returns the parsed DefaultPolicy.
func DefaultRules() []Rule {
	rules, _, err := ParsePolicyText(DefaultPolicy, SourceDefault)
	if err != nil {
		panic(err) // the constant is tested
	}
	return rules
}

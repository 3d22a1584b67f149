package authzcasbin

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"
)

// The condition language (the cond field of a policy line).
//
// A condition is a conjunction of clauses joined by "&&"; a clause may be
// negated with a leading "!". Disjunction is expressed with several rules
// (allow rules and deny rules each combine with OR). Clauses:
//
//	subagent                      the call comes from a subagent (CallContext.is_subagent)
//	agent   <op> "<value>"        the agent name of the call context
//	attr.K  <op> "<value>"        principal attribute K (missing = "")
//	input.K <op> "<value>"        call input field K; K may be a dotted path into
//	                              nested objects; strings as is, numbers and
//	                              booleans in their JSON form
//
// Operators: == and != (equality), prefix (plain string prefix), under (path
// containment: the value is cleaned with path.Clean, so "../" cannot escape,
// and must equal the prefix or start with prefix + "/"), glob (doublestar
// glob), matches (RE2 regular expression, unanchored). Values are
// 'single-quoted' (literal, no escapes; the form to use inside a CSV policy
// line) or "double-quoted" with Go escapes.
//
// Examples:
//
//	p, user, *, tool, filesystem_write_file, call, deny, !input.path under '/mnt/user-data'
//	p, user, *, tool, bash, call, deny, input.command matches 'rm\s+-rf'
//	p, user, *, tool, deploy_*, call, allow, attr.team == 'infra' && !subagent
//
// Evaluation is three-valued. Clauses over the principal's attributes, the agent
// and subagent flag are always known. An input clause is unknown when the
// decision has no input (list time: FilterResources) or, at call time, when the
// field is missing or not a scalar. A rule whose condition is unknown applies
// in the direction that the later check covers: at list time an allow applies
// and a deny does not (the call will be checked again with its input); at call
// time a deny applies and an allow does not (fail closed).

// CondInput is what conditions read; it is the ctx value of a Casbin request.
type CondInput struct {
	Attributes map[string]string // principal attributes
	Agent      string            // CallContext.agent ("" when absent or untrusted)
	IsSubagent bool              // CallContext.is_subagent
	Input      map[string]any    // the call's input (JSON object); nil at list time
	CallTime   bool              // true for Authorize (input clauses are decided), false for FilterResources
}

// Tri is a three-valued truth value.
type Tri int8

// Truth values of a condition.
const (
	False Tri = iota
	True
	Unknown
)

type clauseKind int8

const (
	kindSubagent clauseKind = iota
	kindAgent
	kindAttr
	kindInput
)

type clause struct {
	text   string
	neg    bool
	kind   clauseKind
	key    []string // attr key (one element) or input path
	op     string
	value  string
	re     *regexp.Regexp
	prefix string // cleaned prefix for "under"
}

// Condition is a parsed condition.
type Condition struct {
	Text    string
	clauses []clause
}

var condCache sync.Map // string -> *Condition (only valid conditions)

// ParseCondition parses a condition; the error names the clause and the problem.
// Parsed conditions are cached process-wide.
func ParseCondition(text string) (*Condition, error) {
	if c, ok := condCache.Load(text); ok {
		return c.(*Condition), nil
	}
	c, err := parseCondition(text)
	if err != nil {
		return nil, err
	}
	condCache.Store(text, c)
	return c, nil
}

func parseCondition(text string) (*Condition, error) {
	if len(text) > 1024 {
		return nil, fmt.Errorf("longer than 1024 bytes")
	}
	parts, err := splitAnd(text)
	if err != nil {
		return nil, err
	}
	c := &Condition{Text: text}
	for _, p := range parts {
		cl, err := parseClause(p)
		if err != nil {
			return nil, fmt.Errorf("clause %q: %w", p, err)
		}
		c.clauses = append(c.clauses, cl)
	}
	return c, nil
}

// splitAnd splits on && outside double-quoted strings.
func splitAnd(s string) ([]string, error) {
	var parts []string
	var q byte // current quote character, 0 outside quotes
	start := 0
	for i := 0; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case q != 0:
			if s[i] == q {
				q = 0
			}
		case s[i] == '"' || s[i] == '\'':
			q = s[i]
		case s[i] == '&' && i+1 < len(s) && s[i+1] == '&':
			parts = append(parts, strings.TrimSpace(s[start:i]))
			start = i + 2
			i++
		}
	}
	if q != 0 {
		return nil, fmt.Errorf("unterminated string")
	}
	parts = append(parts, strings.TrimSpace(s[start:]))
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("empty clause in %q", s)
		}
	}
	return parts, nil
}

func parseClause(s string) (clause, error) {
	cl := clause{text: s}
	if rest, ok := strings.CutPrefix(s, "!"); ok {
		cl.neg = true
		s = strings.TrimSpace(rest)
	}
	if s == "subagent" {
		cl.kind = kindSubagent
		return cl, nil
	}
	sp := strings.IndexAny(s, " \t")
	if sp < 0 {
		return cl, fmt.Errorf(`want "subagent" or <operand> <op> "<value>"`)
	}
	operand := s[:sp]
	rest := strings.TrimSpace(s[sp:])
	sp = strings.IndexAny(rest, " \t")
	if sp < 0 {
		return cl, fmt.Errorf(`want <operand> <op> "<value>"`)
	}
	cl.op = rest[:sp]
	lit := strings.TrimSpace(rest[sp:])
	v, err := unquote(lit)
	if err != nil {
		return cl, fmt.Errorf("value %s: %w", lit, err)
	}
	cl.value = v
	switch {
	case operand == "agent":
		cl.kind = kindAgent
	case strings.HasPrefix(operand, "attr."):
		cl.kind = kindAttr
		k := strings.TrimPrefix(operand, "attr.")
		if k == "" {
			return cl, fmt.Errorf("attr: empty attribute name")
		}
		cl.key = []string{k}
	case strings.HasPrefix(operand, "input."):
		cl.kind = kindInput
		cl.key = strings.Split(strings.TrimPrefix(operand, "input."), ".")
		for _, k := range cl.key {
			if k == "" {
				return cl, fmt.Errorf("input: empty field name in %q", operand)
			}
		}
	default:
		return cl, fmt.Errorf("operand %q: want subagent, agent, attr.<key> or input.<path>", operand)
	}
	switch cl.op {
	case "==", "!=", "prefix":
	case "under":
		if !strings.HasPrefix(v, "/") {
			return cl, fmt.Errorf("under: prefix %q must be an absolute path", v)
		}
		cl.prefix = path.Clean(v)
	case "glob":
		if !doublestar.ValidatePattern(v) {
			return cl, fmt.Errorf("glob: invalid pattern %q", v)
		}
	case "matches":
		re, err := regexp.Compile(v)
		if err != nil {
			return cl, fmt.Errorf("matches: %w", err)
		}
		cl.re = re
	default:
		return cl, fmt.Errorf("operator %q: want ==, !=, prefix, under, glob or matches", cl.op)
	}
	return cl, nil
}

// Eval evaluates the condition; detail names the clause that decided a False
// or Unknown result (empty for True).
func (c *Condition) Eval(in *CondInput) (Tri, string) {
	result, detail := True, ""
	for i := range c.clauses {
		v, why := c.clauses[i].eval(in)
		switch v {
		case False:
			return False, why
		case Unknown:
			if result == True {
				result, detail = Unknown, why
			}
		}
	}
	return result, detail
}

func (cl *clause) eval(in *CondInput) (Tri, string) {
	var got string
	switch cl.kind {
	case kindSubagent:
		v := in != nil && in.IsSubagent
		if v != cl.neg {
			return True, ""
		}
		return False, fmt.Sprintf("%q does not hold (is_subagent=%t)", cl.text, v)
	case kindAgent:
		if in != nil {
			got = in.Agent
		}
	case kindAttr:
		if in != nil {
			got = in.Attributes[cl.key[0]]
		}
	case kindInput:
		if in == nil || in.Input == nil {
			return Unknown, fmt.Sprintf("%q needs the call input", cl.text)
		}
		s, ok := lookupScalar(in.Input, cl.key)
		if !ok {
			return Unknown, fmt.Sprintf("%q: input.%s is missing or not a scalar", cl.text, strings.Join(cl.key, "."))
		}
		got = s
	}
	var ok bool
	switch cl.op {
	case "==":
		ok = got == cl.value
	case "!=":
		ok = got != cl.value
	case "prefix":
		ok = strings.HasPrefix(got, cl.value)
	case "under":
		p := path.Clean(got)
		ok = strings.HasPrefix(got, "/") && (p == cl.prefix || strings.HasPrefix(p, strings.TrimSuffix(cl.prefix, "/")+"/"))
	case "glob":
		ok, _ = doublestar.Match(cl.value, got)
	case "matches":
		ok = cl.re.MatchString(got)
	}
	if ok != cl.neg {
		return True, ""
	}
	return False, fmt.Sprintf("%q does not hold (value %q)", cl.text, truncate(got, 120))
}

// unquote reads a 'single-quoted' (literal, no escapes) or "double-quoted"
// (Go escapes) string.
func unquote(lit string) (string, error) {
	if len(lit) >= 2 && lit[0] == '\'' && lit[len(lit)-1] == '\'' && !strings.Contains(lit[1:len(lit)-1], "'") {
		return lit[1 : len(lit)-1], nil
	}
	if strings.HasPrefix(lit, `"`) {
		if v, err := strconv.Unquote(lit); err == nil {
			return v, nil
		}
	}
	return "", fmt.Errorf("want a 'single-quoted' or \"double-quoted\" string")
}

func lookupScalar(m map[string]any, keys []string) (string, bool) {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		cur, ok = mm[k]
		if !ok {
			return "", false
		}
	}
	switch v := cur.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	}
	return "", false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ruleApplies reports whether a rule with the given effect and condition
// applies to the input (see the three-valued semantics above), with the
// condition verdict and its detail.
func ruleApplies(cond *Condition, effect string, in *CondInput) (applies bool, v Tri, detail string) {
	if cond == nil {
		return true, True, ""
	}
	v, detail = cond.Eval(in)
	switch v {
	case True:
		return true, v, detail
	case Unknown:
		callTime := in != nil && in.CallTime
		if effect == EffectDeny {
			return callTime, v, detail
		}
		return !callTime, v, detail
	}
	return false, v, detail
}

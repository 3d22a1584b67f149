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
// A condition is a REQUIREMENT on the call: an allow line applies only when
// its condition holds; a deny line applies when its condition fails ("deny
// unless ..."). This is the same reading as the API's structured conditions
// (authz.proto Condition: "a failed condition makes the line not apply (for
// allow) or apply (for deny)"), and the failing clause is named in the
// decision's reasons with code authz.condition_failed.
//
// Grammar:
//
//	expr    := and { "||" and }
//	and     := unary { "&&" unary }
//	unary   := "!" unary | "(" expr ")" | clause
//	clause  := "subagent" | operand op value
//	operand := "agent" | "server" | "attr." KEY | "annotation." KEY | "input." KEY { "." KEY }
//	op      := "==" | "!=" | "in" | "prefix" | "under" | "glob" | "matches"
//	value   := string | "[" string { "," string } "]"
//	string  := 'single-quoted' (literal, no escapes; use it inside CSV lines)
//	         | "double-quoted" (Go escapes)
//
// Operands: subagent is CallContext.is_subagent; agent is CallContext.agent;
// attr.K is principal attribute K ("" when missing); server is the MCP server
// of the resource (ResourceAttributes.server, "" for built-in tools or when
// not given by a service credential); annotation.K is MCP tool annotation K
// (booleans as "true"/"false"; the four hints readOnlyHint, destructiveHint,
// idempotentHint and openWorldHint take the configured default when the
// tool does not set them, see ResolveAnnotations; other keys "" when
// missing); input.K is call input
// field K (a dotted path descends into nested objects; strings as is, numbers
// and booleans in JSON form). Operators compare against one value or, with a
// list, against any of them (!= : against none of them): == / in (equality),
// prefix (plain string prefix), under (path containment: the value is cleaned
// with path.Clean, so "../" cannot escape, must be absolute and equal the
// prefix or start with prefix + "/"), glob (doublestar), matches (RE2,
// unanchored).
//
// Examples (policy-file form):
//
//	p, user, *, tool, filesystem_write_file, call, deny, input.path under '/mnt/user-data'
//	p, user, *, tool, bash, call, deny, !input.command matches 'rm\s+-rf'
//	p, ops, *, tool, deploy_*, call, allow, attr.team in ['infra', 'sre'] && !subagent
//	p, viewer, *, tool, *, call, allow, annotation.readOnlyHint == 'true'
//	p, viewer, *, tool, *, *, deny, server != 'github' || annotation.readOnlyHint == 'true'
//
// Evaluation is three-valued (Kleene). Clauses over attributes, the agent and
// the subagent flag are always known. An input clause is unknown when the
// decision has no input (list time: FilterResources) or, at call time, when the
// field is missing or not a scalar. An unknown condition is resolved in the
// direction the later check covers: at list time an allow line applies and a
// deny line does not (the call is checked again with its input); at call time
// a deny line applies and an allow line does not (fail closed).

// CondInput is what conditions read; it is the ctx value of a Casbin request.
type CondInput struct {
	Attributes map[string]string // principal attributes
	Agent      string            // CallContext.agent ("" when absent or untrusted)
	IsSubagent bool              // CallContext.is_subagent
	Input      map[string]any    // the call's input (JSON object); nil at list time
	CallTime   bool              // true for Authorize (input clauses are decided), false for FilterResources
	// Server is the resource's MCP server (ResourceAttributes.server), "" when
	// absent or not given by a service credential.
	Server string
	// Annotations are the resource's MCP annotations in string form with the
	// defaults applied (ResolveAnnotations); nil means DefaultAnnotations.
	Annotations map[string]string
}

// The MCP tool annotation hints (MCP specification, Tool annotations).
const (
	HintReadOnly    = "readOnlyHint"
	HintDestructive = "destructiveHint"
	HintIdempotent  = "idempotentHint"
	HintOpenWorld   = "openWorldHint"
)

// Hints lists the annotation hints that always have a value (the tool's or
// the configured default).
var Hints = []string{HintReadOnly, HintDestructive, HintIdempotent, HintOpenWorld}

// DefaultAnnotations are the values an unannotated tool matches: the MCP
// specification's defaults (a tool is assumed to change state, possibly
// destructively, not idempotently, and to reach an open world). They are
// the default of authz.annotation_defaults.
var DefaultAnnotations = map[string]bool{HintReadOnly: false, HintDestructive: true, HintIdempotent: false, HintOpenWorld: true}

// ResolveAnnotations turns a tool's MCP annotations (JSON object, may be
// nil) into the string form conditions read: booleans as "true"/"false",
// strings as is, numbers in JSON form; other values are dropped. Each hint
// the tool does not set as a boolean takes its value from defaults (missing
// there: DefaultAnnotations), so a non-boolean hint can never satisfy a
// condition the tool's author did not declare.
func ResolveAnnotations(raw map[string]any, defaults map[string]bool) map[string]string {
	out := make(map[string]string, len(raw)+len(Hints))
	for k, v := range raw {
		switch x := v.(type) {
		case bool:
			out[k] = strconv.FormatBool(x)
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'g', -1, 64)
		}
	}
	for _, h := range Hints {
		if _, ok := raw[h].(bool); ok {
			continue
		}
		d, ok := defaults[h]
		if !ok {
			d = DefaultAnnotations[h]
		}
		out[h] = strconv.FormatBool(d)
	}
	return out
}

var defaultResolved = ResolveAnnotations(nil, nil)

// Tri is a three-valued truth value.
type Tri int8

// Truth values of a condition.
const (
	False Tri = iota
	True
	Unknown
)

// Condition is a parsed condition.
type Condition struct {
	Text string
	root node
}

type node interface {
	// eval returns the truth value and, for False or Unknown, a detail that
	// names the deciding clause.
	eval(in *CondInput) (Tri, string)
}

var condCache sync.Map // string -> *Condition (only valid conditions)

// ParseCondition parses a condition; the error names the position and the
// problem. Parsed conditions are cached process-wide.
func ParseCondition(text string) (*Condition, error) {
	if c, ok := condCache.Load(text); ok {
		return c.(*Condition), nil
	}
	if len(text) > 2048 {
		return nil, fmt.Errorf("longer than 2048 bytes")
	}
	toks, err := tokenize(text)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	root, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q at offset %d", p.toks[p.pos].text, p.toks[p.pos].off)
	}
	c := &Condition{Text: text, root: root}
	condCache.Store(text, c)
	return c, nil
}

// Eval evaluates the condition; detail names the clause that decided a False
// or Unknown result.
func (c *Condition) Eval(in *CondInput) (Tri, string) { return c.root.eval(in) }

// --- tokens

type tokKind int8

const (
	tWord tokKind = iota
	tString
	tSym
)

type token struct {
	kind tokKind
	text string // word, symbol, or the unquoted string
	off  int
}

func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			toks = append(toks, token{tString, s[i+1 : i+1+j], i})
			i += j + 2
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			v, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return nil, fmt.Errorf("string at offset %d: %v", i, err)
			}
			toks = append(toks, token{tString, v, i})
			i = j + 1
		case strings.HasPrefix(s[i:], "&&") || strings.HasPrefix(s[i:], "||") || strings.HasPrefix(s[i:], "==") || strings.HasPrefix(s[i:], "!="):
			toks = append(toks, token{tSym, s[i : i+2], i})
			i += 2
		case strings.IndexByte("!()[],", c) >= 0:
			toks = append(toks, token{tSym, s[i : i+1], i})
			i++
		case isWordByte(c):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			toks = append(toks, token{tWord, s[i:j], i})
			i = j
		default:
			return nil, fmt.Errorf("unexpected character %q at offset %d", c, i)
		}
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("empty condition")
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// --- parser

type parser struct {
	toks  []token
	pos   int
	depth int
}

func (p *parser) peek(sym string) bool {
	return p.pos < len(p.toks) && p.toks[p.pos].kind == tSym && p.toks[p.pos].text == sym
}

func (p *parser) expr() (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > 32 {
		return nil, fmt.Errorf("nested deeper than 32 levels")
	}
	first, err := p.and()
	if err != nil {
		return nil, err
	}
	kids := []node{first}
	for p.peek("||") {
		p.pos++
		n, err := p.and()
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return first, nil
	}
	return orNode(kids), nil
}

func (p *parser) and() (node, error) {
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	kids := []node{first}
	for p.peek("&&") {
		p.pos++
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return first, nil
	}
	return andNode(kids), nil
}

func (p *parser) unary() (node, error) {
	if p.pos >= len(p.toks) {
		return nil, fmt.Errorf("unexpected end of condition")
	}
	start := p.toks[p.pos].off
	switch {
	case p.peek("!"):
		p.pos++
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &notNode{inner: n, text: p.textFrom(start)}, nil
	case p.peek("("):
		p.pos++
		n, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.peek(")") {
			return nil, fmt.Errorf("missing ) for ( at offset %d", start)
		}
		p.pos++
		return n, nil
	}
	return p.clause()
}

// textFrom reconstructs the source text of tokens from offset start to the
// current position (for messages).
func (p *parser) textFrom(start int) string {
	var parts []string
	for _, t := range p.toks {
		if t.off >= start && (p.pos >= len(p.toks) || t.off < p.toks[p.pos].off) {
			if t.kind == tString {
				parts = append(parts, strconv.Quote(t.text))
			} else {
				parts = append(parts, t.text)
			}
		}
	}
	return strings.ReplaceAll(strings.Join(parts, " "), "! ", "!")
}

func (p *parser) clause() (node, error) {
	t := p.toks[p.pos]
	if t.kind != tWord {
		return nil, fmt.Errorf("unexpected %q at offset %d: want a clause", t.text, t.off)
	}
	p.pos++
	cl := &leaf{}
	switch {
	case t.text == "subagent":
		cl.kind = kindSubagent
		cl.text = "subagent"
		return cl, nil
	case t.text == "agent":
		cl.kind = kindAgent
	case t.text == "server":
		cl.kind = kindServer
	case strings.HasPrefix(t.text, "annotation."):
		cl.kind = kindAnnotation
		cl.key = []string{strings.TrimPrefix(t.text, "annotation.")}
		if cl.key[0] == "" || strings.Contains(cl.key[0], ".") {
			return nil, fmt.Errorf("offset %d: want annotation.<key> with a non-empty key without dots", t.off)
		}
	case strings.HasPrefix(t.text, "attr."):
		cl.kind = kindAttr
		cl.key = []string{strings.TrimPrefix(t.text, "attr.")}
		if cl.key[0] == "" {
			return nil, fmt.Errorf("offset %d: empty attribute name", t.off)
		}
	case strings.HasPrefix(t.text, "input."):
		cl.kind = kindInput
		cl.key = strings.Split(strings.TrimPrefix(t.text, "input."), ".")
		for _, k := range cl.key {
			if k == "" {
				return nil, fmt.Errorf("offset %d: empty field name in %q", t.off, t.text)
			}
		}
	default:
		return nil, fmt.Errorf("operand %q at offset %d: want subagent, agent, server, attr.<key>, annotation.<key> or input.<path>", t.text, t.off)
	}
	if p.pos >= len(p.toks) {
		return nil, fmt.Errorf("%s: missing operator", t.text)
	}
	op := p.toks[p.pos]
	p.pos++
	cl.op = op.text
	switch cl.op {
	case "==", "!=", "in", "prefix", "under", "glob", "matches":
	default:
		return nil, fmt.Errorf("operator %q at offset %d: want ==, !=, in, prefix, under, glob or matches", op.text, op.off)
	}
	// value or list
	if p.peek("[") {
		p.pos++
		for {
			if p.pos >= len(p.toks) || p.toks[p.pos].kind != tString {
				return nil, fmt.Errorf("%s %s: want a list of strings", t.text, cl.op)
			}
			cl.values = append(cl.values, p.toks[p.pos].text)
			p.pos++
			if p.peek(",") {
				p.pos++
				continue
			}
			if p.peek("]") {
				p.pos++
				break
			}
			return nil, fmt.Errorf("%s %s: missing ] in list", t.text, cl.op)
		}
	} else {
		if p.pos >= len(p.toks) || p.toks[p.pos].kind != tString {
			return nil, fmt.Errorf("%s %s: want a quoted string or a list", t.text, cl.op)
		}
		cl.values = []string{p.toks[p.pos].text}
		p.pos++
	}
	for _, v := range cl.values {
		switch cl.op {
		case "under":
			if !strings.HasPrefix(v, "/") {
				return nil, fmt.Errorf("under: prefix %q must be an absolute path", v)
			}
			cl.prefixes = append(cl.prefixes, path.Clean(v))
		case "glob":
			if !doublestar.ValidatePattern(v) {
				return nil, fmt.Errorf("glob: invalid pattern %q", v)
			}
		case "matches":
			re, err := regexp.Compile(v)
			if err != nil {
				return nil, fmt.Errorf("matches: %w", err)
			}
			cl.res = append(cl.res, re)
		}
	}
	cl.text = p.textFrom(t.off)
	return cl, nil
}

// --- evaluation

type andNode []node

func (a andNode) eval(in *CondInput) (Tri, string) {
	res, detail := True, ""
	for _, n := range a {
		v, d := n.eval(in)
		if v == False {
			return False, d
		}
		if v == Unknown && res == True {
			res, detail = Unknown, d
		}
	}
	return res, detail
}

type orNode []node

func (o orNode) eval(in *CondInput) (Tri, string) {
	res := False
	var details []string
	for _, n := range o {
		v, d := n.eval(in)
		if v == True {
			return True, ""
		}
		if v == Unknown {
			res = Unknown
		}
		details = append(details, d)
	}
	return res, strings.Join(details, "; and ")
}

type notNode struct {
	inner node
	text  string
}

func (n *notNode) eval(in *CondInput) (Tri, string) {
	v, d := n.inner.eval(in)
	switch v {
	case True:
		return False, fmt.Sprintf("%q does not hold", n.text)
	case False:
		return True, ""
	}
	return Unknown, d
}

type clauseKind int8

const (
	kindSubagent clauseKind = iota
	kindAgent
	kindAttr
	kindInput
	kindServer
	kindAnnotation
)

type leaf struct {
	text     string
	kind     clauseKind
	key      []string
	op       string
	values   []string
	res      []*regexp.Regexp
	prefixes []string
}

func (cl *leaf) eval(in *CondInput) (Tri, string) {
	var got string
	switch cl.kind {
	case kindSubagent:
		if in != nil && in.IsSubagent {
			return True, ""
		}
		return False, fmt.Sprintf("%q does not hold (is_subagent=false)", cl.text)
	case kindAgent:
		if in != nil {
			got = in.Agent
		}
	case kindAttr:
		if in != nil {
			got = in.Attributes[cl.key[0]]
		}
	case kindServer:
		if in != nil {
			got = in.Server
		}
	case kindAnnotation:
		ann := defaultResolved
		if in != nil && in.Annotations != nil {
			ann = in.Annotations
		}
		got = ann[cl.key[0]]
	case kindInput:
		if in == nil || in.Input == nil {
			return Unknown, fmt.Sprintf("%q needs the call input", cl.text)
		}
		s, ok := lookupScalar(in.Input, cl.key)
		if !ok {
			return Unknown, fmt.Sprintf("%q cannot be decided: input.%s is missing or not a scalar", cl.text, strings.Join(cl.key, "."))
		}
		got = s
	}
	hit := false
	for i, v := range cl.values {
		switch cl.op {
		case "==", "in", "!=":
			hit = got == v
		case "prefix":
			hit = strings.HasPrefix(got, v)
		case "under":
			p := path.Clean(got)
			pre := cl.prefixes[i]
			hit = strings.HasPrefix(got, "/") && (p == pre || strings.HasPrefix(p, strings.TrimSuffix(pre, "/")+"/"))
		case "glob":
			hit, _ = doublestar.Match(v, got)
		case "matches":
			hit = cl.res[i].MatchString(got)
		}
		if hit {
			break
		}
	}
	if hit != (cl.op == "!=") {
		return True, ""
	}
	return False, fmt.Sprintf("%q does not hold (value %q)", cl.text, truncate(got, 120))
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

// ruleApplies reports whether a line with the given effect and condition
// applies to the input (requirement semantics, see above), with the condition
// verdict and the detail naming the deciding clause.
func ruleApplies(cond *Condition, effect string, in *CondInput) (applies bool, v Tri, detail string) {
	if cond == nil {
		return true, True, ""
	}
	v, detail = cond.Eval(in)
	callTime := in != nil && in.CallTime
	switch {
	case effect == EffectDeny && v == False:
		return true, v, detail
	case effect == EffectDeny && v == Unknown:
		return callTime, v, detail
	case effect == EffectDeny:
		return false, v, detail
	case v == True:
		return true, v, detail
	case v == Unknown:
		return !callTime, v, detail
	}
	return false, v, detail
}

package authzcasbin

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"
	"github.com/casbin/casbin/v2/util"
)

// DefaultModel is the embedded, documented Casbin model (model.conf).
//
//go:embed model.conf
var DefaultModel string

// condMatcherCall is the condition clause of the default matcher; the oracle
// swaps it to find allow rules blocked only by their condition.
const condMatcherCall = "cond(p.cond, p.eft, r.ctx)"

// NewCasbinEnforcer builds a plain Casbin enforcer over a policy set with the
// given model text: the cond() function of the condition language is
// registered and role-link domains use keyMatch, so links in domain "*" apply
// in every tenant. The enforcer is never mutated after it is returned.
func NewCasbinEnforcer(modelText string, set PolicySet) (*casbin.Enforcer, error) {
	m, err := model.NewModelFromString(modelText)
	if err != nil {
		return nil, fmt.Errorf("casbin model: %w", err)
	}
	e, err := casbin.NewEnforcer(m, &setAdapter{set: set})
	if err != nil {
		return nil, fmt.Errorf("casbin enforcer: %w", err)
	}
	e.EnableLog(false)
	e.AddFunction("cond", condFunction)
	e.AddFunction("condBlocked", condBlockedFunction)
	e.AddFunction("targetMatch", targetMatchFunction)
	e.AddNamedDomainMatchingFunc("g", "keyMatch", util.KeyMatch)
	if err := e.BuildRoleLinks(); err != nil {
		return nil, fmt.Errorf("casbin role links: %w", err)
	}
	return e, nil
}

// condFunction implements cond(p.cond, p.eft, r.ctx) for the matcher.
func condFunction(args ...any) (any, error) {
	cond, eft, in, err := condArgs(args)
	if err != nil || cond == "" {
		return err == nil, err
	}
	c, err := ParseCondition(cond)
	if err != nil {
		return false, err
	}
	ok, _, _ := ruleApplies(c, eft, in)
	return ok, nil
}

// targetMatchFunction is targetMatch(name, pattern) of the model: MatchTarget,
// Casbin's globMatch plus the case-insensitive "(?i)" form. (Casbin's
// function map cannot replace a built-in, hence the own name; a custom model
// that keeps globMatch has no case-insensitive form.)
func targetMatchFunction(args ...any) (any, error) {
	if len(args) != 2 {
		return false, fmt.Errorf("targetMatch: want 2 arguments, got %d", len(args))
	}
	name, ok1 := args[0].(string)
	pattern, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return false, errors.New("targetMatch: want (string, string)")
	}
	return MatchTarget(pattern, name), nil
}

// condBlockedFunction is true for an allow rule that does not apply only
// because of its condition.
func condBlockedFunction(args ...any) (any, error) {
	cond, eft, in, err := condArgs(args)
	if err != nil || cond == "" || eft != EffectAllow {
		return false, err
	}
	c, err := ParseCondition(cond)
	if err != nil {
		return false, err
	}
	ok, _, _ := ruleApplies(c, eft, in)
	return !ok, nil
}

func condArgs(args []any) (string, string, *CondInput, error) {
	if len(args) != 3 {
		return "", "", nil, fmt.Errorf("cond: want 3 arguments, got %d", len(args))
	}
	cond, ok1 := args[0].(string)
	eft, ok2 := args[1].(string)
	in, ok3 := args[2].(*CondInput)
	if !ok1 || !ok2 || !ok3 {
		return "", "", nil, errors.New("cond: want (string, string, *CondInput)")
	}
	return cond, eft, in, nil
}

// setAdapter loads a PolicySet into a Casbin model (read-only).
type setAdapter struct{ set PolicySet }

var errReadOnly = errors.New("authzcasbin: snapshot adapter is read-only")

func (a *setAdapter) LoadPolicy(m model.Model) error { return LoadSetIntoModel(a.set, m) }
func (a *setAdapter) SavePolicy(model.Model) error   { return errReadOnly }
func (a *setAdapter) AddPolicy(string, string, []string) error {
	return errReadOnly
}
func (a *setAdapter) RemovePolicy(string, string, []string) error { return errReadOnly }
func (a *setAdapter) RemoveFilteredPolicy(string, string, int, ...string) error {
	return errReadOnly
}

// LoadSetIntoModel adds every rule ("p") and link ("g") of the set to a Casbin
// model, in order; Casbin skips exact duplicates.
func LoadSetIntoModel(set PolicySet, m model.Model) error {
	for _, r := range set.Rules {
		if err := persist.LoadPolicyArray(append([]string{"p"}, r.CasbinRule()...), m); err != nil {
			return err
		}
	}
	for _, l := range set.Links {
		if err := persist.LoadPolicyArray(append([]string{"g"}, l.CasbinRule()...), m); err != nil {
			return err
		}
	}
	return nil
}

// casbinDecider answers with plain Casbin Enforce: one EnforceEx per subject
// of the principal, combined with deny-override (the lowest-ordinal deny over
// all subjects wins, else the lowest-ordinal allow). It is the oracle of the
// indexed path and the only path for a custom model.
type casbinDecider struct {
	e *casbin.Enforcer
	// mu guards the role managers: Casbin builds a temporary role manager,
	// copying every matching link, on each g() call for a domain it has not
	// stored, which costs seconds per decision on large policies. A tenant's
	// role manager is therefore stored once (warm, under the write lock:
	// Casbin publishes a new role manager before filling it), and decisions
	// hold the read lock.
	mu       sync.RWMutex
	warm     map[string]bool
	ordinal  map[string]int // rule ID -> position in the set
	rules    []Rule
	matcher  string // default model: matcher with condBlocked instead of cond; "" for custom models
	modelTxt string
}

func newCasbinDecider(modelText string, set PolicySet, custom bool) (*casbinDecider, error) {
	e, err := NewCasbinEnforcer(modelText, set)
	if err != nil {
		return nil, err
	}
	d := &casbinDecider{e: e, ordinal: make(map[string]int, len(set.Rules)), rules: set.Rules, modelTxt: modelText, warm: map[string]bool{}}
	for i, r := range set.Rules {
		if _, dup := d.ordinal[r.ID()]; !dup {
			d.ordinal[r.ID()] = i
		}
	}
	if !custom {
		m := e.GetModel()["m"]["m"].Value
		if strings.Contains(m, strings.ReplaceAll(condMatcherCall, ".", "_")) {
			d.matcher = strings.Replace(m, strings.ReplaceAll(condMatcherCall, ".", "_"), "condBlocked(p_cond, p_eft, r_ctx)", 1)
		}
	}
	return d, nil
}

// warmTenant stores the tenant's role manager in the enforcer's domain
// manager. DeleteLink of a link that does not exist creates and stores the
// domain's role manager (copying the links of matching domains, as the
// temporary one would) and changes no link.
func (d *casbinDecider) warmTenant(tenant string) {
	d.mu.RLock()
	ok := d.warm[tenant]
	d.mu.RUnlock()
	if ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.warm[tenant] || len(d.warm) >= maxWarmTenants {
		return
	}
	if rm := d.e.GetRoleManager(); rm != nil {
		_ = rm.DeleteLink("\x00warm", "\x00warm", tenant)
	}
	d.warm[tenant] = true
}

// maxWarmTenants bounds the stored role managers per snapshot; further
// tenants use Casbin's temporary role managers (slow, same answers).
const maxWarmTenants = 10000

func (d *casbinDecider) decide(tenant string, subjects []string, req *Request, version int64) Decision {
	d.warmTenant(tenant)
	d.mu.RLock()
	defer d.mu.RUnlock()
	denyOrd, allowOrd := -1, -1
	var denyRule, allowRule Rule
	for _, sub := range subjects {
		ok, explain, err := d.e.EnforceEx(sub, tenant, req.Resource, req.Target, req.Action, &req.Cond)
		if err != nil {
			return deny(CodeEvaluatorError, "casbin enforce: "+err.Error(), version)
		}
		if len(explain) == 0 {
			continue
		}
		r, err := RuleFromCasbin(explain)
		if err != nil {
			return deny(CodeEvaluatorError, err.Error(), version)
		}
		ord, known := d.ordinal[r.ID()]
		if !known {
			ord = len(d.rules)
		}
		if !ok {
			if denyOrd < 0 || ord < denyOrd {
				denyOrd, denyRule = ord, r
			}
		} else if allowOrd < 0 || ord < allowOrd {
			allowOrd, allowRule = ord, r
		}
	}
	switch {
	case denyOrd >= 0:
		return denyDecision(denyRule, &req.Cond, version)
	case allowOrd >= 0:
		return allowDecision(allowRule, version)
	}
	if d.matcher != "" {
		blockedOrd := -1
		var blocked Rule
		for _, sub := range subjects {
			ok, explain, err := d.e.EnforceExWithMatcher(d.matcher, sub, tenant, req.Resource, req.Target, req.Action, &req.Cond)
			if err != nil {
				return deny(CodeEvaluatorError, "casbin enforce: "+err.Error(), version)
			}
			if !ok || len(explain) == 0 {
				continue
			}
			r, _ := RuleFromCasbin(explain)
			if ord, known := d.ordinal[r.ID()]; known && (blockedOrd < 0 || ord < blockedOrd) {
				blockedOrd, blocked = ord, r
			}
		}
		if blockedOrd >= 0 {
			return blockedDecision(blocked, &req.Cond, version)
		}
	}
	return noPolicyDecision(tenant, subjects, req, version)
}

func allowDecision(r Rule, version int64) Decision {
	id := r.ID()
	return Decision{Allow: true, PolicyID: id, PolicyVersion: version,
		Reasons: []Reason{{Code: CodeAllowed, Message: fmt.Sprintf("allowed by rule %s (%s)", id, r.String())}}}
}

func denyDecision(r Rule, in *CondInput, version int64) Decision {
	if r.Condition == "" {
		return Decision{PolicyID: r.ID(), PolicyVersion: version,
			Reasons: []Reason{{Code: CodeDenied, Message: fmt.Sprintf("denied by rule %s (%s)", r.ID(), r.String())}}}
	}
	detail := ""
	if c, err := ParseCondition(r.Condition); err == nil {
		_, detail = c.Eval(in)
	}
	msg := fmt.Sprintf("denied by rule %s: condition %q failed: %s", r.ID(), r.Condition, detail)
	return Decision{PolicyID: r.ID(), PolicyVersion: version, Reasons: []Reason{{Code: CodeConditionFailed, Message: msg}}}
}

func blockedDecision(r Rule, in *CondInput, version int64) Decision {
	detail := ""
	if c, err := ParseCondition(r.Condition); err == nil {
		_, detail = c.Eval(in)
	}
	return Decision{PolicyID: r.ID(), PolicyVersion: version, Reasons: []Reason{{Code: CodeConditionFailed,
		Message: fmt.Sprintf("allow rule %s requires condition %q: %s", r.ID(), r.Condition, detail)}}}
}

func noPolicyDecision(tenant string, subjects []string, req *Request, version int64) Decision {
	return deny(CodeNoPolicy, fmt.Sprintf("no rule allows %s %s %q for %s in tenant %q",
		req.Action, req.Resource, req.Target, strings.Join(subjects, ", "), tenant), version)
}

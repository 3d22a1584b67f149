package authzcasbin

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casbin/casbin/v2/model"
)

// Engine decides over the current policy snapshot. A reload builds the new
// snapshot (validation, index, and for a custom model the Casbin enforcer)
// aside and swaps one pointer, so a decision sees either the old or the new
// policy, never a half-loaded one, and reports the version it used. Decisions
// take no lock. Every failure denies (fail closed).
type Engine struct {
	modelText string
	custom    bool

	loadMu  sync.Mutex // serialises Load/Fail
	cur     atomic.Pointer[snapshot]
	changed atomic.Pointer[chan struct{}]
}

type snapshot struct {
	version int64
	at      time.Time // when the snapshot was swapped in
	set     PolicySet
	known   map[string]bool // subjects that appear in a rule or a link
	ix      *index          // nil for a custom model
	failed  error           // set: every decision is a store_error deny

	oracleOnce sync.Once
	oracle     *casbinDecider
	oracleErr  error
}

// NewEngine returns an engine for the model text ("" = DefaultModel). A custom
// model must keep the request tokens (sub, dom, rtype, obj, act, ctx) and
// policy tokens (sub, dom, rtype, obj, act, eft, cond) of the default model; it
// is evaluated by plain Casbin Enforce only. Until Load succeeds, every
// decision is denied with authz.store_error.
func NewEngine(modelText string) (*Engine, error) {
	e := &Engine{modelText: modelText}
	if modelText == "" || modelText == DefaultModel {
		e.modelText = DefaultModel
	} else {
		e.custom = true
	}
	m, err := model.NewModelFromString(e.modelText)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := checkTokens(m, "r", []string{"r_sub", "r_dom", "r_rtype", "r_obj", "r_act", "r_ctx"}); err != nil {
		return nil, err
	}
	if err := checkTokens(m, "p", []string{"p_sub", "p_dom", "p_rtype", "p_obj", "p_act", "p_eft", "p_cond"}); err != nil {
		return nil, err
	}
	if _, ok := m["g"]["g"]; !ok {
		return nil, errors.New("model: role_definition g = _, _, _ is required")
	}
	ch := make(chan struct{})
	e.changed.Store(&ch)
	return e, nil
}

func checkTokens(m model.Model, sec string, want []string) error {
	a, ok := m[sec][sec]
	if !ok || !slices.Equal(a.Tokens, want) {
		var got []string
		if ok {
			got = a.Tokens
		}
		return fmt.Errorf("model: %s tokens are %v, want %v", sec, got, want)
	}
	return nil
}

// Custom reports whether the engine runs a custom model (plain Casbin path).
func (e *Engine) Custom() bool { return e.custom }

// Load validates the set, builds a snapshot aside and swaps it in. On error
// the current snapshot stays.
func (e *Engine) Load(set PolicySet) error {
	s := &snapshot{version: set.Version, set: set, known: make(map[string]bool)}
	for i, r := range set.Rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%w: rule %d (%s): %v", ErrInvalidPolicy, i, r.String(), err)
		}
		s.known[r.Subject] = true
	}
	for i, l := range set.Links {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("%w: link %d (%s): %v", ErrInvalidPolicy, i, l.String(), err)
		}
		s.known[l.Member], s.known[l.Role] = true, true
	}
	if e.custom {
		d, err := newCasbinDecider(e.modelText, set, true)
		if err != nil {
			return err
		}
		s.oracleOnce.Do(func() { s.oracle = d })
	} else {
		ix, err := newIndex(set)
		if err != nil {
			return err
		}
		s.ix = ix
	}
	e.swap(s)
	return nil
}

// Fail installs a snapshot that denies every decision with authz.store_error
// naming err; used when the store cannot be read after it changed.
func (e *Engine) Fail(err error) {
	var v int64
	if cur := e.cur.Load(); cur != nil {
		v = cur.version
	}
	e.swap(&snapshot{version: v, failed: err})
}

func (e *Engine) swap(s *snapshot) {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	s.at = time.Now()
	e.cur.Store(s)
	ch := make(chan struct{})
	old := e.changed.Swap(&ch)
	close(*old)
}

// Version is the policy version of the current snapshot (0 before the first load).
func (e *Engine) Version() int64 {
	if s := e.cur.Load(); s != nil {
		return s.version
	}
	return 0
}

// Current returns the policy version of the current snapshot and when it was
// swapped in (zero time before the first load).
func (e *Engine) Current() (int64, time.Time) {
	if s := e.cur.Load(); s != nil {
		return s.version, s.at
	}
	return 0, time.Time{}
}

// Changed returns a channel closed at the next snapshot swap (a reload or a
// failure); read Version afterwards. Used by WatchPolicy.
func (e *Engine) Changed() <-chan struct{} { return *e.changed.Load() }

// Policy returns the policy set of the current snapshot.
func (e *Engine) Policy() PolicySet {
	if s := e.cur.Load(); s != nil {
		return s.set
	}
	return PolicySet{}
}

// Decide answers the request on the current snapshot with the indexed path
// (or plain Casbin for a custom model). It never panics and never allows on
// an error.
func (e *Engine) Decide(req *Request) Decision {
	return e.decide(req, pathIndexed)
}

// DecideUncached is Decide without the decision cache (the index and role
// closures only); for benchmarks and tests.
func (e *Engine) DecideUncached(req *Request) Decision {
	return e.decide(req, pathUncached)
}

type decisionPath int8

const (
	pathIndexed decisionPath = iota
	pathUncached
	pathOracle
)

// DecideOracle answers with plain Casbin Enforce on the current snapshot (the
// reference the indexed path is tested and benchmarked against).
func (e *Engine) DecideOracle(req *Request) Decision {
	return e.decide(req, pathOracle)
}

func (e *Engine) decide(req *Request, via decisionPath) Decision {
	s := e.cur.Load()
	if s == nil {
		return deny(CodeStoreError, "policy not loaded", 0)
	}
	tenant, subjects, d, ok := e.prepare(s, req)
	if !ok {
		return d
	}
	return e.decideOn(s, tenant, subjects, req, via)
}

// DecideAll answers the request once per target, all on one snapshot, and
// returns the decisions (in target order) and the policy version used. Used
// by FilterResources, whose response carries a single policy version.
func (e *Engine) DecideAll(req *Request, targets []string) ([]Decision, int64) {
	return e.DecideAllWith(req, targets, nil)
}

// DecideAllWith is DecideAll where attrs (when not nil) sets the resource
// attributes of target i (CondInput.Server and Annotations) before it is
// decided.
func (e *Engine) DecideAllWith(req *Request, targets []string, attrs func(i int, in *CondInput)) ([]Decision, int64) {
	out := make([]Decision, len(targets))
	s := e.cur.Load()
	if s == nil {
		for i := range out {
			out[i] = deny(CodeStoreError, "policy not loaded", 0)
		}
		return out, 0
	}
	r := *req
	r.Target = "x" // validated per target below
	tenant, subjects, d, ok := e.prepare(s, &r)
	for i, t := range targets {
		switch {
		case !ok:
			out[i] = d
		case t == "" || len(t) > 512:
			out[i] = deny(CodeInvalidRequest, "target must be a non-empty name of at most 512 bytes", s.version)
		default:
			r.Target = t
			if attrs != nil {
				r.Cond.Server, r.Cond.Annotations = req.Cond.Server, req.Cond.Annotations
				attrs(i, &r.Cond)
			}
			out[i] = e.decideOn(s, tenant, subjects, &r, pathIndexed)
		}
	}
	return out, s.version
}

// prepare runs the checks that do not depend on the target; ok=false
// returns the deny to answer with.
func (e *Engine) prepare(s *snapshot, req *Request) (tenant string, subjects []string, d Decision, ok bool) {
	if s.failed != nil {
		return "", nil, deny(CodeStoreError, "policy store unavailable: "+s.failed.Error(), s.version), false
	}
	tenant, subjects, err := req.normalize()
	if err != nil {
		return "", nil, deny(CodeInvalidRequest, err.Error(), s.version), false
	}
	// A subject that no rule or link mentions can match nothing (its role
	// closure is itself, and no rule names it), so only mentioned subjects
	// are decided about. This also keys the decision cache by the role set
	// that matters rather than by every user.
	known := subjects[:0:0]
	for _, sub := range subjects {
		if s.known[sub] {
			known = append(known, sub)
		}
	}
	if len(known) == 0 {
		return "", nil, deny(CodeUnknownRole, fmt.Sprintf("no rule or role link mentions any of %v", subjects), s.version), false
	}
	return tenant, known, Decision{}, true
}

func (e *Engine) decideOn(s *snapshot, tenant string, subjects []string, req *Request, via decisionPath) (d Decision) {
	defer func() {
		if r := recover(); r != nil {
			d = deny(CodeEvaluatorError, fmt.Sprintf("evaluator panic: %v", r), s.version)
		}
	}()
	if s.ix != nil && via != pathOracle {
		return s.ix.decide(tenant, subjects, req, s.version, via == pathIndexed)
	}
	s.oracleOnce.Do(func() { s.oracle, s.oracleErr = newCasbinDecider(e.modelText, s.set, e.custom) })
	if s.oracleErr != nil {
		return deny(CodeEvaluatorError, s.oracleErr.Error(), s.version)
	}
	return s.oracle.decide(tenant, subjects, req, s.version)
}

// Package authzmem is an in-memory authzstore.Store (tests, ephemeral runs).
// It passes the same conformance suite as the sqlite store
// (authztest.RunStoreSuite); nothing survives Close.
package authzmem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// Store is the in-memory store.
type Store struct {
	mu        sync.RWMutex
	version   int64
	lines     []line // store order
	decisions []*authzstore.DecisionRecord
	seq       int64
	closed    bool
}

type line struct {
	ptype  string // "p" or "g"
	rule   authzcasbin.Rule
	link   authzcasbin.Link
	source string
}

func (l line) key() string {
	if l.ptype == "p" {
		return l.rule.ID()
	}
	return l.link.ID()
}

var _ authzstore.Store = (*Store)(nil)

// errClosed is returned after Close.
var errClosed = errors.New("authzmem: store closed")

// New returns an empty store at policy version 0.
func New() *Store { return &Store{} }

func (s *Store) check() error {
	if s.closed {
		return errClosed
	}
	return nil
}

// Snapshot returns the policy and its version.
func (s *Store) Snapshot(context.Context) (authzcasbin.PolicySet, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(); err != nil {
		return authzcasbin.PolicySet{}, err
	}
	set := authzcasbin.PolicySet{Version: s.version}
	for _, l := range s.lines {
		if l.ptype == "p" {
			r := l.rule
			r.Source = l.source
			set.Rules = append(set.Rules, r)
		} else {
			k := l.link
			k.Source = l.source
			set.Links = append(set.Links, k)
		}
	}
	return set, nil
}

// Version returns the policy version.
func (s *Store) Version(context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.version, s.check()
}

func (s *Store) index(key string) int {
	return slices.IndexFunc(s.lines, func(l line) bool { return l.key() == key })
}

// insert adds a line unless an identical one exists; it reports whether it did.
func (s *Store) insert(l line) bool {
	if s.index(l.key()) >= 0 {
		return false
	}
	s.lines = append(s.lines, l)
	return true
}

func ruleLine(r authzcasbin.Rule, source string) line {
	r.Source = ""
	return line{ptype: "p", rule: r, source: source}
}

func linkLine(k authzcasbin.Link, source string) line {
	k.Source = ""
	return line{ptype: "g", link: k, source: source}
}

// Apply applies an API change atomically (all or nothing).
func (s *Store) Apply(_ context.Context, ch authzstore.Change) (int64, int, error) {
	if err := ch.Validate(); err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return 0, 0, err
	}
	saved := slices.Clone(s.lines)
	fail := func(err error) (int64, int, error) {
		s.lines = saved
		return 0, 0, err
	}
	changed := 0
	removeRules := slices.Clone(ch.RemoveRules)
	for i, id := range ch.RemoveRuleIDs {
		j := s.index(id)
		if j < 0 || s.lines[j].ptype != "p" {
			return fail(fmt.Errorf("%w: policy_ids[%d]: no line with id %q", authzstore.ErrNotFound, i, id))
		}
		removeRules = append(removeRules, s.lines[j].rule)
	}
	for i, r := range removeRules {
		j := s.index(r.ID())
		switch {
		case j < 0:
			return fail(fmt.Errorf("%w: policies[%d]: no line %s", authzstore.ErrNotFound, i, r.String()))
		case !authzstore.Editable(s.lines[j].source):
			return fail(fmt.Errorf("%w: policies[%d]: line %s is owned by source %q", authzstore.ErrReadOnly, i, r.String(), s.lines[j].source))
		}
		s.lines = slices.Delete(s.lines, j, j+1)
		changed++
	}
	for i, k := range ch.RemoveLinks {
		j := s.index(k.ID())
		switch {
		case j < 0:
			return fail(fmt.Errorf("%w: role_links[%d]: no link %s", authzstore.ErrNotFound, i, k.String()))
		case !authzstore.Editable(s.lines[j].source):
			return fail(fmt.Errorf("%w: role_links[%d]: link %s is owned by source %q", authzstore.ErrReadOnly, i, k.String(), s.lines[j].source))
		}
		s.lines = slices.Delete(s.lines, j, j+1)
		changed++
	}
	for _, r := range ch.AddRules {
		if s.insert(ruleLine(r, authzcasbin.SourceAPI)) {
			changed++
		}
	}
	for _, k := range ch.AddLinks {
		if s.insert(linkLine(k, authzcasbin.SourceAPI)) {
			changed++
		}
	}
	if changed > 0 {
		s.version++
	}
	return s.version, changed, nil
}

// SeedDefault inserts the rules only into an empty store.
func (s *Store) SeedDefault(_ context.Context, rules []authzcasbin.Rule) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return false, err
	}
	if len(s.lines) > 0 {
		return false, nil
	}
	for _, r := range rules {
		s.insert(ruleLine(r, authzcasbin.SourceDefault))
	}
	s.version++
	return true, nil
}

// ReplaceSource replaces the lines of a source (see authzstore.Store).
func (s *Store) ReplaceSource(_ context.Context, source string, rules []authzcasbin.Rule, links []authzcasbin.Link, dropDefaultFor []string) (int64, bool, error) {
	if err := authzstore.ValidateReplace(source, rules, links); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return 0, false, err
	}
	before := slices.Clone(s.lines)
	next := slices.DeleteFunc(slices.Clone(s.lines), func(l line) bool {
		return l.source == source || (l.source == authzcasbin.SourceDefault && l.ptype == "p" && slices.Contains(dropDefaultFor, l.rule.Subject))
	})
	s.lines = next
	for _, r := range rules {
		s.insert(ruleLine(r, source))
	}
	for _, k := range links {
		s.insert(linkLine(k, source))
	}
	if slices.Equal(before, s.lines) {
		s.lines = before // unchanged: keep the original order
		return s.version, false, nil
	}
	s.version++
	return s.version, true, nil
}

// AppendDecisions appends records.
func (s *Store) AppendDecisions(_ context.Context, recs []*authzstore.DecisionRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	for _, r := range recs {
		c := *r
		c.Encoded = nil
		s.seq++
		c.Seq = s.seq
		s.decisions = append(s.decisions, &c)
	}
	return nil
}

// ListDecisions lists records newest first (see authzstore.Store).
func (s *Store) ListDecisions(_ context.Context, f authzstore.Filter, limit int, before int64) ([]*authzstore.DecisionRecord, int64, error) {
	if f.Tenant == "" {
		return nil, 0, errors.New("authz store: decisions filter needs a tenant")
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	var out []*authzstore.DecisionRecord
	for i := len(s.decisions) - 1; i >= 0 && len(out) <= limit; i-- {
		r := s.decisions[i]
		switch {
		case r.Tenant != f.Tenant, before > 0 && r.Seq >= before, f.Subject != "" && r.Subject != f.Subject,
			f.Allow != nil && r.Allow != *f.Allow, f.Resource != "" && r.Resource != f.Resource,
			f.Kind != 0 && r.Kind != f.Kind, !f.Since.IsZero() && r.Time.Before(f.Since):
			continue
		}
		c := *r
		out = append(out, &c)
	}
	var next int64
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].Seq
	}
	return out, next, nil
}

// Prune applies retention (see authzstore.Store).
func (s *Store) Prune(_ context.Context, ret authzstore.Retention) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return 0, err
	}
	n0 := len(s.decisions)
	s.decisions = slices.DeleteFunc(s.decisions, func(r *authzstore.DecisionRecord) bool {
		if r.Evictable() {
			return !ret.AllowsBefore.IsZero() && r.Time.Before(ret.AllowsBefore)
		}
		return !ret.DeniesBefore.IsZero() && r.Time.Before(ret.DeniesBefore)
	})
	if ret.MaxRowsPerTenant > 0 {
		count := map[string]int64{}
		for _, r := range s.decisions {
			count[r.Tenant]++
		}
		excess := map[string]int64{}
		for t, c := range count {
			if c > ret.MaxRowsPerTenant {
				excess[t] = c - ret.MaxRowsPerTenant
			}
		}
		// s.decisions is in append (sequence) order: oldest first.
		s.decisions = slices.DeleteFunc(s.decisions, func(r *authzstore.DecisionRecord) bool {
			if excess[r.Tenant] > 0 && r.Evictable() {
				excess[r.Tenant]--
				return true
			}
			return false
		})
	}
	return int64(n0 - len(s.decisions)), nil
}

// Ready returns nil until Close.
func (s *Store) Ready(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.check()
}

// Close makes every later call fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

package authzcasbin

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// maxClosures bounds the memoised role closures of one snapshot (many users
// times many tenants); beyond it closures are computed per decision.
const maxClosures = 200_000

// maxRoleHops is Casbin's default role hierarchy depth: a member reaches roles
// at most this many links away.
const maxRoleHops = 10

// index is the fast decision path over one policy snapshot. Rules are
// partitioned by (subject, tenant, resource type); inside a partition literal
// targets are a map, "prefix*" targets a list checked with strings.HasPrefix,
// and other globs a list checked with doublestar. Role closures are computed
// once per (member, tenant) and memoised for the life of the snapshot; whole
// decisions without conditions are cached, keyed by (subjects, tenant,
// resource, action, target). A new policy version is a new index, so nothing
// is ever invalidated in place.
type index struct {
	rules    []Rule
	conds    []*Condition // parsed condition per rule ordinal (nil = unconditional)
	parts    map[partKey]*partition
	links    map[string][]Link // member -> links (in store order)
	closures sync.Map          // closureKey -> []string
	nClosure atomic.Int64      // entries in closures (bounded by maxClosures)
	cache    *decisionCache
	// allows are the allow decisions per rule ordinal, built on first use
	// (ID and message once per rule and snapshot, not once per decided
	// target: FilterResources decides thousands of targets on one rule).
	allows []atomic.Pointer[Decision]
}

type partKey struct{ sub, tenant, rtype string }

type partition struct {
	exact  map[string][]int32
	prefix []prefixRule
	globs  []int32
}

type prefixRule struct {
	prefix string
	ord    int32
}

type closureKey struct{ member, tenant string }

func newIndex(set PolicySet) (*index, error) {
	ix := &index{
		rules:  set.Rules,
		conds:  make([]*Condition, len(set.Rules)),
		parts:  make(map[partKey]*partition),
		links:  make(map[string][]Link),
		cache:  newDecisionCache(1 << 16),
		allows: make([]atomic.Pointer[Decision], len(set.Rules)),
	}
	seen := make(map[string]bool, len(set.Rules))
	for i, r := range set.Rules {
		id := r.ID()
		if seen[id] { // Casbin skips exact duplicates; so do we
			continue
		}
		seen[id] = true
		if r.Condition != "" {
			c, err := ParseCondition(r.Condition)
			if err != nil {
				return nil, err
			}
			ix.conds[i] = c
		}
		k := partKey{r.Subject, r.Tenant, r.Resource}
		p := ix.parts[k]
		if p == nil {
			p = &partition{exact: map[string][]int32{}}
			ix.parts[k] = p
		}
		ord := int32(i)
		switch lit, kind := classifyGlob(r.Target); kind {
		case globLiteral:
			p.exact[lit] = append(p.exact[lit], ord)
		case globPrefix:
			p.prefix = append(p.prefix, prefixRule{lit, ord})
		default:
			p.globs = append(p.globs, ord)
		}
	}
	for _, l := range set.Links {
		ix.links[l.Member] = append(ix.links[l.Member], l)
	}
	return ix, nil
}

type globKind int8

const (
	globLiteral globKind = iota
	globPrefix
	globOther
)

// classifyGlob returns the literal part of a pattern that is a plain name or a
// plain name followed by one "*".
func classifyGlob(p string) (string, globKind) {
	if strings.HasPrefix(p, CaseInsensitive) {
		return "", globOther
	}
	i := strings.IndexAny(p, `*?[]{}\`)
	switch {
	case i < 0:
		return p, globLiteral
	case i == len(p)-1 && p[i] == '*':
		return p[:i], globPrefix
	}
	return "", globOther
}

// closure returns the member and every role it reaches in the tenant through
// links in that tenant or in "*", at most maxRoleHops links away (the same
// reachability as Casbin's role manager with keyMatch domain matching).
func (ix *index) closure(member, tenant string) []string {
	k := closureKey{member, tenant}
	if v, ok := ix.closures.Load(k); ok {
		return v.([]string)
	}
	seen := map[string]bool{member: true}
	out := []string{member}
	frontier := []string{member}
	for hop := 0; hop < maxRoleHops && len(frontier) > 0; hop++ {
		var next []string
		for _, m := range frontier {
			for _, l := range ix.links[m] {
				if (l.Tenant == tenant || l.Tenant == Wildcard) && !seen[l.Role] {
					seen[l.Role] = true
					out = append(out, l.Role)
					next = append(next, l.Role)
				}
			}
		}
		frontier = next
	}
	if ix.nClosure.Add(1) <= maxClosures {
		ix.closures.Store(k, out)
	}
	return out
}

// match is the outcome of scanning the candidate rules.
type match struct {
	denyOrd, allowOrd, blockedOrd int32
	conditional                   bool // a candidate rule had a condition: the result depends on the input
}

func (ix *index) decide(tenant string, subjects []string, req *Request, version int64, useCache bool) Decision {
	key := ""
	if useCache {
		key = cacheKey(subjects, tenant, req)
		if d, ok := ix.cache.get(key); ok {
			d.Cached = true
			return d
		}
	}
	m := match{denyOrd: -1, allowOrd: -1, blockedOrd: -1}
	visited := make(map[string]bool, 8)
	for _, s := range subjects {
		for _, sub := range ix.closure(s, tenant) {
			if visited[sub] {
				continue
			}
			visited[sub] = true
			for _, t := range [2]string{tenant, Wildcard} {
				for _, rt := range [2]string{req.Resource, Wildcard} {
					if p := ix.parts[partKey{sub, t, rt}]; p != nil {
						ix.scan(p, req, &m)
					}
				}
			}
		}
	}
	var d Decision
	switch {
	case m.denyOrd >= 0:
		d = denyDecision(ix.rules[m.denyOrd], &req.Cond, version)
	case m.allowOrd >= 0:
		d = ix.allowDecision(m.allowOrd, version)
	case m.blockedOrd >= 0:
		d = blockedDecision(ix.rules[m.blockedOrd], &req.Cond, version)
	default:
		d = noPolicyDecision(tenant, subjects, req, version)
	}
	if useCache && !m.conditional {
		ix.cache.put(key, d)
	}
	return d
}

// allowDecision is allowDecision of rule ord, memoised per snapshot (the
// Reasons slice is shared read-only, as the decision cache shares it).
func (ix *index) allowDecision(ord int32, version int64) Decision {
	if d := ix.allows[ord].Load(); d != nil && d.PolicyVersion == version {
		return *d
	}
	d := allowDecision(ix.rules[ord], version)
	ix.allows[ord].Store(&d)
	return d
}

func (ix *index) scan(p *partition, req *Request, m *match) {
	for _, ord := range p.exact[req.Target] {
		ix.consider(ord, req, m)
	}
	for _, pr := range p.prefix {
		if strings.HasPrefix(req.Target, pr.prefix) { // "*" matches "/" too (MatchTarget)
			ix.consider(pr.ord, req, m)
		}
	}
	for _, ord := range p.globs {
		if MatchTarget(ix.rules[ord].Target, req.Target) {
			ix.consider(ord, req, m)
		}
	}
}

func (ix *index) consider(ord int32, req *Request, m *match) {
	r := &ix.rules[ord]
	if r.Action != Wildcard && r.Action != req.Action {
		return
	}
	c := ix.conds[ord]
	if c != nil {
		m.conditional = true
	}
	applies, _, _ := ruleApplies(c, r.Effect, &req.Cond)
	if !applies {
		if r.Effect == EffectAllow && (m.blockedOrd < 0 || ord < m.blockedOrd) {
			m.blockedOrd = ord
		}
		return
	}
	if r.Effect == EffectDeny {
		if m.denyOrd < 0 || ord < m.denyOrd {
			m.denyOrd = ord
		}
	} else if m.allowOrd < 0 || ord < m.allowOrd {
		m.allowOrd = ord
	}
}

func cacheKey(subjects []string, tenant string, req *Request) string {
	n := len(tenant) + len(req.Resource) + len(req.Action) + len(req.Target) + 4
	for _, s := range subjects {
		n += len(s) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range subjects {
		b.WriteString(s)
		b.WriteByte(0)
	}
	b.WriteByte(1)
	b.WriteString(tenant)
	b.WriteByte(0)
	b.WriteString(req.Resource)
	b.WriteByte(0)
	b.WriteString(req.Action)
	b.WriteByte(0)
	b.WriteString(req.Target)
	return b.String()
}

// decisionCache is a bounded, sharded map; a full shard is cleared (cheap
// eviction: entries are recomputed in microseconds).
type decisionCache struct {
	seed   maphash.Seed
	shards [32]cacheShard
	max    int
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string]Decision
}

func newDecisionCache(max int) *decisionCache {
	c := &decisionCache{seed: maphash.MakeSeed(), max: max / 32}
	for i := range c.shards {
		c.shards[i].m = make(map[string]Decision)
	}
	return c
}

func (c *decisionCache) shard(k string) *cacheShard {
	return &c.shards[maphash.String(c.seed, k)%uint64(len(c.shards))]
}

func (c *decisionCache) get(k string) (Decision, bool) {
	s := c.shard(k)
	s.mu.RLock()
	d, ok := s.m[k]
	s.mu.RUnlock()
	return d, ok
}

func (c *decisionCache) put(k string, d Decision) {
	s := c.shard(k)
	s.mu.Lock()
	if len(s.m) >= c.max {
		clear(s.m)
	}
	s.m[k] = d
	s.mu.Unlock()
}

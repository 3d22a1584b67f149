package catalogmcp

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ScopeKey identifies a per-scope child: (server, tenant[, subject[, thread]]);
// a per_tenant key has an empty subject and thread.
// Tenant and subject come from the acting-for principal and the thread from
// a trusted CallContext (docs/architecture.md §10.3), never from request text.
// A per_thread call without a trusted thread id (a user credential, or no
// CallContext) gets the empty thread: one child per user for such calls.
type ScopeKey struct {
	Server, Tenant, Subject, Thread string
}

// Pool keeps per-user / per-thread sessions with an idle TTL, shared by
// every scoped server and tenant, evicting fairly across tenants
// (docs/architecture.md §10.3, docs/decisions/0138-fair-scoped-session-eviction.md):
// beyond the cap, the victim is the least recently used idle session of the
// tenant holding the most sessions, so a tenant flooding the pool evicts its
// own sessions, never those of a tenant holding fewer. An optional per-tenant
// cap makes a tenant at its cap replace its own least recently used idle
// session, and refuses a new one (ErrTenantSessions) when all of them are
// in use. A session in use is never evicted (the pool may then exceed its
// cap until the calls end); an idle one is also closed after the TTL.
type Pool struct {
	cap       int
	tenantCap int // 0 = no per-tenant cap
	ttl       time.Duration
	grace     time.Duration
	onEvict   func(reason string)

	mu       sync.Mutex
	entries  map[ScopeKey]*poolEntry
	lru      *list.List // front = most recently used
	tenants  map[string]*tenantSessions
	inflight map[ScopeKey]*inflight
	closed   bool
	stop     chan struct{}
	wg       sync.WaitGroup
	cw       sync.WaitGroup // sessions being closed
}

type poolEntry struct {
	key      ScopeKey
	sess     *Session
	refs     int
	lastUsed time.Time
	elem     *list.Element // in Pool.lru
	telem    *list.Element // in tenantSessions.lru
}

// tenantSessions are one tenant's entries (front = most recently used) and
// its dials in flight (counted against the per-tenant cap).
type tenantSessions struct {
	lru     *list.List
	dialing int
}

// Reasons passed to PoolOptions.OnEvict.
const (
	// EvictCapacity: the pool was over catalog.sessions.max_scoped; the
	// victim was the largest tenant's least recently used idle session.
	EvictCapacity = "capacity"
	// EvictTenantCap: the tenant was at catalog.sessions.max_scoped_per_tenant;
	// its own least recently used idle session made room.
	EvictTenantCap = "tenant_cap"
	// EvictIdle: idle longer than catalog.sessions.idle_ttl.
	EvictIdle = "idle"
	// RefusedTenantCap: a new session was refused (ErrTenantSessions).
	RefusedTenantCap = "refused_tenant_cap"
)

// ErrTenantSessions is returned (wrapped in a *TenantSessionsError) when a
// tenant already holds catalog.sessions.max_scoped_per_tenant sessions, all
// in use.
var ErrTenantSessions = errors.New("tenant holds its maximum of scoped sessions")

// TenantSessionsError names the tenant's limit and the tenant.
type TenantSessionsError struct {
	Tenant string
	Limit  int
}

func (e *TenantSessionsError) Error() string {
	return fmt.Sprintf("catalog.sessions.max_scoped_per_tenant: tenant %q holds %d scoped sessions, all in use; retry when a call ends", e.Tenant, e.Limit)
}

// Unwrap makes errors.Is(err, ErrTenantSessions) hold.
func (e *TenantSessionsError) Unwrap() error { return ErrTenantSessions }

// PoolOptions are the optional settings of a Pool.
type PoolOptions struct {
	// TenantCap bounds one tenant's sessions (0 = only fair eviction).
	TenantCap int
	// OnEvict counts evictions and refusals by reason (Evict*, Refused*);
	// it runs under the pool's lock and must not block.
	OnEvict func(reason string)
}

type inflight struct {
	done chan struct{}
	err  error
}

// NewPool returns a pool with the given cap (>= 1), idle TTL and close grace.
func NewPool(capacity int, ttl, grace time.Duration) *Pool {
	return NewPoolWith(capacity, ttl, grace, PoolOptions{})
}

// NewPoolWith is NewPool with a per-tenant cap and an eviction counter.
func NewPoolWith(capacity int, ttl, grace time.Duration, o PoolOptions) *Pool {
	p := &Pool{cap: max(capacity, 1), tenantCap: max(o.TenantCap, 0), ttl: ttl, grace: grace, onEvict: o.OnEvict,
		entries: map[ScopeKey]*poolEntry{}, lru: list.New(), tenants: map[string]*tenantSessions{},
		inflight: map[ScopeKey]*inflight{}, stop: make(chan struct{})}
	if ttl > 0 {
		p.wg.Add(1)
		go p.janitor()
	}
	return p
}

func (p *Pool) janitor() {
	defer p.wg.Done()
	tick := min(max(p.ttl/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.sweep(time.Now())
		}
	}
}

func (p *Pool) sweep(now time.Time) {
	var victims []*Session
	p.mu.Lock()
	for e := p.lru.Back(); e != nil; {
		prev := e.Prev()
		pe := e.Value.(*poolEntry)
		if pe.refs == 0 && now.Sub(pe.lastUsed) >= p.ttl {
			victims = append(victims, p.removeLocked(pe))
			p.count(EvictIdle)
		}
		e = prev
	}
	p.mu.Unlock()
	p.closeAll(victims)
}

func (p *Pool) count(reason string) {
	if p.onEvict != nil {
		p.onEvict(reason)
	}
}

// removeLocked forgets pe (whether or not it is in use) and returns its
// session; closing it is the caller's business.
func (p *Pool) removeLocked(pe *poolEntry) *Session {
	p.lru.Remove(pe.elem)
	delete(p.entries, pe.key)
	if ts := p.tenants[pe.key.Tenant]; ts != nil {
		ts.lru.Remove(pe.telem)
		p.forgetTenantLocked(pe.key.Tenant, ts)
	}
	return pe.sess
}

func (p *Pool) tenantLocked(tenant string) *tenantSessions {
	ts := p.tenants[tenant]
	if ts == nil {
		ts = &tenantSessions{lru: list.New()}
		p.tenants[tenant] = ts
	}
	return ts
}

func (p *Pool) forgetTenantLocked(tenant string, ts *tenantSessions) {
	if ts.lru.Len() == 0 && ts.dialing == 0 {
		delete(p.tenants, tenant)
	}
}

// oldestIdle is ts's least recently used idle entry, or nil.
func oldestIdle(ts *tenantSessions) *poolEntry {
	for e := ts.lru.Back(); e != nil; e = e.Prev() {
		if pe := e.Value.(*poolEntry); pe.refs == 0 {
			return pe
		}
	}
	return nil
}

// victimIn is the idle session ts gives up: the least recently used idle
// one of the subject holding the most of ts's sessions (so one user of a
// tenant flooding it evicts their own sessions first), or nil when all are
// in use. O(sessions of ts).
func victimIn(ts *tenantSessions) *poolEntry {
	bySubject := make(map[string]int, 4)
	for e := ts.lru.Front(); e != nil; e = e.Next() {
		bySubject[e.Value.(*poolEntry).key.Subject]++
	}
	var best *poolEntry
	for e := ts.lru.Back(); e != nil; e = e.Prev() {
		pe := e.Value.(*poolEntry)
		if pe.refs == 0 && (best == nil || bySubject[pe.key.Subject] > bySubject[best.key.Subject]) {
			best = pe // oldest first: a tie keeps the older one
		}
	}
	return best
}

// fairVictimLocked picks the capacity victim: victimIn of the tenant
// holding the most sessions (ties: the tenant whose oldest idle session is
// older). Tenants whose sessions are all in use are skipped. The scan is
// over tenants holding sessions, at most the cap plus the sessions in use.
func (p *Pool) fairVictimLocked() *poolEntry {
	var best *tenantSessions
	var bestOld *poolEntry
	bestN := 0
	for _, ts := range p.tenants {
		n := ts.lru.Len()
		if n < bestN {
			continue
		}
		pe := oldestIdle(ts)
		if pe == nil {
			continue
		}
		if n > bestN || pe.lastUsed.Before(bestOld.lastUsed) {
			best, bestOld, bestN = ts, pe, n
		}
	}
	if best == nil {
		return nil
	}
	return victimIn(best)
}

func (p *Pool) closeAll(ss []*Session) {
	for _, s := range ss {
		p.cw.Add(1)
		go func() { defer p.cw.Done(); s.Close(p.grace) }()
	}
}

// Acquire returns the live session of key, dialling one with dial when there
// is none (concurrent callers of one key share one dial). release must be
// called when the caller is done with the session.
func (p *Pool) Acquire(ctx context.Context, key ScopeKey, dial func(context.Context) (*Session, error)) (*Session, func(), error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, nil, context.Canceled
		}
		if pe, ok := p.entries[key]; ok {
			select {
			case <-pe.sess.Dead():
				if sess := p.removeLocked(pe); pe.refs == 0 {
					p.closeAll([]*Session{sess})
				}
			default:
				pe.refs++
				pe.lastUsed = time.Now()
				p.lru.MoveToFront(pe.elem)
				p.tenants[key.Tenant].lru.MoveToFront(pe.telem)
				p.mu.Unlock()
				return pe.sess, p.releaser(pe), nil
			}
		}
		if in, ok := p.inflight[key]; ok {
			p.mu.Unlock()
			select {
			case <-in.done:
				if in.err != nil {
					return nil, nil, in.err
				}
				continue
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		ts := p.tenantLocked(key.Tenant)
		var victims []*Session
		if p.tenantCap > 0 && ts.lru.Len()+ts.dialing >= p.tenantCap {
			// At the tenant's own cap: it replaces its own oldest idle
			// session, or waits for a call to end.
			v := victimIn(ts)
			if v == nil || ts.lru.Len()+ts.dialing > p.tenantCap {
				p.forgetTenantLocked(key.Tenant, ts)
				p.count(RefusedTenantCap)
				p.mu.Unlock()
				return nil, nil, &TenantSessionsError{Tenant: key.Tenant, Limit: p.tenantCap}
			}
			victims = append(victims, p.removeLocked(v))
			p.count(EvictTenantCap)
			ts = p.tenantLocked(key.Tenant) // removeLocked may have dropped an empty record
		}
		ts.dialing++
		in := &inflight{done: make(chan struct{})}
		p.inflight[key] = in
		p.mu.Unlock()
		p.closeAll(victims)
		victims = nil

		sess, err := dial(ctx)
		p.mu.Lock()
		delete(p.inflight, key)
		in.err = err
		close(in.done)
		if p.closed { // Close replaced the tenant records
			p.mu.Unlock()
			if err != nil {
				return nil, nil, err
			}
			sess.Close(p.grace)
			return nil, nil, context.Canceled
		}
		ts.dialing-- // the record stayed in p.tenants: dialing > 0 kept it
		if err != nil {
			p.forgetTenantLocked(key.Tenant, ts)
			p.mu.Unlock()
			return nil, nil, err
		}
		pe := &poolEntry{key: key, sess: sess, refs: 1, lastUsed: time.Now()}
		pe.elem = p.lru.PushFront(pe)
		pe.telem = ts.lru.PushFront(pe)
		p.entries[key] = pe
		for p.lru.Len() > p.cap {
			v := p.fairVictimLocked()
			if v == nil {
				break // every session is in use
			}
			victims = append(victims, p.removeLocked(v))
			p.count(EvictCapacity)
		}
		p.mu.Unlock()
		p.closeAll(victims)
		return sess, p.releaser(pe), nil
	}
}

func (p *Pool) releaser(pe *poolEntry) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			pe.refs--
			pe.lastUsed = time.Now()
			var victim *Session
			if cur, ok := p.entries[pe.key]; !ok || cur != pe {
				// Dropped while in use (dead or server removed).
				if pe.refs == 0 {
					victim = pe.sess
				}
			}
			p.mu.Unlock()
			if victim != nil {
				p.closeAll([]*Session{victim})
			}
		})
	}
}

// Drop removes key's session if it is sess (e.g. after it failed).
func (p *Pool) Drop(key ScopeKey, sess *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pe, ok := p.entries[key]; ok && pe.sess == sess {
		p.removeLocked(pe)
		if pe.refs == 0 {
			p.closeAll([]*Session{sess})
		}
	}
}

// RemoveServer closes every idle session of server and detaches the busy
// ones (closed when their calls end).
func (p *Pool) RemoveServer(server string) {
	p.mu.Lock()
	var victims []*Session
	for k, pe := range p.entries {
		if k.Server != server {
			continue
		}
		p.removeLocked(pe)
		if pe.refs == 0 {
			victims = append(victims, pe.sess)
		}
	}
	p.mu.Unlock()
	p.closeAll(victims)
}

// TenantCounts returns the number of sessions each tenant holds.
func (p *Pool) TenantCounts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.tenants))
	for t, ts := range p.tenants {
		if n := ts.lru.Len(); n > 0 {
			out[t] = n
		}
	}
	return out
}

// Keys returns the keys held, most recently used first.
func (p *Pool) Keys() []ScopeKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ScopeKey
	for e := p.lru.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*poolEntry).key)
	}
	return out
}

// Close closes every session and waits for them (bounded by the grace).
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	var all []*Session
	for _, pe := range p.entries {
		all = append(all, pe.sess)
	}
	p.entries = map[ScopeKey]*poolEntry{}
	p.lru.Init()
	p.tenants = map[string]*tenantSessions{}
	p.mu.Unlock()
	p.wg.Wait()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() { defer wg.Done(); s.Close(p.grace) }()
	}
	wg.Wait()
	p.cw.Wait()
}

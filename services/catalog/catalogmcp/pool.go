package catalogmcp

import (
	"container/list"
	"context"
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

// Pool keeps per-user / per-thread sessions in an LRU with an idle TTL.
// A session in use is never evicted (the pool may then exceed its cap until
// the calls end); an idle one is closed when it is the least recently used
// beyond the cap, or idle longer than the TTL.
type Pool struct {
	cap   int
	ttl   time.Duration
	grace time.Duration

	mu       sync.Mutex
	entries  map[ScopeKey]*poolEntry
	lru      *list.List // front = most recently used
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
	elem     *list.Element
}

type inflight struct {
	done chan struct{}
	err  error
}

// NewPool returns a pool with the given cap (>= 1), idle TTL and close grace.
func NewPool(capacity int, ttl, grace time.Duration) *Pool {
	p := &Pool{cap: max(capacity, 1), ttl: ttl, grace: grace, entries: map[ScopeKey]*poolEntry{},
		lru: list.New(), inflight: map[ScopeKey]*inflight{}, stop: make(chan struct{})}
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
		}
		e = prev
	}
	p.mu.Unlock()
	p.closeAll(victims)
}

func (p *Pool) removeLocked(pe *poolEntry) *Session {
	p.lru.Remove(pe.elem)
	delete(p.entries, pe.key)
	return pe.sess
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
				if pe.refs == 0 {
					p.closeAll([]*Session{p.removeLocked(pe)})
				} else {
					p.lru.Remove(pe.elem)
					delete(p.entries, key)
				}
			default:
				pe.refs++
				pe.lastUsed = time.Now()
				p.lru.MoveToFront(pe.elem)
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
		in := &inflight{done: make(chan struct{})}
		p.inflight[key] = in
		p.mu.Unlock()

		sess, err := dial(ctx)
		p.mu.Lock()
		delete(p.inflight, key)
		in.err = err
		close(in.done)
		if err != nil {
			p.mu.Unlock()
			return nil, nil, err
		}
		if p.closed {
			p.mu.Unlock()
			sess.Close(p.grace)
			return nil, nil, context.Canceled
		}
		pe := &poolEntry{key: key, sess: sess, refs: 1, lastUsed: time.Now()}
		pe.elem = p.lru.PushFront(pe)
		p.entries[key] = pe
		var victims []*Session
		for e := p.lru.Back(); e != nil && p.lru.Len() > p.cap; {
			prev := e.Prev()
			if v := e.Value.(*poolEntry); v.refs == 0 {
				victims = append(victims, p.removeLocked(v))
			}
			e = prev
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
		p.lru.Remove(pe.elem)
		delete(p.entries, key)
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
		p.lru.Remove(pe.elem)
		delete(p.entries, k)
		if pe.refs == 0 {
			victims = append(victims, pe.sess)
		}
	}
	p.mu.Unlock()
	p.closeAll(victims)
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

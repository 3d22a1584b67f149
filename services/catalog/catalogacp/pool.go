package catalogacp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// ErrUnknownAgent reports a name that is not configured.
var ErrUnknownAgent = errors.New("unknown ACP agent")

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Agents are the configured agents, resolved (Agent.Resolve).
	Agents map[string]Agent
	// ThreadsDir holds one folder per thread (catalog.workspaces.dir).
	ThreadsDir string
	// MaxLive bounds the live processes (catalog.sessions.max_scoped,
	// default 32); the least recently used idle one is closed first.
	MaxLive int
	// IdleTTL closes a process unused for this long (default 10 min).
	IdleTTL time.Duration
	// Options apply to every connection.
	Options Options
	// Now is the clock (tests).
	Now func() time.Time
}

type poolKey struct{ agent, thread string }

type poolEntry struct {
	ready   chan struct{} // closed once conn or err is set
	conn    *Conn
	err     error
	inUse   int
	lastUse time.Time
}

// Pool runs one ACP agent process per (agent, thread), started on first
// use, restarted on the next call after it exited, and bounded like the
// catalog's per-thread MCP sessions (docs/architecture.md §10.3): at most
// MaxLive processes (a process in use is never closed) and an idle TTL.
type Pool struct {
	cfg PoolConfig

	mu      sync.Mutex
	entries map[poolKey]*poolEntry
	closed  bool
}

// NewPool returns a pool; Close ends its processes.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = 32
	}
	if cfg.IdleTTL <= 0 {
		cfg.IdleTTL = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pool{cfg: cfg, entries: map[poolKey]*poolEntry{}}
}

// Names are the configured agents, sorted.
func (p *Pool) Names() []string {
	out := make([]string, 0, len(p.cfg.Agents))
	for n := range p.cfg.Agents {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Agent returns the configuration of a configured agent.
func (p *Pool) Agent(name string) (Agent, bool) {
	a, ok := p.cfg.Agents[name]
	return a, ok
}

// Invoke runs one prompt turn of agent in the thread's ACP workspace. A
// process that exited (crash, kill after an unanswered cancel) is replaced
// by a new one on the next call.
func (p *Pool) Invoke(ctx context.Context, agent, threadID, prompt string, onUpdate func(Update)) (Result, error) {
	a, ok := p.cfg.Agents[agent]
	if !ok {
		return Result{}, fmt.Errorf("%w %q (configured: %v)", ErrUnknownAgent, agent, p.Names())
	}
	dir, err := ThreadACPDir(p.cfg.ThreadsDir, threadID)
	if err != nil {
		return Result{}, err
	}
	k := poolKey{agent, threadID}
	c, err := p.acquire(ctx, k, a, dir)
	if err != nil {
		return Result{}, err
	}
	res, err := c.Prompt(ctx, prompt, onUpdate)
	p.release(k, c)
	return res, err
}

// acquire returns the live connection of k, starting one when needed.
func (p *Pool) acquire(ctx context.Context, k poolKey, a Agent, dir string) (*Conn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("ACP pool closed")
		}
		p.sweepLocked()
		e := p.entries[k]
		if e == nil {
			e = &poolEntry{ready: make(chan struct{}), inUse: 1, lastUse: p.cfg.Now()}
			p.entries[k] = e
			p.evictLocked()
			p.mu.Unlock()
			c, err := Start(ctx, k.agent, a, dir, p.cfg.Options)
			p.mu.Lock()
			e.conn, e.err = c, err
			close(e.ready)
			if err != nil {
				delete(p.entries, k)
			}
			p.mu.Unlock()
			return c, err
		}
		e.inUse++
		p.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			p.mu.Lock()
			e.inUse--
			p.mu.Unlock()
			return nil, ctx.Err()
		}
		if e.err == nil && e.conn.Alive() {
			return e.conn, nil
		}
		// A failed start or an exited process: drop it and start anew.
		p.mu.Lock()
		e.inUse--
		if p.entries[k] == e {
			delete(p.entries, k)
		}
		p.mu.Unlock()
		if e.conn != nil {
			_ = e.conn.Close()
		}
		if e.err != nil {
			return nil, e.err
		}
	}
}

func (p *Pool) release(k poolKey, c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[k]
	if e == nil || e.conn != c {
		return
	}
	e.inUse--
	e.lastUse = p.cfg.Now()
	if !c.Alive() && e.inUse == 0 {
		delete(p.entries, k)
		go c.Close()
	}
}

// sweepLocked closes idle processes past the TTL.
func (p *Pool) sweepLocked() {
	now := p.cfg.Now()
	for k, e := range p.entries {
		if e.inUse == 0 && e.conn != nil && now.Sub(e.lastUse) > p.cfg.IdleTTL {
			delete(p.entries, k)
			go e.conn.Close()
		}
	}
}

// evictLocked closes least recently used idle processes above MaxLive.
func (p *Pool) evictLocked() {
	for len(p.entries) > p.cfg.MaxLive {
		var oldK poolKey
		var old *poolEntry
		for k, e := range p.entries {
			if e.inUse == 0 && e.conn != nil && (old == nil || e.lastUse.Before(old.lastUse)) {
				oldK, old = k, e
			}
		}
		if old == nil {
			return // every process is in use: allow the excess, as §10.3 does
		}
		delete(p.entries, oldK)
		go old.conn.Close()
	}
}

// Live is the number of processes in the pool.
func (p *Pool) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// Close ends every process.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	var conns []*Conn
	for k, e := range p.entries {
		if e.conn != nil {
			conns = append(conns, e.conn)
		}
		delete(p.entries, k)
	}
	p.mu.Unlock()
	var errs []error
	for _, c := range conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

package catalogmcp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// evictCounter records the pool's OnEvict reasons.
type evictCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *evictCounter) add(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[reason]++
}

func (c *evictCounter) get(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[reason]
}

// TestPoolFairAcrossTenants is the hostile-tenant case of
// docs/decisions/0138-fair-scoped-session-eviction.md with the real npm
// server: tenant beta's per_user session survives tenant acme opening
// per_thread sessions in ten threads through a pool of 4; acme's oldest
// threads are the ones closed, and the pool never holds more than its cap.
func TestPoolFairAcrossTenants(t *testing.T) {
	js := npmServer(t, "server-sequential-thinking")
	notes := stdioServer("notes", js)
	notes.SessionScope = catalogconfig.ScopePerUser
	scratch := stdioServer("scratch", js)
	scratch.SessionScope = catalogconfig.ScopePerThread
	var ev evictCounter
	m := NewManager(ManagerOptions{Options: Options{CloseGrace: time.Second}, PoolCap: 4, OnPoolEvict: ev.add})
	t.Cleanup(func() { m.Close() })
	m.Apply([]catalogconfig.Server{notes, scratch})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := m.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	const args = `{"thought":"x","nextThoughtNeeded":false,"thoughtNumber":1,"totalThoughts":1}`
	call := func(server string, key ScopeKey) *Result {
		t.Helper()
		r, err := m.Call(ctx, server, "sequentialthinking", []byte(args), key, nil)
		if err != nil {
			t.Fatalf("%s as %+v: %v", server, key, err)
		}
		return r
	}
	bob := ScopeKey{Tenant: "beta", Subject: "bob"}
	if r := call("notes", bob); !r.SessionCreated {
		t.Fatal("bob's first call must create his session")
	}
	bobPid := pidOf(m.Pool(), ScopeKey{Server: "notes", Tenant: "beta", Subject: "bob"})
	for i := 1; i <= 10; i++ {
		if r := call("scratch", ScopeKey{Tenant: "acme", Subject: "alice", Thread: fmt.Sprint("t", i)}); !r.SessionCreated {
			t.Fatalf("thread t%d: a new thread must create a session", i)
		}
		if n := len(m.Pool().Keys()); n > 4 {
			t.Fatalf("after thread t%d the pool holds %d sessions, cap 4", i, n)
		}
	}
	if got := m.Pool().TenantCounts(); got["beta"] != 1 || got["acme"] != 3 {
		t.Fatalf("sessions per tenant %v, want beta 1, acme 3", got)
	}
	// acme's three most recent threads are kept, its oldest were closed.
	var threads []string
	for _, k := range m.Pool().Keys() {
		if k.Tenant == "acme" {
			threads = append(threads, k.Thread)
		}
	}
	if fmt.Sprint(threads) != "[t10 t9 t8]" {
		t.Fatalf("acme's threads kept %v, want [t10 t9 t8]", threads)
	}
	if r := call("notes", bob); r.SessionCreated {
		t.Fatal("bob's session was evicted by another tenant's flood")
	}
	if !procAlive(bobPid) {
		t.Fatal("bob's child is gone")
	}
	if got := ev.get(EvictCapacity); got != 7 {
		t.Fatalf("capacity evictions %d, want 7", got)
	}
	// Once acme holds no more than beta, beta is the largest and pays for
	// its own growth: the oldest of the largest tenant goes.
	if r := call("scratch", ScopeKey{Tenant: "acme", Subject: "alice", Thread: "t1"}); !r.SessionCreated {
		t.Fatal("t1 was evicted; calling it again must create a session")
	}
}

func pidOf(p *Pool, key ScopeKey) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pe := p.entries[key]; pe != nil {
		return pe.sess.Pid()
	}
	return 0
}

// TestPoolTenantCap: at catalog.sessions.max_scoped_per_tenant a tenant's
// new session replaces its own oldest idle one; with all of them in use it
// is refused with a *TenantSessionsError, and another tenant is unaffected.
func TestPoolTenantCap(t *testing.T) {
	js := npmServer(t, "server-sequential-thinking")
	cfg := stdioServer("seq", js)
	var ev evictCounter
	p := NewPoolWith(8, time.Minute, time.Second, PoolOptions{TenantCap: 2, OnEvict: ev.add})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dials := 0
	dial := func(c context.Context) (*Session, error) {
		dials++
		return Connect(c, cfg, Options{CloseGrace: time.Second}, nil)
	}
	key := func(tenant, thread string) ScopeKey {
		return ScopeKey{Server: "seq", Tenant: tenant, Subject: "u", Thread: thread}
	}
	_, relB, err := p.Acquire(ctx, key("beta", "b1"), dial)
	if err != nil {
		t.Fatal(err)
	}
	relB()
	a1, rel1, err := p.Acquire(ctx, key("acme", "a1"), dial)
	if err != nil {
		t.Fatal(err)
	}
	_, rel2, err := p.Acquire(ctx, key("acme", "a2"), dial)
	if err != nil {
		t.Fatal(err)
	}
	before := dials
	_, _, err = p.Acquire(ctx, key("acme", "a3"), dial)
	var tse *TenantSessionsError
	if !errors.As(err, &tse) || !errors.Is(err, ErrTenantSessions) || tse.Limit != 2 || tse.Tenant != "acme" {
		t.Fatalf("third busy session of acme: err %v, want *TenantSessionsError", err)
	}
	if dials != before {
		t.Fatal("a refused session must not be dialled")
	}
	if ev.get(RefusedTenantCap) != 1 {
		t.Fatalf("refusals %d, want 1", ev.get(RefusedTenantCap))
	}
	rel1() // a1 idle: a3 replaces it
	_, rel3, err := p.Acquire(ctx, key("acme", "a3"), dial)
	if err != nil {
		t.Fatal(err)
	}
	rel3()
	rel2()
	if ev.get(EvictTenantCap) != 1 {
		t.Fatalf("tenant-cap evictions %d, want 1", ev.get(EvictTenantCap))
	}
	deadline := time.Now().Add(5 * time.Second)
	for procAlive(a1.Pid()) {
		if time.Now().After(deadline) {
			t.Fatal("a1's child still runs after its eviction")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := p.TenantCounts(); got["acme"] != 2 || got["beta"] != 1 {
		t.Fatalf("sessions per tenant %v, want acme 2, beta 1", got)
	}
}

// bareSession is a session with no peer, for the pool's bookkeeping at a
// scale where real children would cost minutes (the policy itself is
// checked against real children above).
func bareSession() *Session {
	s := &Session{dead: make(chan struct{})}
	s.deadCtx, s.deadCancel = context.WithCancel(context.Background())
	return s
}

// TestPoolFairBoundedUnderFlood: 20,000 sessions through a pool of 32,
// from acme (flooding, half of them) and four tenants opening threads
// too: beta's one session survives the whole flood (it is never the
// largest); then 10,000 one-shot tenants (more tenants than sessions, so
// the ties go to the least recently used): the pool never holds more than
// 32 sessions nor 32 tenant records, and the bookkeeping stays flat.
func TestPoolFairBoundedUnderFlood(t *testing.T) {
	p := NewPool(32, 0, time.Millisecond)
	defer p.Close()
	ctx := context.Background()
	dial := func(context.Context) (*Session, error) { return bareSession(), nil }
	quiet := ScopeKey{Server: "notes", Tenant: "beta", Subject: "bob"}
	bob, rel, _ := p.Acquire(ctx, quiet, dial)
	rel()
	check := func(i int) {
		t.Helper()
		p.mu.Lock()
		n, nt := p.lru.Len(), len(p.tenants)
		p.mu.Unlock()
		if n > 32 || nt > 32 {
			t.Fatalf("after %d sessions: %d held, %d tenant records (cap 32)", i, n, nt)
		}
	}
	for i := range 20000 {
		k := ScopeKey{Server: "scratch", Tenant: fmt.Sprint("t", (i/2)%4), Subject: "u", Thread: fmt.Sprint(i)}
		if i%2 == 0 {
			k.Tenant = "acme"
		}
		_, rel, err := p.Acquire(ctx, k, dial)
		if err != nil {
			t.Fatal(err)
		}
		rel()
		check(i)
	}
	if s, rel, _ := p.Acquire(ctx, quiet, dial); s != bob {
		t.Fatal("bob's session was evicted by tenants holding more than him")
	} else {
		rel()
	}
	if got := p.TenantCounts(); got["beta"] != 1 || got["acme"] > 8 {
		t.Fatalf("sessions per tenant %v: beta must keep 1, acme at most its share", got)
	}
	var ms runtime.MemStats
	heap := func() uint64 { runtime.GC(); runtime.ReadMemStats(&ms); return ms.HeapAlloc }
	var h0 uint64
	for i := range 10000 {
		_, rel, err := p.Acquire(ctx, ScopeKey{Server: "scratch", Tenant: fmt.Sprint("one-shot-", i), Subject: "u"}, dial)
		if err != nil {
			t.Fatal(err)
		}
		rel()
		check(i)
		if i == 1000 {
			h0 = heap()
		}
	}
	p.cw.Wait()
	if h1 := heap(); h1 > h0+1<<20 {
		t.Fatalf("heap grew from %d to %d bytes over the flood", h0, h1)
	}
}

// TestPoolFairWithinTenant: inside the tenant that pays, the user holding
// the most sessions gives up their oldest one; carol's single session of
// acme survives alice's flood of acme threads.
func TestPoolFairWithinTenant(t *testing.T) {
	p := NewPool(4, 0, time.Millisecond)
	defer p.Close()
	ctx := context.Background()
	dial := func(context.Context) (*Session, error) { return bareSession(), nil }
	carolKey := ScopeKey{Server: "notes", Tenant: "acme", Subject: "carol"}
	carol, rel, _ := p.Acquire(ctx, carolKey, dial)
	rel()
	for i := range 100 {
		_, rel, err := p.Acquire(ctx, ScopeKey{Server: "scratch", Tenant: "acme", Subject: "alice", Thread: fmt.Sprint(i)}, dial)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	if s, rel, _ := p.Acquire(ctx, carolKey, dial); s != carol {
		t.Fatal("carol's session was evicted by alice's flood")
	} else {
		rel()
	}
	var threads []string
	for _, k := range p.Keys() {
		if k.Subject == "alice" {
			threads = append(threads, k.Thread)
		}
	}
	if fmt.Sprint(threads) != "[99 98 97]" {
		t.Fatalf("alice's threads kept %v, want her three most recent", threads)
	}
}

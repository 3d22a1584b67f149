package runtimeassembly

import (
	"context"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// watchState tracks the catalog and policy streams. Cached assembly results
// are used only while both streams are live: a cache entry is keyed by the
// catalog generation and the policy version, and a dead stream disables the
// cache (every assembly then asks the upstreams afresh).
type watchState struct {
	mu            sync.Mutex
	catalogLive   bool
	catalogGen    uint64
	policyLive    bool
	policyVersion int64
	tools         []*catalogv1.Tool // catalog tool list at catalogGen; nil = not fetched
	// hashes memoises the catalog's hash of a deferred set at catalogGen
	// (key: SHA-256 of the sorted names), so a policy change that leaves
	// the deferred set unchanged needs no GetCatalog call.
	hashes map[string]string
}

// memoHash returns the memoised hash of a deferred set at the current
// generation, if the catalog stream is live.
func (w *watchState) memoHash(key string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.hashes[key]
	return h, ok && w.catalogLive
}

// putHash memoises a hash computed at generation gen.
func (w *watchState) putHash(gen uint64, key, hash string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.catalogGen != gen || !w.catalogLive {
		return
	}
	if w.hashes == nil || len(w.hashes) > 1024 {
		w.hashes = map[string]string{}
	}
	w.hashes[key] = hash
}

// cacheKey returns the generation part of an assembly cache key, and false
// when caching is off (a stream is down).
func (w *watchState) cacheKey() (gen uint64, policy int64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.catalogGen, w.policyVersion, w.catalogLive && w.policyLive
}

func (w *watchState) catalogChanged(live bool) {
	w.mu.Lock()
	w.catalogGen++
	w.catalogLive = live
	w.tools = nil
	w.hashes = nil
	w.mu.Unlock()
}

// invalidate drops the cached tool list and bumps the generation (the
// catalog moved without an event reaching us yet); liveness is unchanged.
func (w *watchState) invalidate() {
	w.mu.Lock()
	w.catalogGen++
	w.tools = nil
	w.hashes = nil
	w.mu.Unlock()
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// watchCatalog follows WatchCatalog; every CHANGED event (and every
// reconnect) bumps the catalog generation. It reconnects with backoff
// capped at 5 s.
func (s *Builder) WatchCatalog(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		stream, err := s.catalog.WatchCatalog(ctx, &catalogv1.WatchCatalogRequest{})
		if err == nil {
			for {
				ev, rerr := stream.Recv()
				if rerr != nil {
					break
				}
				delay = 100 * time.Millisecond
				if ev.GetEvent().GetType() != catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_STATE {
					s.watch.catalogChanged(true)
				}
			}
		}
		s.watch.catalogChanged(false)
		if !sleepCtx(ctx, delay) {
			return
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// watchPolicy follows WatchPolicy and records the policy version.
func (s *Builder) WatchPolicy(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		stream, err := s.authz.WatchPolicy(ctx, &authzv1.WatchPolicyRequest{})
		if err == nil {
			for {
				m, rerr := stream.Recv()
				if rerr != nil {
					break
				}
				delay = 100 * time.Millisecond
				s.watch.mu.Lock()
				s.watch.policyVersion = m.GetPolicyVersion()
				s.watch.policyLive = true
				s.watch.mu.Unlock()
			}
		}
		s.watch.mu.Lock()
		s.watch.policyLive = false
		s.watch.mu.Unlock()
		if !sleepCtx(ctx, delay) {
			return
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// assemblyCache holds base assemblies (steps 1–4 of docs/architecture.md §3.1) per
// principal × agent × catalog generation × policy version, with a TTL
// bounding how long skill listings may be stale.
type assemblyCache struct {
	c *lru.Cache[string, *cachedBase]
}

type cachedBase struct {
	base    *Base
	expires time.Time
}

const cacheTTL = 30 * time.Second

func newAssemblyCache(n int) *assemblyCache {
	if n <= 0 {
		return &assemblyCache{}
	}
	c, _ := lru.New[string, *cachedBase](n)
	return &assemblyCache{c: c}
}

func (a *assemblyCache) get(key string, now time.Time) *Base {
	if a.c == nil {
		return nil
	}
	e, ok := a.c.Get(key)
	if !ok || now.After(e.expires) {
		return nil
	}
	return e.base
}

func (a *assemblyCache) put(key string, b *Base, now time.Time) {
	if a.c != nil {
		a.c.Add(key, &cachedBase{base: b, expires: now.Add(cacheTTL)})
	}
}

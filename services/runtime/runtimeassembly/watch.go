package runtimeassembly

import (
	"container/list"
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
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
	told          int64             // the newest policy version ever announced
	tools         []*catalogv1.Tool // catalog tool list at catalogGen; nil = not fetched
	// cands are the assembly candidates of tools (same index; nil for a
	// held tool), built once per catalog generation and shared by every
	// base assembly of it: a policy change re-decides authz only
	// (docs/decisions/0149-assembly-shared-per-catalog-generation.md).
	cands []*Tool
	// views memoises, per deferred set (view key) at catalogGen, its
	// names, map and rendered <available-deferred-tools> section; bounded
	// by viewMemoMax.
	views map[string]*deferredView
	// forms memoises bound forms of tools at catalogGen (bindMemo).
	forms *formMemo
	// hashes memoises the catalog's hash of a deferred set at catalogGen
	// (key: SHA-256 of the sorted names), so a policy change that leaves
	// the deferred set unchanged needs no GetCatalog call.
	hashes map[string]string
	// streamAddr is the catalog replica of the watch stream ("" = none or
	// a connection without placement); restream ends that stream, so that
	// it reconnects on the replica the view key now goes to.
	streamAddr string
	restream   context.CancelFunc
}

// sameReplica reports whether addr, the replica that answered a view read,
// is the watch stream's (or either is unknown); when not, it ends the
// stream so it follows the view key to addr's replica.
func (w *watchState) sameReplica(addr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if addr == "" || w.streamAddr == "" || addr == w.streamAddr {
		return true
	}
	if w.restream != nil {
		w.restream()
	}
	return false
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

// toldVersion is the newest policy version the policy stream announced (0
// before the first).
func (w *watchState) toldVersion() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.told
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
	w.tools, w.cands, w.views, w.forms = nil, nil, nil, nil
	w.hashes = nil
	w.mu.Unlock()
}

// invalidate drops the cached tool list and bumps the generation (the
// catalog moved without an event reaching us yet); liveness is unchanged.
func (w *watchState) invalidate() {
	w.mu.Lock()
	w.catalogGen++
	w.tools, w.cands, w.views, w.forms = nil, nil, nil, nil
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
		sctx, cancel := context.WithCancel(ctx)
		sctx, pl := grpcx.WithPlacementKey(sctx, s.viewKey)
		stream, err := s.catalog.WatchCatalog(sctx, &catalogv1.WatchCatalogRequest{})
		if err == nil {
			if _, err := stream.Header(); err == nil { // picked and answered
				s.watch.mu.Lock()
				s.watch.streamAddr, s.watch.restream = pl.Addr(), cancel
				s.watch.mu.Unlock()
			}
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
		cancel()
		s.watch.mu.Lock()
		s.watch.streamAddr, s.watch.restream = "", nil
		s.watch.mu.Unlock()
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
				s.watch.told = max(s.watch.told, m.GetPolicyVersion())
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
// bounding how long skill listings may be stale. It is an LRU bounded both
// by entries and by the estimated bytes the entries keep alive
// (runtime.cache_entries, runtime.cache_bytes; docs/decisions/0142-assembly-cache-bounded-by-bytes.md).
type assemblyCache struct {
	mu       sync.Mutex
	gen      uint64 // catalog generation and policy version of the entries
	policy   int64
	max      int
	maxBytes int64
	bytes    int64
	order    *list.List // front = most recently used; values *cachedBase
	byKey    map[string]*list.Element
}

type cachedBase struct {
	key     string
	base    *Base
	size    int64
	expires time.Time
}

const cacheTTL = 30 * time.Second

// DefaultCacheBytes is the default of runtime.cache_bytes.
const DefaultCacheBytes = 64 << 20

func newAssemblyCache(n int, maxBytes int64) *assemblyCache {
	if n <= 0 {
		return &assemblyCache{}
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &assemblyCache{max: n, maxBytes: maxBytes, order: list.New(), byKey: map[string]*list.Element{}}
}

func (a *assemblyCache) get(key string, now time.Time) *Base {
	if a.order == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	el, ok := a.byKey[key]
	if !ok {
		return nil
	}
	e := el.Value.(*cachedBase)
	if now.After(e.expires) {
		a.removeLocked(el)
		return nil
	}
	a.order.MoveToFront(el)
	return e.base
}

// put stores b under key for catalog generation gen and policy version pv.
// Entries of another generation or version can never be hit again (both are
// part of every key), so they are dropped first: a catalog or policy change
// frees the old assemblies, and the tool listings they reference, at once.
func (a *assemblyCache) put(key string, b *Base, gen uint64, pv int64, now time.Time) {
	if a.order == nil {
		return
	}
	size := b.estimatedBytes()
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen != a.gen || pv != a.policy {
		a.order.Init()
		clear(a.byKey)
		a.bytes, a.gen, a.policy = 0, gen, pv
	}
	if el, ok := a.byKey[key]; ok {
		a.removeLocked(el)
	}
	if size > a.maxBytes {
		return // larger than the whole budget: never cached
	}
	a.byKey[key] = a.order.PushFront(&cachedBase{key: key, base: b, size: size, expires: now.Add(cacheTTL)})
	a.bytes += size
	for a.order.Len() > a.max || a.bytes > a.maxBytes {
		a.removeLocked(a.order.Back())
	}
}

func (a *assemblyCache) removeLocked(el *list.Element) {
	e := a.order.Remove(el).(*cachedBase)
	delete(a.byKey, e.key)
	a.bytes -= e.size
}

// usage returns the entries and estimated bytes held.
func (a *assemblyCache) usage() (entries int, bytes int64) {
	if a.order == nil {
		return 0, 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.order.Len(), a.bytes
}

// estimatedBytes estimates the heap a cached Base keeps alive beyond the
// catalog listing of its generation: its Tool structs, maps, slices and
// rendered sections. Names, descriptions and parameter schemas are shared
// with that listing (held by watchState while the generation is current),
// and entries of older generations are dropped by put, so they are not
// counted.
func (b *Base) estimatedBytes() int64 {
	const perTool, perEntry = 160, 48 // Tool struct, map and slice slots
	n := int64(1024 + len(b.DeferredText) + len(b.SkillsText) + len(b.Hints))
	n += perTool * int64(len(b.Tools))
	n += perEntry * int64(len(b.ByName)+len(b.Deferred)+len(b.DeferredNames)+len(b.Bound)+len(b.Routes))
	n += int64(proto.Size(b.Report))
	for _, sk := range b.Skills {
		n += perEntry + 2*int64(proto.Size(sk))
	}
	return n
}

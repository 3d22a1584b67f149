package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
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
func (s *Server) watchCatalog(ctx context.Context) {
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
func (s *Server) watchPolicy(ctx context.Context) {
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

// retentionLoop runs retention (runtime.retention, ARCHITECTURE §6) every
// sweep_interval while any of its periods is set.
func (s *Server) retentionLoop(ctx context.Context) {
	r := s.cfg.Retention
	if r.Threads <= 0 && r.Runs <= 0 && r.Messages <= 0 && r.Artifacts <= 0 {
		return
	}
	for {
		s.sweepRetention(ctx, r, s.now())
		if !sleepCtx(ctx, r.SweepInterval) {
			return
		}
	}
}

// sweepRetention is one retention pass at now: threads idle longer than
// r.Threads (with their workspaces), finished runs started longer than
// r.Runs ago, whole turns of messages older than r.Messages
// (runtimestore.Store.PurgeMessagesBefore), and artifacts whose file was
// last modified longer than r.Artifacts ago (file and entry). A zero period
// keeps that kind forever. Failures are logged; the next pass retries.
func (s *Server) sweepRetention(ctx context.Context, r RetentionConfig, now time.Time) {
	warn := func(kind string, err error) {
		if err != nil && ctx.Err() == nil {
			s.log.Warn("retention sweep failed", "kind", kind, "error", err)
		}
	}
	if r.Threads > 0 {
		ids, err := s.store.PurgeThreadsBefore(ctx, now.Add(-r.Threads))
		warn("threads", err)
		for _, id := range ids {
			_ = os.RemoveAll(s.threadDir(id))
		}
		if len(ids) > 0 {
			s.log.Info("retention removed threads", "threads", len(ids))
		}
	}
	if r.Runs > 0 {
		n, err := s.store.PurgeRunsBefore(ctx, now.Add(-r.Runs))
		warn("runs", err)
		if n > 0 {
			s.log.Info("retention removed runs", "runs", n)
		}
	}
	if r.Messages > 0 {
		n, err := s.store.PurgeMessagesBefore(ctx, now.Add(-r.Messages))
		warn("messages", err)
		if n > 0 {
			s.log.Info("retention removed messages", "messages", n)
		}
	}
	if r.Artifacts > 0 {
		n, err := s.purgeArtifacts(ctx, now.Add(-r.Artifacts))
		warn("artifacts", err)
		if n > 0 {
			s.log.Info("retention removed artifacts", "artifacts", n)
		}
	}
}

// purgeArtifacts removes, in every thread with a workspace, the artifacts
// whose file was last modified before cutoff (or no longer exists): the
// file (through os.Root, so a symlink cannot reach outside the thread) and
// the thread's entry. The entry removal does not count as activity
// (runtimestore.NoTouch), so it never delays thread retention.
func (s *Server) purgeArtifacts(ctx context.Context, cutoff time.Time) (int, error) {
	dirs, err := os.ReadDir(filepath.Join(s.dataDir, "threads"))
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, d := range dirs {
		if ctx.Err() != nil {
			return total, ctx.Err()
		}
		id := d.Name()
		th, err := s.store.GetThread(ctx, id)
		if err != nil || len(th.Proto.GetArtifacts()) == 0 {
			continue
		}
		root, err := os.OpenRoot(filepath.Join(s.threadDir(id), "user-data"))
		if err != nil {
			continue
		}
		gone := map[string]bool{}
		for _, a := range th.Proto.GetArtifacts() {
			_, rel, err := cleanVirtual(a.GetPath(), false)
			if err != nil {
				continue
			}
			fi, err := root.Lstat(rel)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				gone[a.GetPath()] = true
			case err == nil && fi.ModTime().Before(cutoff):
				if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, fmt.Errorf("thread %s: %s: %w", id, a.GetPath(), err))
					continue
				}
				gone[a.GetPath()] = true
			}
		}
		_ = root.Close()
		if len(gone) == 0 {
			continue
		}
		_, err = s.store.UpdateThread(runtimestore.NoTouch(ctx), id, func(t *runtimestore.Thread) ([]*runtimev1.Message, error) {
			t.Proto.Artifacts = slices.DeleteFunc(t.Proto.Artifacts, func(a *runtimev1.Artifact) bool { return gone[a.GetPath()] })
			return nil, nil
		})
		if err != nil && !errors.Is(err, runtimestore.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		total += len(gone)
	}
	return total, errors.Join(errs...)
}

func (s *Server) threadDir(id string) string { return filepath.Join(s.dataDir, "threads", id) }

// assemblyCache holds base assemblies (steps 1–4 of ARCHITECTURE §3.1) per
// principal × agent × catalog generation × policy version, with a TTL
// bounding how long skill listings may be stale.
type assemblyCache struct {
	c *lru.Cache[string, *cachedBase]
}

type cachedBase struct {
	base    *baseAssembly
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

func (a *assemblyCache) get(key string, now time.Time) *baseAssembly {
	if a.c == nil {
		return nil
	}
	e, ok := a.c.Get(key)
	if !ok || now.After(e.expires) {
		return nil
	}
	return e.base
}

func (a *assemblyCache) put(key string, b *baseAssembly, now time.Time) {
	if a.c != nil {
		a.c.Add(key, &cachedBase{base: b, expires: now.Add(cacheTTL)})
	}
}

// keyedLocks serialises work per key (read-before-write gate + write per
// thread and path, deerflow-reference §6.2).
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyedLock{}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

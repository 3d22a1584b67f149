package catalog

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"

	"github.com/toolplane/toolplane/internal/search"
)

// Candidate views (docs/decisions/0144-candidate-views.md): a service
// caller that searches the same candidate set again and again (the
// runtime's tool_search over a thread's deferred, authorized tools) sends
// the set once and then only its id. The id is content-addressed — the
// SHA-256 of the sorted, de-duplicated names — so it stands for exactly
// one set whatever the catalog generation, and two principals with the same
// visible set share one view. The subset hash of a view is computed once
// per catalog snapshot. Correctness never depends on the cache: an id the
// catalog does not know is answered with candidate_view_unknown and the
// caller resends the names.
//
// Names resolve per namespace (docs/decisions/0106-per-tenant-name-namespaces.md):
// a view belongs to the namespace it was sent in (nsOf: the tenant of the
// principal the caller acts for; "" for a caller that sees every tenant),
// which is part of its id, and it is used only in that namespace.

// maxViewIDLen bounds SearchToolsRequest.candidate_view.
const maxViewIDLen = 128

// viewOverhead approximates the bytes of a view beyond its names (entry,
// list element, map slot, id).
const viewOverhead = 256

// candidateView is one cached candidate set.
type candidateView struct {
	id    string
	ns    string   // namespace (nsOf)
	names []string // sorted, unique
	bytes int64

	mu   sync.Mutex
	snap *snapshot // the snapshot hash was computed at
	hash string
	set  *search.CandidateSet // the names resolved against one index snapshot
	// setSnap is the catalog snapshot set's index keys were resolved at;
	// resolved the number of names that resolved there.
	setSnap  *snapshot
	resolved int
}

// nsOf is the namespace of a viewer's candidate views.
func nsOf(v viewer) string {
	if v.all {
		return ""
	}
	return v.tenant
}

// setAt returns the view's names resolved in the viewer's namespace at
// snap against the search index snapshot ixs, and how many resolved;
// resolved at most once per pair of snapshots.
func (cv *candidateView) setAt(ixs *search.Snapshot, snap *snapshot, v viewer) (*search.CandidateSet, int) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if !cv.set.Of(ixs) || cv.setSnap != snap {
		keys := snap.indexKeys(v, cv.names)
		cv.set, cv.setSnap, cv.resolved = ixs.CandidateSet(keys), snap, len(keys)
	}
	return cv.set, cv.resolved
}

// hashAt returns the catalog hash of the view's set at snap in the
// viewer's namespace, computed at most once per snapshot.
func (cv *candidateView) hashAt(snap *snapshot, v viewer) string {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.snap != snap {
		cv.hash, _, _, _ = snap.subsetHash(v, cv.names)
		cv.snap = snap
	}
	return cv.hash
}

// viewCache is an LRU of candidate views bounded by bytes.
type viewCache struct {
	mu   sync.Mutex
	max  int64
	used int64
	ll   *list.List // front = most recently used; values *candidateView
	byID map[string]*list.Element
}

func newViewCache(maxBytes int64) *viewCache {
	return &viewCache{max: maxBytes, ll: list.New(), byID: map[string]*list.Element{}}
}

// canonicalNames returns names sorted and de-duplicated (a copy; names is
// not modified).
func canonicalNames(names []string) []string {
	out := slices.Clone(names)
	if !slices.IsSorted(out) {
		slices.Sort(out)
	}
	return slices.Compact(out)
}

// viewIDOf returns the id of a canonical (sorted, unique) name set in
// namespace ns: the hex SHA-256 of the names, each followed by a NUL byte,
// preceded for a tenant's namespace by the tenant and a 0x01 byte.
func viewIDOf(ns string, canonical []string) string {
	h := sha256.New()
	if ns != "" {
		h.Write([]byte(ns))
		h.Write([]byte{1})
	}
	for _, n := range canonical {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// get returns the view with id, or nil.
func (c *viewCache) get(id string) *candidateView {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[id]
	if !ok {
		return nil
	}
	c.ll.MoveToFront(el)
	return el.Value.(*candidateView)
}

// put returns the view of the candidate names, adding it when new. A set
// larger than the whole bound is returned uncached (its id is still
// correct; a later request with that id falls back to the names).
// indexed is the number of indexed tools: a view also holds its names
// resolved against the index (one byte per indexed tool).
func (c *viewCache) put(ns string, names []string, indexed int) *candidateView {
	canon := canonicalNames(names)
	id := viewIDOf(ns, canon)
	if v := c.get(id); v != nil {
		return v
	}
	n := int64(viewOverhead + 16*len(canon) + indexed)
	for _, s := range canon {
		n += int64(len(s))
	}
	v := &candidateView{id: id, ns: ns, names: canon, bytes: n}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok { // added concurrently
		c.ll.MoveToFront(el)
		return el.Value.(*candidateView)
	}
	if n > c.max {
		return v
	}
	for c.used+n > c.max {
		old := c.ll.Back()
		ov := old.Value.(*candidateView)
		c.ll.Remove(old)
		delete(c.byID, ov.id)
		c.used -= ov.bytes
	}
	c.byID[id] = c.ll.PushFront(v)
	c.used += n
	return v
}

// stats returns the number of views and their bytes.
func (c *viewCache) stats() (views int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len(), c.used
}

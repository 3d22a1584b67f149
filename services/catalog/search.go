package catalog

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/search"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
)

// searchIndex keeps an internal/search Index in step with the catalog
// snapshots, incrementally: content changes are upserts, removals are
// removes, additions at the end are upserts; only a reordering of existing
// tools rebuilds the order (Replace, which still reuses unchanged vectors).
// Searches never wait for an update and never see a half-built index (the
// library swaps immutable snapshots).
//
// With a remote embedder (catalog.search.embedder) an update whose tool
// vectors cannot be fetched still applies lexically; those tools are left
// unrecorded in keys, so the next update (any catalog change, or the retry
// every embedRetryInterval) asks for their vectors again, and SEMANTIC/AUTO
// meanwhile rank the tools that have one.
type searchIndex struct {
	mu  sync.Mutex
	ix  *search.Index
	log *slog.Logger
	// docErr is the embedder error of the last update that could not embed
	// every changed tool; nil once an update embeds them all.
	docErr atomic.Pointer[error]
	order  []string
	keys   map[string]docKey
}

// docKey identifies the indexed content of one document: the cached base
// (replaced whenever the server's tools change), the exposed name and the
// server description. Documents are keyed by entry.indexKey: one index
// holds every namespace, a tenant's tools under their name and tenant
// (docs/decisions/0106-per-tenant-name-namespaces.md).
type docKey struct {
	b          *base
	name, desc string
}

// init creates the index; a nil embedder selects the built-in static vectors.
func (si *searchIndex) init(emb search.Embedder, log *slog.Logger) {
	si.ix = search.NewIndex(search.Options{Embedder: emb})
	si.keys = map[string]docKey{}
	si.log = log
}

func docOf(e *entry, serverDesc map[string]string) search.Document {
	names, descs := search.ParamsFromSchema(e.b.def.InputSchema)
	key := ""
	if e.scope != globalScope {
		key = e.indexKey()
	}
	return search.Document{Name: e.tool.Name, Key: key, OriginalName: e.original, Server: e.tool.Server,
		ServerDescription: serverDesc[e.server], Title: e.tool.Title, Description: e.tool.Description,
		ParamNames: names, ParamDescriptions: descs, Keywords: e.tool.GetRouting().GetKeywords()}
}

func (si *searchIndex) update(snap *snapshot) {
	si.mu.Lock()
	defer si.mu.Unlock()
	serverDesc := map[string]string{}
	for _, st := range snap.statuses {
		serverDesc[st.Name] = st.Config.Description
	}
	order := make([]string, len(snap.tools))
	keys := make(map[string]docKey, len(snap.tools))
	var changed []search.Document
	for i, e := range snap.tools {
		id := e.indexKey()
		order[i] = id
		k := docKey{e.b, e.tool.Name, serverDesc[e.server]}
		keys[id] = k
		if si.keys[id] != k {
			changed = append(changed, docOf(e, serverDesc))
		}
	}
	var removed []string
	for _, n := range si.order {
		if _, ok := keys[n]; !ok {
			removed = append(removed, n)
		}
	}
	// The surviving old names must keep their relative order, and new names
	// must come after them, for the incremental path to keep catalog order.
	kept := slices.DeleteFunc(slices.Clone(si.order), func(n string) bool { _, ok := keys[n]; return !ok })
	incremental := len(kept) <= len(order) && slices.Equal(kept, order[:len(kept)])
	ctx := withDocs(context.Background())
	var err error
	if incremental {
		si.ix.Remove(removed...)
		err = si.ix.Upsert(ctx, changed...)
	} else {
		changed = make([]search.Document, len(snap.tools))
		for i, e := range snap.tools {
			changed[i] = docOf(e, serverDesc)
		}
		err = si.ix.Replace(ctx, changed)
	}
	switch {
	case errors.Is(err, search.ErrEmbedding):
		// Applied lexically (search.Index.Upsert); forget these documents so
		// the next update retries their vectors (unchanged ones that already
		// have a vector are reused, not re-embedded).
		si.log.Warn("catalog: tool vectors unavailable; retrying on the next catalog change or within "+embedRetryInterval.String(),
			"tools", len(changed), "err", err)
		for _, d := range changed {
			delete(keys, d.ID())
		}
		si.docErr.Store(&err)
	case err != nil:
		si.log.Warn("catalog: search index update rejected", "err", err)
	default:
		si.docErr.Store(nil)
	}
	si.order, si.keys = order, keys
}

func searchMode(m catalogv1.SearchMode) search.Mode {
	switch m {
	case catalogv1.SearchMode_SEARCH_MODE_REGEX:
		return search.ModeRegex
	case catalogv1.SearchMode_SEARCH_MODE_BM25:
		return search.ModeBM25
	case catalogv1.SearchMode_SEARCH_MODE_SEMANTIC:
		return search.ModeSemantic
	}
	return search.ModeAuto
}

// SearchTools ranks tools for a query (docs/search.md). limit <= 0 is the default
// (5); callers that are not services are capped at 5. The hash is over the
// candidate set (or every tool). No match is an empty result. A candidate
// view (views.go) stands for a candidate set sent earlier; an unknown one is
// answered with candidate_view_unknown and no hits.
//
// Errors: an invalid query is INVALID_ARGUMENT (INVALID_QUERY, metadata
// "field"). When a remote embedder (catalog.search.embedder) cannot embed the
// query, SEMANTIC fails with UNAVAILABLE (UPSTREAM_ERROR, the embedder's
// error in the message): retryable, since the request was valid. So does a
// ranked SEMANTIC query without hits while some tool vectors could not be
// fetched ("tool vectors unavailable"). AUTO never fails for the embedder:
// it answers from BM25F alone (search.Response.Degraded, logged at debug
// level).
func (s *Server) SearchTools(ctx context.Context, req *catalogv1.SearchToolsRequest) (*catalogv1.SearchToolsResponse, error) {
	snap := s.snap.Load()
	limit := int(req.GetLimit())
	if limit <= 0 {
		limit = s.cfg.Search.DefaultLimit
	}
	if !auth.IsService(ctx) && limit > s.cfg.Search.MaxLimitNonService {
		limit = s.cfg.Search.MaxLimitNonService
	}
	mode := req.GetMode()
	if mode == catalogv1.SearchMode_SEARCH_MODE_UNSPECIFIED {
		mode = catalogv1.SearchMode_SEARCH_MODE_AUTO
	}
	sreq := search.Request{Mode: searchMode(mode), Limit: limit}
	ixs := s.index.ix.Snapshot()
	v := viewerOf(ctx)
	// Candidate views (views.go) are kept for service callers only, so a
	// user cannot evict the runtime's views; anyone else gets no id back
	// and an unknown id answer. A view belongs to the namespace it was
	// sent in (views.go, nsOf).
	var view *candidateView
	var names []string // the candidates' exposed names; nil = every tool
	switch {
	case req.GetCandidates() != nil:
		names = req.GetCandidates().GetValues()
		if names == nil {
			names = []string{}
		}
		if auth.IsService(ctx) {
			view = s.views.put(nsOf(v), names, ixs.Len())
			names = view.names
			s.met.observeView("sent")
		}
	case req.GetCandidateView() != "":
		if auth.IsService(ctx) {
			view = s.views.get(req.GetCandidateView())
		}
		if view == nil || view.ns != nsOf(v) {
			s.met.observeView("unknown")
			s.log.DebugContext(ctx, "catalog: unknown candidate view; the caller resends the names")
			return &catalogv1.SearchToolsResponse{Mode: mode, CandidateViewUnknown: true}, nil
		}
		s.met.observeView("hit")
		names = view.names
	}
	// Candidates are the index keys of the named tools in the caller's
	// namespace, ranked among what its tenant sees (visibility.go), so
	// other tenants' tools neither show nor take places in the limit; a
	// name only another tenant holds matches nothing, as an unknown name.
	whole := false
	switch {
	case view != nil:
		var n int
		sreq.CandidateSet, n = view.setAt(ixs, snap, v)
		// The view's precomputed set and hash stand for its names only
		// while every name resolved.
		whole = n == len(view.names)
		if !whole {
			sreq.CandidateSet = nil
			sreq.Candidates = snap.indexKeys(v, names)
		}
	case names != nil:
		sreq.Candidates = snap.indexKeys(v, names)
	case !v.all && snap.scoped:
		names = snap.visibleNames(v)
		sreq.Candidates = snap.indexKeys(v, names)
	}
	sreq.Query = snap.resolveSelect(v, req.GetQuery(), names)
	res, err := ixs.Search(ctx, sreq)
	if err != nil {
		var qe *search.QueryError
		if errors.As(err, &qe) {
			return nil, statusErr(codes.InvalidArgument, catalogv1.ErrorReason_ERROR_REASON_INVALID_QUERY,
				map[string]string{"field": qe.Field}, "%s: %s", qe.Field, qe.Reason)
		}
		if errors.Is(err, search.ErrEmbedding) {
			return nil, statusErr(codes.Unavailable, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR, nil, "semantic search: %v", err)
		}
		return nil, err
	}
	if len(res.Results) == 0 && sreq.Mode == search.ModeSemantic && res.Query.Kind == search.KindRanked {
		if e := s.index.docErr.Load(); e != nil {
			return nil, statusErr(codes.Unavailable, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR, nil,
				"semantic search: tool vectors unavailable: %v", *e)
		}
	}
	if res.Degraded != "" {
		s.log.DebugContext(ctx, "catalog: search ran lexical-only", "mode", mode.String(), "reason", res.Degraded)
	}
	out := &catalogv1.SearchToolsResponse{Truncated: res.Truncated, Mode: mode}
	budget, used := s.pageBudget(), 0
	for _, r := range res.Results {
		e, ok := snap.byIndexKey(v, r.Key)
		if !ok {
			continue // index one update ahead of or behind this snapshot
		}
		h := &catalogv1.SearchHit{Tool: v.tool(snap, e), Score: r.Score, MatchedFields: r.Matched}
		if n := proto.Size(h); len(out.Hits) > 0 && used+n > budget {
			out.Truncated = true // bounded by bytes as well as count
			break
		} else {
			used += n
		}
		out.Hits = append(out.Hits, h)
	}
	switch {
	case whole:
		out.CatalogHash, out.CandidateView = view.hashAt(snap, v), view.id
	case names != nil:
		out.CatalogHash, _, _, _ = snap.subsetHash(v, names)
		if view != nil {
			out.CandidateView = view.id
		}
	default:
		out.CatalogHash = snap.viewerHash(v)
	}
	return out, nil
}

// indexKeys returns the search index keys of the tools names stand for in
// the viewer's namespace, leaving out names unknown there. Without
// tenant-scoped servers every key is the name itself.
func (snap *snapshot) indexKeys(v viewer, names []string) []string {
	if !snap.scoped {
		return names
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if e, ok := snap.lookup(v, n); ok {
			out = append(out, e.indexKey())
		}
	}
	return out
}

// byIndexKey returns the ACTIVE tool of a search index key the viewer sees.
func (snap *snapshot) byIndexKey(v viewer, key string) (*entry, bool) {
	k := nsKey{globalScope, key}
	if i := strings.IndexByte(key, 0); i >= 0 {
		k = nsKey{key[i+1:], key[:i]}
	}
	e, ok := snap.active.exact(k)
	if !ok || !v.seesEntry(e) {
		return nil, false
	}
	return e, true
}

// resolveSelect rewrites the names of a `select:` query to exposed names
// (docs/architecture.md §7), in the viewer's namespace: an exposed name is
// kept; otherwise `server/tool` (the original pair), the bare original
// tool name when exactly one tool the viewer sees has it, and a `_`/`-`
// spelling variant of an exposed name when exactly one such tool matches
// it resolve to that tool's exposed name. Unresolved names are kept (they
// match nothing). Other query forms are returned unchanged; parsing stays
// internal/search's. With candidates (nil = every tool), a name several
// tools share resolves when exactly one of them is a candidate.
func (snap *snapshot) resolveSelect(v viewer, q string, candidates []string) string {
	pq, err := search.ParseQuery(q)
	if err != nil || pq.Kind != search.KindSelect {
		return q
	}
	changed := false
	names := make([]string, len(pq.Names))
	for i, n := range pq.Names {
		names[i] = n
		if r := snap.resolveName(v, n, candidates); r != "" && r != n {
			names[i], changed = r, true
		}
	}
	if !changed {
		return q
	}
	return "select:" + strings.Join(names, ",")
}

// resolveName returns the exposed name n stands for in the viewer's
// namespace, or "". An alias of a tool the viewer does not see resolves to
// nothing (its exposed name may be another tool's in the viewer's
// namespace).
func (snap *snapshot) resolveName(v viewer, n string, candidates []string) string {
	if _, ok := snap.lookup(v, n); ok {
		return n
	}
	al := snap.aliases()
	if i := strings.IndexByte(n, '/'); i > 0 {
		if e, ok := al.byPair[catalognames.Key{Server: n[:i], Tool: n[i+1:]}]; ok {
			if v.seesEntry(e) {
				return e.tool.Name
			}
			return ""
		}
	}
	if e, ok := al.byOriginal[n]; ok {
		if e != ambiguous {
			if v.seesEntry(e) {
				return e.tool.Name
			}
			return ""
		}
		return snap.uniqueAmong(v, candidates, func(e *entry) bool { return e.original == n })
	}
	if e, ok := al.byFolded[foldName(n)]; ok {
		if e != ambiguous {
			if v.seesEntry(e) {
				return e.tool.Name
			}
			return ""
		}
		f := foldName(n)
		return snap.uniqueAmong(v, candidates, func(e *entry) bool { return foldName(e.tool.Name) == f })
	}
	return ""
}

// uniqueAmong returns the exposed name of the one candidate matching match
// in the viewer's namespace ("" when none, several, or candidates is nil).
func (snap *snapshot) uniqueAmong(v viewer, candidates []string, match func(*entry) bool) string {
	found := ""
	for _, c := range candidates {
		if e, ok := snap.lookup(v, c); ok && match(e) {
			if found != "" && found != c {
				return ""
			}
			found = c
		}
	}
	return found
}

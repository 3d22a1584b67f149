package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
)

// snapshot is an immutable view of the catalog, swapped atomically.
type snapshot struct {
	tools  []*entry // config order of servers, then server order; ACTIVE tools only
	sorted []*entry // by exposed name, then scope (byte order); entry.rank indexes it
	// active resolves exposed names per namespace (nameIndex): names are
	// distinct in scope `*` plus any one tenant scope, not across tenants
	// (docs/decisions/0106-per-tenant-name-namespaces.md).
	active   nameIndex
	statuses []catalogmcp.Status
	hash     string // global hash
	at       time.Time

	// held are the tools of pinned servers that are not ACTIVE (PENDING,
	// CHANGED, REJECTED): not listed, searched, hashed, bound or callable
	// (docs/architecture.md §7); ListPendingTools shows them to admins.
	held    []*entry
	heldIdx nameIndex
	// aliases resolves the names `select:` accepts besides exposed names
	// (built on first use: most snapshots never need it).
	aliasOnce sync.Once
	alias     *aliasIndex
	// collisions and omitted per configured server; pinned servers.
	collisions map[string][]*catalogv1.NameCollision
	omitted    map[string][]*catalogv1.OmittedTool
	pinned     map[string]bool
	// renames and newCollisions are those of the rebuild that made this
	// snapshot (reported once, in its WatchCatalog event).
	renames       []*catalogv1.ToolRename
	newCollisions []*catalogv1.NameCollision
	// serverTenants maps every configured server name and every origin
	// server name of a tool to its `tenants` (nil = every tenant);
	// removedTenants and removedServerTenants keep those of the tools and
	// servers the rebuild removed, so its event is filtered per viewer
	// (visibility.go).
	serverTenants        map[string][]string
	removedTenants       map[nsKey][]string
	removedServerTenants map[string][]string
	// scoped: some server of this snapshot lists `tenants`; without one
	// every viewer sees every tool and candidate lists need no filtering.
	scoped bool
}

// entry is one tool of a snapshot. tool holds every field but the four
// Struct-valued ones (schemas, annotations, meta), which full() adds on
// first use: most tools of a large static catalog are never fetched, and
// Structs cost several times the raw JSON.
type entry struct {
	tool     *catalogv1.Tool
	server   string // configured server: the routing key
	original string
	static   bool
	canon    []byte // RFC 8785 element for the hash
	rank     int    // position in snapshot.sorted
	// scope is the namespace of the exposed name: globalScope or the one
	// tenant of the server (catalogconfig.Server.NameScope).
	scope  string
	ikey   string // indexKey, computed once
	b      *base
	pinned bool

	fullOnce sync.Once
	fullTool *catalogv1.Tool
}

// key is the entry's exposed name in its namespace.
func (e *entry) key() nsKey { return nsKey{e.scope, e.tool.Name} }

// indexKey is the entry's document id in the search index
// (search.Document.Key): the exposed name for a tool of scope `*`, the
// name, a NUL and the tenant otherwise (a NUL is in no name or tenant id).
func (e *entry) indexKey() string {
	if e.ikey != "" {
		return e.ikey
	}
	if e.scope == globalScope {
		return e.tool.Name
	}
	return e.tool.Name + "\x00" + e.scope
}

// nsKey names a tool in one namespace: scope `*` or a tenant.
type nsKey struct{ scope, name string }

// nameIndex resolves exposed names per namespace
// (docs/decisions/0106-per-tenant-name-namespaces.md): one maps a name to
// the tool of scope `*` holding it, or to the only tenant-scoped tool
// holding it, or to sharedName when tools of several tenants hold it;
// scoped holds every tenant-scoped tool. A name of scope `*` is never also
// a tenant's (catalognames.AssignScoped), so one lookup serves the common
// case.
type nameIndex struct {
	one    map[string]*entry
	scoped map[nsKey]*entry
}

// sharedName is the nameIndex.one value of a name several tenants hold.
var sharedName = &entry{}

func newNameIndex(n int) nameIndex {
	return nameIndex{one: make(map[string]*entry, n), scoped: map[nsKey]*entry{}}
}

func (ni nameIndex) add(e *entry) {
	n := e.tool.Name
	if e.scope == globalScope {
		ni.one[n] = e
		return
	}
	ni.scoped[e.key()] = e
	switch cur, ok := ni.one[n]; {
	case !ok:
		ni.one[n] = e
	case cur != sharedName && cur.scope != globalScope && cur.scope != e.scope:
		ni.one[n] = sharedName
	}
}

// get returns the tool name stands for in the viewer's namespace: the tool
// of scope `*` holding it, else the viewer's tenant's. A viewer that sees
// every tenant gets a name several tenants hold as unknown (shared says
// so): it names no one tool.
func (ni nameIndex) get(v viewer, name string) (*entry, bool) {
	e, ok := ni.one[name]
	if !ok {
		return nil, false
	}
	if e == sharedName {
		if v.tenant == "" {
			return nil, false
		}
		if e, ok = ni.scoped[nsKey{v.tenant, name}]; !ok {
			return nil, false
		}
	}
	if !v.seesEntry(e) {
		return nil, false
	}
	return e, true
}

// crossShare marks as shared, in both indexes, a name one tenant holds
// ACTIVE and another holds for review, so that for a caller of every
// tenant it names no one tool in either (nameIndex.get).
func crossShare(a, h nameIndex) {
	for n, he := range h.one {
		ae, ok := a.one[n]
		if !ok || ae == sharedName || he == sharedName || ae.scope == globalScope || he.scope == globalScope {
			if ok && ae != sharedName && he == sharedName && ae.scope != globalScope {
				a.one[n] = sharedName
			} else if ok && ae == sharedName && he != sharedName && he.scope != globalScope {
				h.one[n] = sharedName
			}
			continue
		}
		if ae.scope != he.scope {
			a.one[n], h.one[n] = sharedName, sharedName
		}
	}
}

// shared reports whether tools of several tenants hold name.
func (ni nameIndex) shared(name string) bool { return ni.one[name] == sharedName }

// exact returns the tool of key k.
func (ni nameIndex) exact(k nsKey) (*entry, bool) {
	if k.scope != globalScope {
		e, ok := ni.scoped[k]
		return e, ok
	}
	e, ok := ni.one[k.name]
	if !ok || e == sharedName || e.scope != globalScope {
		return nil, false
	}
	return e, true
}

// full returns the complete tool message (built once per entry).
func (e *entry) full() *catalogv1.Tool {
	e.fullOnce.Do(func() {
		in, out, ann, meta := e.b.structs()
		t := e.tool
		e.fullTool = &catalogv1.Tool{Name: t.Name, OriginalName: t.OriginalName, Server: t.Server, Title: t.Title,
			Description: t.Description, InputSchema: in, OutputSchema: out, Annotations: ann, Routing: t.Routing,
			Source: t.Source, Available: t.Available, Renamed: t.Renamed, Problems: t.Problems, Meta: meta,
			DefinitionHash: t.DefinitionHash, State: t.State, NameHeldBy: t.NameHeldBy, Tenants: t.Tenants,
			SessionScope: t.SessionScope, Stateful: t.Stateful}
	})
	return e.fullTool
}

// base is the name-independent part of a tool, cached per server.
type base struct {
	def       catalogmcp.ToolDef
	problems  []string
	routing   *catalogv1.Routing
	canonName string
	canon     []byte
	// defName and defHash are the definition hash of the tool under the
	// exposed name defName (DefinitionCanon, docs/architecture.md §8); the
	// canonical form itself is recomputed when needed (pins, diffs), not kept.
	defName string
	defHash string

	once                           sync.Once
	input, output, annotations, md *structpb.Struct

	churnOnce, behOnce sync.Once // churn.go
	churnSum, behSum   string
}

// definition returns the canonical definition and its hash under the exposed name n.
func (b *base) definition(n string) ([]byte, string) {
	return definitionOf(DefinitionInput{Name: n, Title: b.def.Title, Description: b.def.Description,
		InputSchema: b.def.InputSchema, OutputSchema: b.def.OutputSchema, Annotations: b.def.Annotations})
}

// structs converts the raw JSON values to Structs once, on first use.
func (b *base) structs() (input, output, annotations, meta *structpb.Struct) {
	b.once.Do(func() {
		b.input, b.output = rawStruct(b.def.InputSchema), rawStruct(b.def.OutputSchema)
		b.annotations, b.md = rawStruct(b.def.Annotations), rawStruct(b.def.Meta)
	})
	return b.input, b.output, b.annotations, b.md
}

type serverCache struct {
	instance, version uint64
	bases             []*base
	omitted           []*catalogv1.OmittedTool
}

// definitionBytes is the size of a tool definition as listed.
func definitionBytes(d catalogmcp.ToolDef) int {
	if len(d.Raw) > 0 {
		return len(d.Raw)
	}
	return len(d.Name) + len(d.Title) + len(d.Description) + len(d.InputSchema) + len(d.OutputSchema) + len(d.Annotations) + len(d.Meta)
}

func emptyHash() string { return hashElements(nil) }

// subsetHash is the catalog hash of the distinct names among names known
// in the viewer's namespace (names unknown there are returned). It sorts
// ranks (ints) instead of names and hashes the precomputed canonical
// elements: O(k log k) plus the bytes.
func (snap *snapshot) subsetHash(v viewer, names []string) (hash string, count int, unknown []string, picked []*entry) {
	ranks := make([]int, 0, len(names))
	for _, n := range names {
		if e, ok := snap.active.get(v, n); ok {
			ranks = append(ranks, e.rank)
		} else {
			unknown = append(unknown, n)
		}
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	h := sha256.New()
	h.Write([]byte{'['})
	picked = make([]*entry, len(ranks))
	for i, r := range ranks {
		if i > 0 {
			h.Write([]byte{','})
		}
		e := snap.sorted[r]
		picked[i] = e
		h.Write(e.canon)
	}
	h.Write([]byte{']'})
	return hex.EncodeToString(h.Sum(nil))[:16], len(ranks), unknown, picked
}

// bases returns the cached name-independent tools of a server; tools over
// catalog.max_definition_bytes are left out and returned as omitted
// (reported on the server, never breaking its other tools).
func (s *Server) bases(st catalogmcp.Status) ([]*base, []*catalogv1.OmittedTool) {
	c := s.cache[st.Name]
	if c != nil && c.instance == st.Instance && c.version == st.ToolsVersion {
		return c.bases, c.omitted
	}
	bs := make([]*base, 0, len(st.Tools))
	var omitted []*catalogv1.OmittedTool
	for _, d := range st.Tools {
		if n := definitionBytes(d); n > s.cfg.MaxDefinitionBytes {
			omitted = append(omitted, &catalogv1.OmittedTool{OriginalName: d.Name, DefinitionBytes: int64(n),
				Reason: fmt.Sprintf("definition of %d bytes exceeds catalog.max_definition_bytes (%d)", n, s.cfg.MaxDefinitionBytes)})
			continue
		}
		bs = append(bs, &base{def: d, problems: schemaProblems(d.InputSchema), routing: routingProto(st.Config.ResolveRouting(d.Name))})
	}
	if len(omitted) > 0 {
		s.log.Warn("catalog: tools left out: definition over catalog.max_definition_bytes", "server", st.Name,
			"tools", len(omitted), "first", omitted[0].GetOriginalName(), "bytes", omitted[0].GetDefinitionBytes())
	}
	s.cache[st.Name] = &serverCache{instance: st.Instance, version: st.ToolsVersion, bases: bs, omitted: omitted}
	return bs, omitted
}

// pinnedServer reports whether a server's tool definitions are pinned and
// whether its new tools wait for review.
func (s *Server) pinnedServer(c *catalogconfig.Server) (pinned, review bool) {
	pinned = s.cfg.Pin
	if c.Pin != nil {
		pinned = *c.Pin
	}
	policy := s.cfg.PinNewTools
	if c.PinNewTools != "" {
		policy = c.PinNewTools
	}
	return pinned, policy == catalogconfig.PinNewReview
}

// aliasIndex maps the (server, original) pair, the bare original name and
// the folded exposed name (`-` = `_`) of every ACTIVE tool to it;
// ambiguous marks an original or folded name shared by several tools.
type aliasIndex struct {
	byPair     map[catalognames.Key]*entry
	byOriginal map[string]*entry
	byFolded   map[string]*entry
}

// ambiguous is the alias-map value of a name that several tools share.
var ambiguous = &entry{}

// aliases returns the snapshot's alias index, building it once.
func (snap *snapshot) aliases() *aliasIndex {
	snap.aliasOnce.Do(func() {
		a := &aliasIndex{byPair: make(map[catalognames.Key]*entry, len(snap.tools)),
			byOriginal: make(map[string]*entry, len(snap.tools)), byFolded: make(map[string]*entry, len(snap.tools))}
		for _, e := range snap.tools {
			k := catalognames.Key{Server: e.tool.Server, Tool: e.original}
			if _, dup := a.byPair[k]; !dup {
				a.byPair[k] = e
			}
			addAlias(a.byOriginal, e.original, e)
			addAlias(a.byFolded, foldName(e.tool.Name), e)
		}
		snap.alias = a
	})
	return snap.alias
}

func addAlias(m map[string]*entry, k string, e *entry) {
	if _, ok := m[k]; ok {
		m[k] = ambiguous
	} else {
		m[k] = e
	}
}

// foldName is the spelling-insensitive form of an exposed name (`-` = `_`).
func foldName(n string) string { return strings.ReplaceAll(n, "-", "_") }

// rebuild recomputes the snapshot from the manager's statuses, swaps it in,
// updates the search index and notifies watchers. Concurrent calls are
// serialised; readers keep using the previous snapshot until the swap.
//
// Names come from the identity store (stable per pair, docs/architecture.md
// §7); each tool gets its definition hash; tools of pinned servers whose
// definition is not the approved one are held out of the served catalog.
func (s *Server) rebuild() {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	now := time.Now()
	statuses := s.mgr.Statuses()
	type item struct {
		st *catalogmcp.Status
		b  *base
	}
	var items []item
	var origs []catalognames.Original
	var scopes []string
	live := map[string]bool{}
	omitted := map[string][]*catalogv1.OmittedTool{}
	pinnedSrv := map[string]bool{}
	reviewSrv := map[string]bool{}
	s.churn.begin()
	defer s.churn.end()
	for i := range statuses {
		st := &statuses[i]
		live[st.Name] = true
		pinnedSrv[st.Name], reviewSrv[st.Name] = s.pinnedServer(&st.Config)
		if st.State == catalogmcp.StateDisabled {
			continue
		}
		bs, om := s.bases(*st)
		if len(om) > 0 {
			omitted[st.Name] = om
		}
		for _, b := range bs {
			b = s.bindStable(st, b, pinnedSrv[st.Name], now) // churn.go
			items = append(items, item{st, b})
			origs = append(origs, catalognames.Original{Server: b.def.Origin, Tool: b.def.Name, Prefixed: st.Config.Prefixed()})
			scopes = append(scopes, st.Config.NameScope())
		}
	}
	for name := range s.cache {
		if !live[name] {
			delete(s.cache, name)
		}
	}
	settled := s.settled()
	s.builtSettled.Store(settled)
	names, provisional := s.ids.assign(origs, scopes, now, settled)
	// Canonical hash elements and definitions of new or renamed tools,
	// computed in parallel.
	var need []int
	for i, it := range items {
		if b := it.b; b.canonName != names[i].Name || b.canon == nil || b.defName != names[i].Name {
			need = append(need, i)
		}
	}
	parallel(len(need), func(k int) {
		i := need[k]
		b, n := items[i].b, names[i].Name
		// The input schema is canonicalised once for both hashes. Invalid
		// JSON cannot come from the wire decoder; it is hashed as absent
		// (a deterministic stand-in rather than dropping the tool).
		cp, err := canonParameters(n, b.def.InputSchema)
		if err != nil {
			cp = []byte(`{}`)
		}
		cn, err1 := canonString(n)
		cd, err2 := canonString(b.def.Description)
		var c []byte
		defHash := ""
		if err1 == nil && err2 == nil {
			c = elementWith(cn, cd, cp)
			def := DefinitionInput{Name: n, Title: b.def.Title, Description: b.def.Description,
				InputSchema: b.def.InputSchema, OutputSchema: b.def.OutputSchema, Annotations: b.def.Annotations}
			if parts, err := definitionPartsWith(def, cn, cd, cp); err == nil {
				defHash = parts.hash()
			}
		} else {
			c, _ = hashElement(HashInput{Name: n})
		}
		if defHash == "" {
			_, defHash = b.definition(n)
		}
		b.defName, b.defHash = n, defHash
		b.canonName, b.canon = n, c
	})
	// Review states of the tools of pinned servers.
	var checks []pinCheck
	var checkIdx []int
	for i, it := range items {
		if pinnedSrv[it.st.Name] && !names[i].Duplicate {
			checks = append(checks, pinCheck{key: catalognames.KeyOf(origs[i]), hash: it.b.defHash, b: it.b, name: names[i].Name,
				review: reviewSrv[it.st.Name], provisional: provisional[i]})
			checkIdx = append(checkIdx, i)
		}
	}
	states := make([]catalogv1.ToolState, len(items))
	for i := range states {
		states[i] = catalogv1.ToolState_TOOL_STATE_ACTIVE
	}
	for k, st := range s.ids.states(checks, now) {
		states[checkIdx[k]] = st
	}
	snap := &snapshot{active: newNameIndex(len(items)), statuses: statuses, at: now,
		heldIdx:    newNameIndex(0),
		collisions: map[string][]*catalogv1.NameCollision{}, omitted: omitted, pinned: pinnedSrv,
		serverTenants: make(map[string][]string, len(statuses))}
	for i := range statuses {
		snap.serverTenants[statuses[i].Name] = statuses[i].Config.Tenants
		snap.scoped = snap.scoped || len(statuses[i].Config.Tenants) > 0
	}
	for i, it := range items {
		b, a := it.b, names[i]
		static := it.st.Type == catalogconfig.TypeStatic
		source := catalogv1.ToolSource_TOOL_SOURCE_MCP
		if static {
			source = catalogv1.ToolSource_TOOL_SOURCE_STATIC
		}
		t := &catalogv1.Tool{Name: a.Name, OriginalName: b.def.Name, Server: b.def.Origin, Title: b.def.Title,
			Description: b.def.Description, Routing: b.routing, Source: source,
			Available: it.st.State == catalogmcp.StateReady, Renamed: a.Suffixed, Problems: b.problems,
			DefinitionHash: b.defHash, State: states[i], Tenants: it.st.Config.Tenants}
		if !static {
			t.SessionScope, t.Stateful = scopeEnum(it.st.Config.Scope()), it.st.Config.Stateful
		}
		if b.def.Origin != it.st.Name {
			snap.serverTenants[b.def.Origin] = it.st.Config.Tenants
		}
		if a.Collided {
			holder := &catalogv1.ToolRef{Server: a.Holder.Server, OriginalName: a.Holder.Tool, Name: s.ids.nameOf(a.Holder)}
			t.NameHeldBy = holder
			nc := &catalogv1.NameCollision{Tool: &catalogv1.ToolRef{Server: b.def.Origin, OriginalName: b.def.Name, Name: a.Name},
				Wanted: a.Plain, Holder: holder}
			snap.collisions[it.st.Name] = append(snap.collisions[it.st.Name], nc)
			if a.New {
				snap.newCollisions = append(snap.newCollisions, nc)
			}
		}
		if a.Previous != "" {
			snap.renames = append(snap.renames, &catalogv1.ToolRename{
				Tool: &catalogv1.ToolRef{Server: b.def.Origin, OriginalName: b.def.Name, Name: a.Name}, PreviousName: a.Previous})
		}
		e := &entry{tool: t, server: it.st.Name, original: b.def.Name, static: static, canon: b.canon, b: b, pinned: pinnedSrv[it.st.Name],
			scope: scopes[i]}
		e.ikey = e.indexKey()
		if states[i] != catalogv1.ToolState_TOOL_STATE_ACTIVE {
			snap.held = append(snap.held, e)
			snap.heldIdx.add(e)
			continue
		}
		snap.tools = append(snap.tools, e)
		snap.active.add(e)
	}
	crossShare(snap.active, snap.heldIdx)
	snap.sorted = slices.Clone(snap.tools)
	slices.SortFunc(snap.sorted, func(a, b *entry) int {
		if c := strings.Compare(a.tool.Name, b.tool.Name); c != 0 {
			return c
		}
		return strings.Compare(a.scope, b.scope)
	})
	h := sha256.New()
	h.Write([]byte{'['})
	for i, e := range snap.sorted {
		e.rank = i
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(e.canon)
	}
	h.Write([]byte{']'})
	snap.hash = hex.EncodeToString(h.Sum(nil))[:16]
	old := s.snap.Load()
	snap.removedTenants, snap.removedServerTenants = map[nsKey][]string{}, map[string][]string{}
	if old != nil {
		for _, e := range append(slices.Clone(old.tools), old.held...) {
			if _, ok := snap.active.exact(e.key()); !ok {
				if _, ok := snap.heldIdx.exact(e.key()); !ok {
					snap.removedTenants[e.key()] = e.tool.Tenants
				}
			}
		}
		for n, ts := range old.serverTenants {
			if _, ok := snap.serverTenants[n]; !ok {
				snap.removedServerTenants[n] = ts
			}
		}
	}
	s.snap.Store(snap)
	s.index.update(snap)
	if ev := diff(old, snap); ev != nil {
		s.broadcast(ev)
	}
}

// settled reports whether every configured server finished its first
// connection attempt (READY, FAILED or disabled); until then new names are
// provisional (identity.assign), so a server that is merely slower at start
// does not lose a name to one listed later in the file.
func (s *Server) settled() bool {
	for _, st := range s.mgr.Statuses() {
		sup, ok := s.mgr.Supervisor(st.Name)
		if !ok {
			continue
		}
		select {
		case <-sup.Settled():
		default:
			return false
		}
	}
	return true
}

// parallel runs fn(0..n-1) spread over the available CPUs for large n.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), max(n/256, 1))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// catalogChange is one catalog change as broadcast to watchers: the event, with
// every tool of every namespace, and the scope of each tool name it lists
// (parallel to ToolsAdded, ToolsChanged, ToolsRemoved, ToolsStateChanged),
// so that each watcher's copy is filtered in its own namespace
// (viewer.event). snap is the snapshot the change made.
type catalogChange struct {
	ev                             *catalogv1.CatalogEvent
	snap                           *snapshot
	added, changed, removed, state []string
}

// diff describes the change from a to b, or nil when nothing changed.
// Tools are compared by their name in their namespace (nsKey).
// DefinitionHashes leaves out a name several tenants hold (it names no one
// tool for a watcher that sees every tenant; each tenant's watcher gets its
// own, viewer.event).
func diff(a, b *snapshot) *catalogChange {
	c := &catalogChange{snap: b}
	ev := &catalogv1.CatalogEvent{Type: catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_CHANGED, CatalogHash: b.hash, Time: timestamppb.New(b.at),
		DefinitionHashes: map[string]string{}, NameCollisions: b.newCollisions, Renames: b.renames}
	oldSrv := map[string]catalogmcp.Status{}
	for _, st := range a.statuses {
		oldSrv[st.Name] = st
	}
	newSrv := map[string]bool{}
	stateChanged := false
	changedSrv := map[string]bool{}
	for _, st := range b.statuses {
		newSrv[st.Name] = true
		o, ok := oldSrv[st.Name]
		switch {
		case !ok:
			ev.ServersAdded = append(ev.ServersAdded, st.Name)
		case !o.Config.Equal(&st.Config):
			changedSrv[st.Name] = true
		case o.State != st.State || o.LastError != st.LastError || o.Restarts != st.Restarts:
			stateChanged = true
		}
	}
	for _, st := range a.statuses {
		if !newSrv[st.Name] {
			ev.ServersRemoved = append(ev.ServersRemoved, st.Name)
		}
	}
	defHash := func(e *entry) {
		if !b.active.shared(e.tool.Name) {
			ev.DefinitionHashes[e.tool.Name] = e.tool.DefinitionHash
		}
	}
	for _, e := range b.tools {
		o, ok := a.active.exact(e.key())
		if !ok {
			ev.ToolsAdded, c.added = append(ev.ToolsAdded, e.tool.Name), append(c.added, e.scope)
			changedSrv[e.server] = true
			defHash(e)
		} else if !bytes.Equal(o.canon, e.canon) || o.tool.DefinitionHash != e.tool.DefinitionHash || o.server != e.server || o.original != e.original {
			ev.ToolsChanged, c.changed = append(ev.ToolsChanged, e.tool.Name), append(c.changed, e.scope)
			defHash(e)
			changedSrv[e.server] = true
		} else if o.tool.Available != e.tool.Available {
			stateChanged = true
		}
	}
	for _, e := range a.tools {
		if _, ok := b.active.exact(e.key()); !ok {
			ev.ToolsRemoved, c.removed = append(ev.ToolsRemoved, e.tool.Name), append(c.removed, e.scope)
			changedSrv[e.server] = true
		}
	}
	// Review states: a tool that entered or left the held set, or changed
	// state or definition inside it.
	for _, e := range b.held {
		o, ok := a.heldIdx.exact(e.key())
		if !ok || o.tool.State != e.tool.State || o.tool.DefinitionHash != e.tool.DefinitionHash {
			ev.ToolsStateChanged, c.state = append(ev.ToolsStateChanged, e.tool.Name), append(c.state, e.scope)
			changedSrv[e.server] = true
		}
	}
	for _, e := range a.held {
		if _, ok := b.heldIdx.exact(e.key()); !ok {
			ev.ToolsStateChanged, c.state = append(ev.ToolsStateChanged, e.tool.Name), append(c.state, e.scope)
			changedSrv[e.server] = true
		}
	}
	for _, st := range b.statuses {
		if changedSrv[st.Name] && !slices.Contains(ev.ServersAdded, st.Name) {
			ev.ServersChanged = append(ev.ServersChanged, st.Name)
		}
	}
	if len(ev.ServersAdded)+len(ev.ServersRemoved)+len(ev.ServersChanged)+len(ev.ToolsAdded)+len(ev.ToolsRemoved)+len(ev.ToolsChanged)+
		len(ev.ToolsStateChanged)+len(ev.Renames)+len(ev.NameCollisions) > 0 {
		c.ev = ev
		return c
	}
	if stateChanged {
		ev.Type = catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_STATE
		c.ev = ev
		return c
	}
	return nil
}

// subscribe registers a watcher; the channel is closed by unsubscribe or Close.
func (s *Server) subscribe() (chan *catalogChange, *snapshot) {
	ch := make(chan *catalogChange, 64)
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.watchers[ch] = struct{}{}
	return ch, s.snap.Load()
}

func (s *Server) unsubscribe(ch chan *catalogChange) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if _, ok := s.watchers[ch]; ok {
		delete(s.watchers, ch)
		close(ch)
	}
}

// broadcast sends ev to every watcher. A watcher whose buffer is full misses
// the event (every event carries the current global hash, so a reader that
// compares hashes still converges).
func (s *Server) broadcast(ev *catalogChange) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- ev:
		default:
		}
	}
}

package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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
	tools    []*entry // config order of servers, then server order
	sorted   []*entry // by exposed name (byte order); entry.rank indexes it
	byName   map[string]*entry
	statuses []catalogmcp.Status
	hash     string // global hash
	at       time.Time
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
	b        *base

	fullOnce sync.Once
	fullTool *catalogv1.Tool
}

// full returns the complete tool message (built once per entry).
func (e *entry) full() *catalogv1.Tool {
	e.fullOnce.Do(func() {
		in, out, ann, meta := e.b.structs()
		t := e.tool
		e.fullTool = &catalogv1.Tool{Name: t.Name, OriginalName: t.OriginalName, Server: t.Server, Title: t.Title,
			Description: t.Description, InputSchema: in, OutputSchema: out, Annotations: ann, Routing: t.Routing,
			Source: t.Source, Available: t.Available, Renamed: t.Renamed, Problems: t.Problems, Meta: meta}
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

	once                           sync.Once
	input, output, annotations, md *structpb.Struct
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
}

func emptyHash() string { return hashElements(nil) }

// subsetHash is the catalog hash of the distinct known names among names
// (unknown names are returned). It sorts ranks (ints) instead of names and
// hashes the precomputed canonical elements: O(k log k) plus the bytes.
func (snap *snapshot) subsetHash(names []string) (hash string, count int, unknown []string, picked []*entry) {
	ranks := make([]int, 0, len(names))
	for _, n := range names {
		if e, ok := snap.byName[n]; ok {
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

func (s *Server) bases(st catalogmcp.Status) []*base {
	c := s.cache[st.Name]
	if c != nil && c.instance == st.Instance && c.version == st.ToolsVersion {
		return c.bases
	}
	bs := make([]*base, len(st.Tools))
	for i, d := range st.Tools {
		b := &base{def: d, problems: schemaProblems(d.InputSchema), routing: routingProto(st.Config.ResolveRouting(d.Name))}
		bs[i] = b
	}
	s.cache[st.Name] = &serverCache{instance: st.Instance, version: st.ToolsVersion, bases: bs}
	return bs
}

// rebuild recomputes the snapshot from the manager's statuses, swaps it in,
// updates the search index and notifies watchers. Concurrent calls are
// serialised; readers keep using the previous snapshot until the swap.
func (s *Server) rebuild() {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	statuses := s.mgr.Statuses()
	type item struct {
		st *catalogmcp.Status
		b  *base
	}
	var items []item
	var origs []catalognames.Original
	live := map[string]bool{}
	for i := range statuses {
		st := &statuses[i]
		live[st.Name] = true
		if st.State == catalogmcp.StateDisabled {
			continue
		}
		for _, b := range s.bases(*st) {
			items = append(items, item{st, b})
			origs = append(origs, catalognames.Original{Server: b.def.Origin, Tool: b.def.Name, Prefixed: st.Config.Prefixed()})
		}
	}
	for name := range s.cache {
		if !live[name] {
			delete(s.cache, name)
		}
	}
	names := catalognames.Assign(origs)
	snap := &snapshot{tools: make([]*entry, len(items)), byName: make(map[string]*entry, len(items)), statuses: statuses, at: time.Now()}
	// Canonical hash elements of new or renamed tools, computed in parallel.
	var need []int
	var inputs []HashInput
	for i, it := range items {
		if b := it.b; b.canonName != names[i].Name || b.canon == nil {
			need = append(need, i)
			inputs = append(inputs, HashInput{Name: names[i].Name, Description: b.def.Description, Parameters: b.def.InputSchema})
		}
	}
	if canon, err := canonAll(inputs); err == nil {
		for k, i := range need {
			items[i].b.canonName, items[i].b.canon = names[i].Name, canon[k]
		}
	} else {
		for _, i := range need {
			in := HashInput{Name: names[i].Name, Description: items[i].b.def.Description, Parameters: items[i].b.def.InputSchema}
			c, err := hashElement(in)
			if err != nil {
				// Invalid JSON cannot come from the wire decoder; keep a
				// deterministic stand-in rather than dropping the tool.
				in.Parameters = nil
				c, _ = hashElement(in)
			}
			items[i].b.canonName, items[i].b.canon = names[i].Name, c
		}
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
			Available: it.st.State == catalogmcp.StateReady, Renamed: a.Suffixed, Problems: b.problems}
		e := &entry{tool: t, server: it.st.Name, original: b.def.Name, static: static, canon: b.canon, b: b}
		snap.tools[i] = e
		snap.byName[a.Name] = e
	}
	snap.sorted = slices.Clone(snap.tools)
	slices.SortFunc(snap.sorted, func(a, b *entry) int { return strings.Compare(a.tool.Name, b.tool.Name) })
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
	s.snap.Store(snap)
	s.index.update(snap)
	if ev := diff(old, snap); ev != nil {
		s.broadcast(ev)
	}
}

// diff describes the change from a to b, or nil when nothing changed.
func diff(a, b *snapshot) *catalogv1.CatalogEvent {
	ev := &catalogv1.CatalogEvent{Type: catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_CHANGED, CatalogHash: b.hash, Time: timestamppb.New(b.at)}
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
	for _, e := range b.tools {
		o, ok := a.byName[e.tool.Name]
		if !ok {
			ev.ToolsAdded = append(ev.ToolsAdded, e.tool.Name)
			changedSrv[e.server] = true
		} else if !bytes.Equal(o.canon, e.canon) || o.server != e.server || o.original != e.original {
			ev.ToolsChanged = append(ev.ToolsChanged, e.tool.Name)
			changedSrv[e.server] = true
		} else if o.tool.Available != e.tool.Available {
			stateChanged = true
		}
	}
	for _, e := range a.tools {
		if _, ok := b.byName[e.tool.Name]; !ok {
			ev.ToolsRemoved = append(ev.ToolsRemoved, e.tool.Name)
			changedSrv[e.server] = true
		}
	}
	for _, st := range b.statuses {
		if changedSrv[st.Name] && !slices.Contains(ev.ServersAdded, st.Name) {
			ev.ServersChanged = append(ev.ServersChanged, st.Name)
		}
	}
	if len(ev.ServersAdded)+len(ev.ServersRemoved)+len(ev.ServersChanged)+len(ev.ToolsAdded)+len(ev.ToolsRemoved)+len(ev.ToolsChanged) > 0 {
		return ev
	}
	if stateChanged {
		ev.Type = catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_STATE
		return ev
	}
	return nil
}

// subscribe registers a watcher; the channel is closed by unsubscribe or Close.
func (s *Server) subscribe() (chan *catalogv1.CatalogEvent, *snapshot) {
	ch := make(chan *catalogv1.CatalogEvent, 64)
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.watchers[ch] = struct{}{}
	return ch, s.snap.Load()
}

func (s *Server) unsubscribe(ch chan *catalogv1.CatalogEvent) {
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
func (s *Server) broadcast(ev *catalogv1.CatalogEvent) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- ev:
		default:
		}
	}
}

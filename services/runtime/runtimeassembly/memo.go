package runtimeassembly

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// What one catalog generation shares between every base assembly built on
// it (docs/decisions/0149-assembly-shared-per-catalog-generation.md): the
// candidate Tool of each catalog tool (bounded by runtime.tool_bounds once,
// not once per principal and policy version), the deferred sets (names,
// map and rendered prompt section) by view key, and the bound forms of
// tools by definition and profile. A new generation drops all three.

// genCandidates returns the catalog tools, their candidates (cands[i] for
// tools[i]; nil for a held tool) and the catalog generation they belong to;
// memo is false when they were built for this call only (the watch stream
// is down or the catalog moved meanwhile).
func (s *Builder) genCandidates(ctx context.Context) (tools []*catalogv1.Tool, cands []*Tool, gen uint64, memo bool, err error) {
	s.watch.mu.Lock()
	tools, cands, gen, live := s.watch.tools, s.watch.cands, s.watch.catalogGen, s.watch.catalogLive
	s.watch.mu.Unlock()
	if live && tools != nil && cands != nil {
		return tools, cands, gen, true, nil
	}
	tools, err = s.catalogTools(ctx)
	if err != nil {
		return nil, nil, 0, false, err
	}
	cands = make([]*Tool, len(tools))
	for i, t := range tools {
		if st := t.GetState(); st != catalogv1.ToolState_TOOL_STATE_UNSPECIFIED && st != catalogv1.ToolState_TOOL_STATE_ACTIVE {
			continue
		}
		c := &Tool{Name: t.GetName(), Description: t.GetDescription(), Params: t.GetInputSchema(), Source: SourceMCP, Server: t.GetServer(),
			Routing: t.GetRouting(), Annotations: t.GetAnnotations(), DefinitionHash: t.GetDefinitionHash(),
			Scope: t.GetSessionScope(), Stateful: t.GetStateful()}
		boundTool(c, s.cfg.MaxDescriptionBytes, s.cfg.MaxSchemaBytes)
		cands[i] = c
	}
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	// Kept only for the generation the list was fetched under, and only
	// when catalogTools kept that very list.
	if s.watch.catalogLive && s.watch.catalogGen == gen && len(s.watch.tools) == len(tools) && (len(tools) == 0 || &s.watch.tools[0] == &tools[0]) {
		s.watch.cands = cands
		return tools, cands, gen, true, nil
	}
	return tools, cands, gen, false, nil
}

// viewMemoMax bounds the deferred sets memoised per catalog generation
// (principals with different visible sets each have one).
const viewMemoMax = 16

// deferredView is one memoised deferred set: names sorted, by name, and
// its rendered prompt section; shared read-only by the bases that have it.
type deferredView struct {
	names  []string
	byName map[string]*Tool
	text   string
}

func (w *watchState) view(gen uint64, key string) *deferredView {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.catalogLive || w.catalogGen != gen {
		return nil
	}
	return w.views[key]
}

func (w *watchState) putView(gen uint64, key string, v *deferredView) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.catalogLive || w.catalogGen != gen {
		return
	}
	if w.views == nil || len(w.views) >= viewMemoMax {
		w.views = map[string]*deferredView{}
	}
	w.views[key] = v
}

// formMemoBytes bounds the bound forms memoised per catalog generation, in
// protobuf-encoded bytes of the three forms (the structs in memory are a
// few times that).
const formMemoBytes = 4 << 20

// formKey identifies what a bound form is made of: a tool's name,
// description and input schema (the schema by identity: a candidate's is
// the catalog's for the generation, a built-in's is static) and the
// profile.
type formKey struct {
	params          *structpb.Struct
	name, desc, src string
	profile         runtimev1.ToolProfile
}

// formSet is the bound forms of one tool for one profile (Bind); deferred
// is bound with defer_loading: true, built on first use.
type formSet struct {
	openai, anthropic, bound *structpb.Struct
	err                      error
	once                     sync.Once
	deferred                 *structpb.Struct
	deferredHash             string // formHash of the tool's form with deferred
}

type formMemo struct {
	mu    sync.Mutex
	m     map[formKey]*formSet
	bytes int
}

func (w *watchState) formMemo(gen uint64) *formMemo {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.catalogLive || w.catalogGen != gen {
		return nil
	}
	if w.forms == nil {
		w.forms = &formMemo{m: map[formKey]*formSet{}}
	}
	return w.forms
}

// bindMemo is Bind through the generation's memo: the same forms, computed
// once per tool definition and profile while they fit formMemoBytes. The
// structs returned are shared: callers never change them (a deferred tool's
// form with defer_loading is a memoised copy of its own).
func (s *Builder) bindMemo(gen uint64, t *Tool, profile runtimev1.ToolProfile, deferLoading bool) (*runtimev1.ToolSchema, error) {
	fm := s.watch.formMemo(gen)
	if fm == nil {
		return bindFresh(t, profile, deferLoading)
	}
	k := formKey{params: t.Params, name: t.Name, desc: t.Description, src: t.Source, profile: profile}
	fm.mu.Lock()
	fs := fm.m[k]
	fm.mu.Unlock()
	if fs == nil {
		ts, err := Bind(t, profile)
		fs = &formSet{err: err}
		size := 64
		if err == nil {
			fs.openai, fs.anthropic, fs.bound = ts.Openai, ts.Anthropic, ts.Bound
			size += proto.Size(ts)
		}
		fm.mu.Lock()
		if fm.bytes+size > formMemoBytes {
			fm.mu.Unlock()
			return bindFresh(t, profile, deferLoading)
		}
		if prev := fm.m[k]; prev != nil {
			fs = prev
		} else {
			fm.m[k] = fs
			fm.bytes += size
		}
		fm.mu.Unlock()
	}
	if fs.err != nil {
		return nil, fs.err
	}
	ts := &runtimev1.ToolSchema{Name: t.Name, Source: t.Source, Openai: fs.openai, Anthropic: fs.anthropic, Bound: fs.bound}
	if deferLoading {
		fs.once.Do(func() {
			fs.deferred = withDeferLoading(fs.bound)
			ts.Bound = fs.deferred
			fs.deferredHash = formHash(ts)
		})
		ts.Bound = fs.deferred
	}
	return ts, nil
}

// bindDeferred binds a deferred tool with defer_loading: true and returns
// its formHash (memoised with the form).
func (s *Builder) bindDeferred(gen uint64, t *Tool, profile runtimev1.ToolProfile) (*runtimev1.ToolSchema, string, error) {
	ts, err := s.bindMemo(gen, t, profile, true)
	if err != nil {
		return nil, "", err
	}
	if fm := s.watch.formMemo(gen); fm != nil {
		fm.mu.Lock()
		fs := fm.m[formKey{params: t.Params, name: t.Name, desc: t.Description, src: t.Source, profile: profile}]
		fm.mu.Unlock()
		if fs != nil && fs.deferred == ts.Bound && fs.deferredHash != "" {
			return ts, fs.deferredHash, nil
		}
	}
	return ts, formHash(ts), nil
}

// formHash is the hex SHA-256 of a bound tool's deterministic protobuf
// encoding: the per-tool part of AssembleToolsResponse.deferred_tools_view.
func formHash(ts *runtimev1.ToolSchema) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ts)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// DeferLoading reports whether a bound tool goes out with defer_loading:
// true (the tools AssembleToolsRequest.deferred_tools_view can leave out).
func DeferLoading(ts *runtimev1.ToolSchema) bool {
	return ts.GetBound().GetFields()["defer_loading"].GetBoolValue()
}

// bindFresh is Bind, with defer_loading: true in the bound form when asked.
func bindFresh(t *Tool, profile runtimev1.ToolProfile, deferLoading bool) (*runtimev1.ToolSchema, error) {
	ts, err := Bind(t, profile)
	if err == nil && deferLoading {
		ts.Bound = withDeferLoading(ts.Bound)
	}
	return ts, err
}

// withDeferLoading returns a copy of a bound form with defer_loading: true
// (the member values are shared; nil stays nil as Bind leaves it).
func withDeferLoading(b *structpb.Struct) *structpb.Struct {
	if b == nil {
		return nil
	}
	out := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(b.Fields)+1)}
	for k, v := range b.Fields {
		out.Fields[k] = v
	}
	out.Fields["defer_loading"] = structpb.NewBoolValue(true)
	return out
}

// sharedDeferred settles the deferred set of b from the tools deferrable in
// it (in b.Tools order): names sorted, the view key, the map by name and
// the prompt section, from the generation's memo when the same set was
// built before on it in the same namespace (b.Namespace, set by the caller).
func (s *Builder) sharedDeferred(b *Base, deferrable []*Tool, gen uint64, memo bool) {
	names := make([]string, len(deferrable))
	for i, c := range deferrable {
		names[i] = c.Name
	}
	slices.Sort(names)
	b.ViewKey = viewKey(names)
	// Keyed by namespace and view key: equal names of two tenants may be
	// different tools (docs/decisions/0106-per-tenant-name-namespaces.md).
	key := b.NSKey()
	if memo {
		if v := s.watch.view(gen, key); v != nil && slices.Equal(v.names, names) {
			b.DeferredNames, b.Deferred, b.DeferredText = v.names, v.byName, v.text
			return
		}
	}
	b.DeferredNames = names
	b.Deferred = make(map[string]*Tool, len(deferrable))
	for _, c := range deferrable {
		b.Deferred[c.Name] = c
	}
	b.DeferredText = deferredSection(b, s.cfg.DeferredListMax)
	if memo {
		s.watch.putView(gen, key, &deferredView{names: b.DeferredNames, byName: b.Deferred, text: b.DeferredText})
	}
}

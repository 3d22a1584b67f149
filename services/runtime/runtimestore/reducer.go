package runtimestore

import (
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// MergePromoted is the promotion reducer of docs/deerflow.md §2.5, with
// per-tool definition hashes (docs/architecture.md §3.1,
// docs/decisions/0104-promotions-by-definition-hash.md):
//   - next nil (or without a hash, names and tools) keeps existing;
//   - tools are an ordered union by name: every promotion of existing and
//     next is kept (concurrent tool_search calls lose none), a name promoted
//     again takes next's definition hash, first-seen order is kept;
//   - v0.1.0 names without a tool entry (promoted under catalog_hash only)
//     are kept while next has the same catalog hash, dropped otherwise
//     (exactly the old rule; assembly migrates them, see MigratePromoted);
//   - names are the names of tools followed by the kept v0.1.0 names;
//   - catalog_hash is next's (informational for per-tool entries).
//
// The inputs are not modified; the result is a new value.
func MergePromoted(existing, next *runtimev1.Promoted) *runtimev1.Promoted {
	if next == nil || (next.GetCatalogHash() == "" && len(next.GetNames()) == 0 && len(next.GetTools()) == 0) {
		if existing == nil {
			return nil
		}
		return proto.Clone(existing).(*runtimev1.Promoted)
	}
	out := &runtimev1.Promoted{CatalogHash: next.GetCatalogHash()}
	idx := map[string]int{}
	add := func(pt *runtimev1.PromotedTool) {
		if pt.GetName() == "" {
			return
		}
		if i, ok := idx[pt.GetName()]; ok {
			out.Tools[i].DefinitionHash = pt.GetDefinitionHash()
			return
		}
		idx[pt.GetName()] = len(out.Tools)
		out.Tools = append(out.Tools, &runtimev1.PromotedTool{Name: pt.GetName(), DefinitionHash: pt.GetDefinitionHash()})
	}
	for _, pt := range existing.GetTools() {
		add(pt)
	}
	for _, pt := range next.GetTools() {
		add(pt)
	}
	var legacy []string
	if existing != nil && existing.GetCatalogHash() == next.GetCatalogHash() {
		legacy = append(legacy, LegacyNames(existing)...)
	}
	legacy = append(legacy, LegacyNames(next)...)
	names := make([]string, 0, len(out.Tools)+len(legacy))
	for _, pt := range out.Tools {
		names = append(names, pt.GetName())
	}
	for _, n := range legacy {
		if _, ok := idx[n]; !ok {
			names = append(names, n)
		}
	}
	out.Names = dedupe(nil, names)
	return out
}

// LegacyNames returns the names of p without a tool entry: v0.1.0
// promotions, valid only under p.catalog_hash.
func LegacyNames(p *runtimev1.Promoted) []string {
	if len(p.GetNames()) == 0 {
		return nil
	}
	has := make(map[string]bool, len(p.GetTools()))
	for _, pt := range p.GetTools() {
		has[pt.GetName()] = true
	}
	var out []string
	for _, n := range p.GetNames() {
		if !has[n] {
			out = append(out, n)
		}
	}
	return out
}

// DropPromoted returns p without the named promotions (tool entries and
// names); nil stays nil.
func DropPromoted(p *runtimev1.Promoted, drop []string) *runtimev1.Promoted {
	if p == nil {
		return nil
	}
	out := proto.Clone(p).(*runtimev1.Promoted)
	if len(drop) == 0 {
		return out
	}
	gone := make(map[string]bool, len(drop))
	for _, n := range drop {
		gone[n] = true
	}
	out.Tools = slices.DeleteFunc(out.Tools, func(pt *runtimev1.PromotedTool) bool { return gone[pt.GetName()] })
	out.Names = slices.DeleteFunc(out.Names, func(n string) bool { return gone[n] })
	return out
}

func dedupe(base, add []string) []string {
	seen := make(map[string]bool, len(base)+len(add))
	out := base[:0:0]
	for _, n := range append(slices.Clone(base), add...) {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// SyncReadFiles sets t.Proto.ReadFiles to the sorted keys of t.ReadMarks.
func SyncReadFiles(t *Thread) {
	keys := make([]string, 0, len(t.ReadMarks))
	for k := range t.ReadMarks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Proto.ReadFiles = keys
}

// MergeArtifacts appends artifacts whose path is not yet listed (ordered
// union, docs/deerflow.md §8); an artifact with a known path replaces the
// old entry in place.
func MergeArtifacts(existing, add []*runtimev1.Artifact) []*runtimev1.Artifact {
	out := slices.Clone(existing)
	for _, a := range add {
		i := slices.IndexFunc(out, func(x *runtimev1.Artifact) bool { return x.GetPath() == a.GetPath() })
		if i >= 0 {
			out[i] = a
		} else {
			out = append(out, a)
		}
	}
	return out
}

func cloneThread(t *runtimev1.Thread) *runtimev1.Thread {
	if t == nil {
		return nil
	}
	return proto.Clone(t).(*runtimev1.Thread)
}

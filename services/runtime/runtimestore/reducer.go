package runtimestore

import (
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// MergePromoted is the promotion reducer of docs/deerflow.md §2.5:
//   - next nil (or with an empty hash and no names) keeps existing;
//   - existing nil, or a different catalog hash, replaces wholesale with
//     next's hash and its de-duplicated names (stale names are dropped);
//   - the same hash appends next's names, de-duplicated, first-seen order.
//
// The inputs are not modified; the result is a new value.
func MergePromoted(existing, next *runtimev1.Promoted) *runtimev1.Promoted {
	if next == nil || (next.GetCatalogHash() == "" && len(next.GetNames()) == 0) {
		if existing == nil {
			return nil
		}
		return proto.Clone(existing).(*runtimev1.Promoted)
	}
	if existing == nil || existing.GetCatalogHash() != next.GetCatalogHash() {
		return &runtimev1.Promoted{CatalogHash: next.GetCatalogHash(), Names: dedupe(nil, next.GetNames())}
	}
	return &runtimev1.Promoted{CatalogHash: existing.GetCatalogHash(), Names: dedupe(slices.Clone(existing.GetNames()), next.GetNames())}
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

package runtimetools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
)

// viewCatalog is a catalog that keeps candidate views as the real one does
// (services/catalog/views.go) and records what each search sent. Other
// methods are not used by searchDeferred.
type viewCatalog struct {
	Catalog
	mu       sync.Mutex
	views    map[string][]string // nil: a v0.1.0 catalog without views
	requests []*catalogv1.SearchToolsRequest
}

func setID(names []string) string {
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (c *viewCatalog) SearchTools(_ context.Context, r *catalogv1.SearchToolsRequest, _ ...grpc.CallOption) (*catalogv1.SearchToolsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, proto.CloneOf(r))
	var set []string
	resp := &catalogv1.SearchToolsResponse{}
	switch {
	case r.GetCandidates() != nil:
		set = r.GetCandidates().GetValues()
		if c.views != nil {
			resp.CandidateView = setID(set)
			c.views[resp.CandidateView] = set
		}
	case r.GetCandidateView() != "" && c.views != nil:
		var ok bool
		if set, ok = c.views[r.GetCandidateView()]; !ok {
			return &catalogv1.SearchToolsResponse{CandidateViewUnknown: true}, nil
		}
		resp.CandidateView = r.GetCandidateView()
	}
	resp.CatalogHash = "h-" + setID(set)[:8]
	for _, n := range set {
		if strings.Contains(n, r.GetQuery()) {
			resp.Hits = append(resp.Hits, &catalogv1.SearchHit{Tool: &catalogv1.Tool{Name: n}})
		}
	}
	return resp, nil
}

func (c *viewCatalog) last(n int) []*catalogv1.SearchToolsRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests[len(c.requests)-n:])
}

func baseOf(names ...string) *runtimeassembly.Base {
	slices.Sort(names)
	return &runtimeassembly.Base{DeferredNames: names, ViewKey: setID(names)}
}

func hitNames(r *catalogv1.SearchToolsResponse) []string {
	var out []string
	for _, h := range r.GetHits() {
		out = append(out, h.GetTool().GetName())
	}
	return out
}

// TestSearchDeferredViews: the first search of a deferred set sends the
// names, later ones only the catalog's view id, with the same answer; an id
// the catalog forgot (restart, another replica) is dropped and the names
// resent in the same call; another set (a policy or catalog change gives
// the thread a new deferred set) never travels under the old id; a catalog
// without views is always sent the names.
func TestSearchDeferredViews(t *testing.T) {
	ctx := context.Background()
	cat := &viewCatalog{views: map[string][]string{}}
	d := NewDispatcher(Settings{SearchLimit: 5}, Deps{Catalog: cat})
	b := baseOf("fs_read", "fs_write", "web_fetch")
	first, err := d.searchDeferred(ctx, "fs", b)
	if err != nil {
		t.Fatal(err)
	}
	if r := cat.last(1)[0]; r.GetCandidates() == nil || r.GetCandidateView() != "" {
		t.Fatalf("first search sent %v, want the names", r)
	}
	for range 3 {
		again, err := d.searchDeferred(ctx, "fs", b)
		if err != nil {
			t.Fatal(err)
		}
		if r := cat.last(1)[0]; r.GetCandidates() != nil || r.GetCandidateView() != setID(b.DeferredNames) {
			t.Fatalf("repeat search sent %v, want only the view id", r)
		}
		if again.GetCatalogHash() != first.GetCatalogHash() || !slices.Equal(hitNames(again), hitNames(first)) {
			t.Fatalf("by view %v, by names %v", again, first)
		}
	}

	// The catalog restarts: the id is unknown, the names are resent at once.
	cat.mu.Lock()
	cat.views = map[string][]string{}
	n := len(cat.requests)
	cat.mu.Unlock()
	got, err := d.searchDeferred(ctx, "fs", b)
	if err != nil || got.GetCandidateViewUnknown() || got.GetCatalogHash() != first.GetCatalogHash() || !slices.Equal(hitNames(got), hitNames(first)) {
		t.Fatalf("after the catalog forgot the view: %v %v", got, err)
	}
	rs := cat.last(len(cat.requests) - n)
	if len(rs) != 2 || rs[0].GetCandidateView() == "" || rs[1].GetCandidates() == nil {
		t.Fatalf("fallback requests %v", rs)
	}
	if _, err := d.searchDeferred(ctx, "fs", b); err != nil || cat.last(1)[0].GetCandidates() != nil {
		t.Fatalf("the relearned view is not used: %v", cat.last(1)[0])
	}

	// A narrower set (e.g. fs_write denied by a new policy) is a new view.
	narrow := baseOf("fs_read", "web_fetch")
	nr, err := d.searchDeferred(ctx, "fs", narrow)
	if err != nil {
		t.Fatal(err)
	}
	if r := cat.last(1)[0]; r.GetCandidates() == nil || !slices.Equal(r.GetCandidates().GetValues(), narrow.DeferredNames) {
		t.Fatalf("new set sent %v, want its names", r)
	}
	if slices.Contains(hitNames(nr), "fs_write") {
		t.Fatalf("result outside the new set: %v", hitNames(nr))
	}
	// A Base without a view key (nothing deferred, or built elsewhere) never
	// uses the memo.
	if _, err := d.searchDeferred(ctx, "fs", &runtimeassembly.Base{DeferredNames: b.DeferredNames}); err != nil || cat.last(1)[0].GetCandidates() == nil {
		t.Fatalf("keyless base: %v", err)
	}

	// The catalog is replaced by one without views (a downgrade) while the
	// runtime holds an id: the id-only request is not understood (no echo),
	// so the names are resent in the same call.
	cat.mu.Lock()
	cat.views = nil
	n = len(cat.requests)
	cat.mu.Unlock()
	got, err = d.searchDeferred(ctx, "fs", b)
	if err != nil || !slices.Equal(hitNames(got), hitNames(first)) {
		t.Fatalf("after a downgrade: %v %v", got, err)
	}
	if rs := cat.last(len(cat.requests) - n); len(rs) != 2 || rs[1].GetCandidates() == nil {
		t.Fatalf("downgrade requests %v", rs)
	}

	// A catalog that returns no ids (v0.1.0) is always sent the names.
	old := &viewCatalog{}
	d2 := NewDispatcher(Settings{SearchLimit: 5}, Deps{Catalog: old})
	for range 3 {
		if _, err := d2.searchDeferred(ctx, "fs", b); err != nil {
			t.Fatal(err)
		}
		if r := old.last(1)[0]; r.GetCandidates() == nil || r.GetCandidateView() != "" {
			t.Fatalf("old catalog sent %v", r)
		}
	}
}

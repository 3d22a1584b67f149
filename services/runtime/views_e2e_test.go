package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// viewCount reads toolplane_catalog_search_views_total{outcome}.
func viewCount(t *testing.T, s *suite, outcome string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^toolplane_catalog_search_views_total\{outcome="` + outcome + `"[^}]*\} (\d+)`).FindStringSubmatch(s.metricsText())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestCandidateViewsEndToEnd (docs/decisions/0144-candidate-views.md,
// 0145-assemble-without-the-deferred-list.md), one process with the real
// catalog: AssembleTools names the deferred set by its content id and
// leaves the list out only for a caller holding the current one; repeat
// tool_search calls travel as a view id (the catalog counts hits) with the
// same answers; a policy change gives a new view, and no search result
// falls outside what the principal may now see.
func TestCandidateViewsEndToEnd(t *testing.T) {
	s := newSuite(t, nil)
	alice := s.rt(aliceToken)
	ctx := context.Background()
	th := newThread(t, alice, nil)
	// Both searched tools deferred (the servers may still be starting).
	r1 := eventually(t, func() (*runtimev1.AssembleToolsResponse, bool) {
		r := assemble(t, alice, th, "")
		return r, slices.Contains(r.GetDeferred(), "memory_read_graph") && slices.Contains(r.GetDeferred(), "everything_get-sum")
	})
	h := sha256.New()
	for _, n := range r1.GetDeferred() {
		h.Write([]byte(n + "\x00"))
	}
	if r1.GetDeferredView() != hex.EncodeToString(h.Sum(nil)) || r1.GetDeferredOmitted() {
		t.Fatalf("deferred_view %q omitted %v, want the SHA-256 of the list", r1.GetDeferredView(), r1.GetDeferredOmitted())
	}
	held, err := alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, DeferredView: r1.GetDeferredView()})
	if err != nil || !held.GetDeferredOmitted() || len(held.GetDeferred()) != 0 || held.GetDeferredView() != r1.GetDeferredView() ||
		held.GetCatalogHash() != r1.GetCatalogHash() || len(held.GetTools()) != len(r1.GetTools()) {
		t.Fatalf("holding the view: %v %v", held, err)
	}
	other, err := alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, DeferredView: strings.Repeat("0", 64)})
	if err != nil || other.GetDeferredOmitted() || !slices.Equal(other.GetDeferred(), r1.GetDeferred()) {
		t.Fatalf("another view must get the full list: %v %v", other, err)
	}
	if _, err := alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, DeferredView: strings.Repeat("a", 129)}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("long deferred_view: %v", err)
	}

	// tool_search: the first call teaches the catalog the view, the next
	// ones send only its id and answer the same.
	hits0 := viewCount(t, s, "hit")
	q := map[string]any{"query": "select:memory_read_graph,everything_get-sum"}
	first := text(call(t, alice, th, "tool_search", q))
	for range 3 {
		if got := text(call(t, alice, th, "tool_search", q)); got != first {
			t.Fatalf("by view %s\nfirst %s", got, first)
		}
	}
	if !strings.Contains(first, "everything_get-sum") || !strings.Contains(first, "memory_read_graph") {
		t.Fatalf("search: %s", first)
	}
	if n := viewCount(t, s, "hit") - hits0; n < 3 {
		t.Fatalf("%d searches by view id, want >= 3 (the runtime resends the names)", n)
	}

	// A policy change narrows the set: a new view, the denied tool is not
	// found, and the old view id no longer omits the list.
	s.az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_TOOL, "everything_get-sum")
	r2 := eventually(t, func() (*runtimev1.AssembleToolsResponse, bool) {
		r := assemble(t, alice, th, "")
		return r, !slices.Contains(r.GetDeferred(), "everything_get-sum")
	})
	if r2.GetDeferredView() == r1.GetDeferredView() {
		t.Fatal("a narrower deferred set kept its view id")
	}
	stale, err := alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, DeferredView: r1.GetDeferredView()})
	if err != nil || stale.GetDeferredOmitted() || !slices.Equal(stale.GetDeferred(), r2.GetDeferred()) {
		t.Fatalf("a stale view must get the new full list: %v %v", stale, err)
	}
	sent0 := viewCount(t, s, "sent")
	for range 2 {
		got := text(call(t, alice, th, "tool_search", q))
		if strings.Contains(got, "everything_get-sum") || !strings.Contains(got, "memory_read_graph") {
			t.Fatalf("after the policy change: %s", got)
		}
	}
	if viewCount(t, s, "sent") == sent0 {
		t.Fatal("the new deferred set was never sent: the runtime searched under the old view")
	}
}

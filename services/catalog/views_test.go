package catalog

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// TestCandidateViews: a search by candidate view id answers exactly as the
// search with the names (hits and hash); an unknown id searches nothing and
// says so; a catalog change
// gives the same view a new hash (never the old one); restarting the
// catalog forgets every view.
func TestCandidateViews(t *testing.T) {
	dir := t.TempDir()
	h := startDir(t, dir, extJSON(fixtureServer("fx", "")), nil)
	ctx := ctxT(t)
	// fx2_echo does not exist yet: unknown names are part of the set and
	// ignored, as with the names themselves.
	names := []string{"fx_pid", "fx_echo", "fx2_echo", "fx_echo"}
	byNames := func(q string) *catalogv1.SearchToolsResponse {
		t.Helper()
		r, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: q, Limit: 10, Candidates: &typev1.StringList{Values: names}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := byNames("echo")
	id := first.GetCandidateView()
	canon := slices.Compact(slices.Sorted(slices.Values(names)))
	if id != viewIDOf("", canon) || len(id) != 64 {
		t.Fatalf("candidate_view %q, want the SHA-256 of the sorted unique names", id)
	}
	for _, q := range []string{"echo", "process id", "select:fx_pid,fx_echo,fx_sleep", "zzzqqq", "+echo message"} {
		want := byNames(q)
		got, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: q, Limit: 10, CandidateView: id})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetCandidateViewUnknown() || got.GetCandidateView() != id || got.GetCatalogHash() != want.GetCatalogHash() {
			t.Fatalf("%q: view answer %v, names answer %v", q, got, want)
		}
		want.CandidateView, got.CandidateView = "", ""
		if !proto.Equal(got, want) {
			t.Fatalf("%q: by view %v\nby names %v", q, got, want)
		}
		for _, hit := range got.GetHits() {
			if !slices.Contains(names, hit.GetTool().GetName()) {
				t.Fatalf("%q: hit %s outside the candidate set", q, hit.GetTool().GetName())
			}
		}
	}
	gc, _ := h.svc.GetCatalog(ctx, &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{Values: names}})
	if first.GetCatalogHash() != gc.GetCatalogHash() {
		t.Fatalf("view hash %s, GetCatalog %s", first.GetCatalogHash(), gc.GetCatalogHash())
	}

	// Unknown ids: nothing searched, the caller is told to resend.
	for _, bad := range []string{strings.Repeat("0", 64), "x"} {
		r, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "echo", CandidateView: bad})
		if err != nil || !r.GetCandidateViewUnknown() || len(r.GetHits()) != 0 || r.GetCatalogHash() != "" {
			t.Fatalf("unknown view %q: %v %v", bad, r, err)
		}
	}
	if _, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "echo", CandidateView: strings.Repeat("a", 129)}); codeOf(err) != codes.InvalidArgument {
		t.Fatalf("long candidate_view: %v", err)
	}
	// SearchTools is service-class: a user credential cannot reach a view.
	if _, err := h.user.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "echo", CandidateView: id}); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("user with the service's view: %v", err)
	}

	// A catalog change: the same view now covers fx2_echo and hashes anew,
	// exactly as the names do.
	if err := os.WriteFile(h.path, []byte(extJSON(fixtureServer("fx", ""), fixtureServer("fx2", ""))), 0o600); err != nil {
		t.Fatal(err)
	}
	// The snapshot is stored before the search index follows it: wait
	// until both have the new tool.
	var after *catalogv1.SearchToolsResponse
	eventually(t, 10*time.Second, "fx2_echo listed and indexed", func() bool {
		if _, ok := h.srv.snap.Load().active.one["fx2_echo"]; !ok {
			return false
		}
		r, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "select:fx2_echo", CandidateView: id})
		if err != nil || r.GetCandidateViewUnknown() {
			t.Fatalf("after change: %v %v", r, err)
		}
		after = r
		return len(r.GetHits()) > 0
	})
	gc2, _ := h.svc.GetCatalog(ctx, &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{Values: names}})
	if after.GetCatalogHash() == first.GetCatalogHash() || after.GetCatalogHash() != gc2.GetCatalogHash() {
		t.Fatalf("after a catalog change the view hashes %s (before %s, names now %s)", after.GetCatalogHash(), first.GetCatalogHash(), gc2.GetCatalogHash())
	}
	if len(after.GetHits()) != 1 || after.GetHits()[0].GetTool().GetName() != "fx2_echo" {
		t.Fatalf("after change hits: %v", after.GetHits())
	}
	// fx_sleep is not in the view even though it exists.
	out, _ := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "select:fx_sleep", CandidateView: id})
	if len(out.GetHits()) != 0 {
		t.Fatalf("select outside the view: %v", out.GetHits())
	}

	// A restarted catalog knows no view.
	h.close()
	h2 := startDir(t, dir, "", nil)
	r, err := h2.svc.SearchTools(ctxT(t), &catalogv1.SearchToolsRequest{Query: "echo", CandidateView: id})
	if err != nil || !r.GetCandidateViewUnknown() {
		t.Fatalf("after restart: %v %v", r, err)
	}
}

// TestViewCacheBoundedByBytes: the LRU keeps the views under the bound,
// evicting the least recently used; a set larger than the bound is served
// but not kept.
func TestViewCacheBoundedByBytes(t *testing.T) {
	set := func(p string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = p + strings.Repeat("x", 20) + string(rune('a'+i%26)) + strings.Repeat("y", i/26)
		}
		return out
	}
	c := newViewCache(64 << 10)
	a := c.put("", set("a", 100), 0)
	b := c.put("", set("b", 100), 0)
	if c.get(a.id) != a || c.get(b.id) != b {
		t.Fatal("views not kept")
	}
	if again := c.put("", set("a", 100), 0); again != a {
		t.Fatal("the same set is a new view")
	}
	for i := range 40 {
		c.put("", set(string(rune('c'+i)), 100), 0)
		if _, used := c.stats(); used > 64<<10 {
			t.Fatalf("cache at %d bytes over the bound", used)
		}
	}
	if c.get(a.id) != nil {
		t.Fatal("least recently used view not evicted")
	}
	huge := c.put("", set("h", 5000), 0)
	if huge.id == "" || len(huge.names) != 5000 || c.get(huge.id) != nil {
		t.Fatal("a set over the bound must be served and not kept")
	}
	if n, _ := c.stats(); n == 0 {
		t.Fatal("the huge set evicted everything")
	}
}

// TestViewCacheBytesConfig: the default is 16 MiB; below 64 KiB is
// rejected naming the key.
func TestViewCacheBytesConfig(t *testing.T) {
	var c Config
	c.SetDefaults()
	if c.Search.ViewCacheBytes != 16<<20 {
		t.Fatalf("default %d", c.Search.ViewCacheBytes)
	}
	c.Search.ViewCacheBytes = 1000
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "catalog.search.view_cache_bytes") {
		t.Fatalf("small bound: %v", err)
	}
}

package runtimestore

import (
	"fmt"
	"testing"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

func TestMergePromoted(t *testing.T) {
	p := func(h string, n ...string) *runtimev1.Promoted { return &runtimev1.Promoted{CatalogHash: h, Names: n} }
	show := func(x *runtimev1.Promoted) string {
		if x == nil {
			return "nil"
		}
		return fmt.Sprintf("%s%v", x.GetCatalogHash(), x.GetNames())
	}
	cases := []struct {
		name           string
		existing, next *runtimev1.Promoted
		want           string
	}{
		{"nil next keeps", p("h", "a"), nil, "h[a]"},
		{"empty next keeps", p("h", "a"), p(""), "h[a]"},
		{"nil existing takes next deduped", nil, p("h", "a", "b", "a"), "h[a b]"},
		{"same hash unions first-seen", p("h", "a", "b"), p("h", "c", "a"), "h[a b c]"},
		{"other hash replaces wholesale", p("h", "a", "b"), p("g", "c"), "g[c]"},
		{"no-match search under new hash resets", p("h", "a"), p("g"), "g[]"},
	}
	for _, c := range cases {
		if got := show(MergePromoted(c.existing, c.next)); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

// TestMergePromotedPerTool: per-tool promotions survive any catalog hash
// change, a re-promotion takes the new definition hash, concurrent merges
// (in any order) keep every promotion, and v0.1.0 names follow the old rule.
func TestMergePromotedPerTool(t *testing.T) {
	pt := func(h string, kv ...string) *runtimev1.Promoted {
		p := &runtimev1.Promoted{CatalogHash: h}
		for i := 0; i < len(kv); i += 2 {
			p.Tools = append(p.Tools, &runtimev1.PromotedTool{Name: kv[i], DefinitionHash: kv[i+1]})
			p.Names = append(p.Names, kv[i])
		}
		return p
	}
	show := func(x *runtimev1.Promoted) string {
		s := x.GetCatalogHash() + fmt.Sprint(x.GetNames())
		for _, t := range x.GetTools() {
			s += " " + t.GetName() + "=" + t.GetDefinitionHash()
		}
		return s
	}
	cases := []struct {
		name           string
		existing, next *runtimev1.Promoted
		want           string
	}{
		{"other catalog hash keeps per-tool promotions", pt("h", "a", "1"), pt("g", "b", "2"), "g[a b] a=1 b=2"},
		{"re-promotion takes the new definition hash", pt("h", "a", "1", "b", "2"), pt("g", "a", "9"), "g[a b] a=9 b=2"},
		{"no-match search keeps per-tool promotions", pt("h", "a", "1"), &runtimev1.Promoted{CatalogHash: "g"}, "g[a] a=1"},
		{"v0.1.0 names kept under the same hash", &runtimev1.Promoted{CatalogHash: "h", Names: []string{"old"}}, pt("h", "a", "1"), "h[a old] a=1"},
		{"v0.1.0 names dropped under another hash", &runtimev1.Promoted{CatalogHash: "h", Names: []string{"old"}}, pt("g", "a", "1"), "g[a] a=1"},
	}
	for _, c := range cases {
		if got := show(MergePromoted(c.existing, c.next)); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
	// Concurrent promotions under different catalog hashes, applied in
	// either order, keep both.
	a, b := pt("h1", "x", "1"), pt("h2", "y", "2")
	for _, order := range [][2]*runtimev1.Promoted{{a, b}, {b, a}} {
		got := MergePromoted(MergePromoted(nil, order[0]), order[1])
		if len(got.GetTools()) != 2 {
			t.Errorf("concurrent merge lost a promotion: %s", show(got))
		}
	}
	if got := show(DropPromoted(pt("h", "a", "1", "b", "2"), []string{"a"})); got != "h[b] b=2" {
		t.Errorf("DropPromoted: %s", got)
	}
}

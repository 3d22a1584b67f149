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

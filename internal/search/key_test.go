package search

import (
	"context"
	"slices"
	"testing"
)

// TestDocumentKey: two documents may share a Name under different Keys
// (one index holding several namespaces). Candidates, Remove, Get and
// results use the Key; select: finds a keyed document by its Name among
// the candidates; ranking never sees the Key.
func TestDocumentKey(t *testing.T) {
	ix := NewIndex(Options{})
	docs := []Document{
		{Name: "lookup", Key: "lookup\x00acme", Description: "look a word up in the acme dictionary"},
		{Name: "lookup", Key: "lookup\x00beta", Description: "look a word up in the beta dictionary"},
		{Name: "global_tool", Description: "a tool every tenant sees"},
	}
	if err := ix.Replace(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	if ix.Len() != 3 || !slices.Equal(ix.Snapshot().Names(), []string{"lookup\x00acme", "lookup\x00beta", "global_tool"}) {
		t.Fatalf("ids = %q", ix.Snapshot().Names())
	}
	keys := func(r *Response) []string {
		var out []string
		for _, x := range r.Results {
			if x.Name == "" || (x.Key != x.Name && x.Key != "lookup\x00acme" && x.Key != "lookup\x00beta") {
				t.Fatalf("result %+v", x)
			}
			out = append(out, x.Key)
		}
		return out
	}
	for _, mode := range []Mode{ModeBM25, ModeRegex, ModeAuto} {
		r := search(t, ix, Request{Query: "dictionary", Mode: mode, Limit: 5, Candidates: []string{"lookup\x00beta", "global_tool"}})
		if got := keys(r); !slices.Equal(got, []string{"lookup\x00beta"}) {
			t.Fatalf("%v over beta's candidates = %q", mode, got)
		}
	}
	// The key is not indexed: the tenant's name is no search term.
	if r := search(t, ix, Request{Query: "acme", Mode: ModeBM25, Limit: 5, Candidates: []string{"lookup\x00beta", "global_tool"}}); len(r.Results) != 0 {
		t.Fatalf("the key was indexed: %q", keys(r))
	}
	if r := search(t, ix, Request{Query: "select:lookup", Candidates: []string{"lookup\x00acme", "global_tool"}}); !slices.Equal(keys(r), []string{"lookup\x00acme"}) {
		t.Fatalf("select:lookup among acme's = %q", keys(r))
	}
	if r := search(t, ix, Request{Query: "select:lookup,global_tool"}); !slices.Equal(keys(r), []string{"lookup\x00acme", "lookup\x00beta", "global_tool"}) {
		t.Fatalf("select without candidates = %q", keys(r))
	}
	if r := search(t, ix, Request{Query: "select:lookup\x00acme", Candidates: []string{"lookup\x00beta"}}); len(r.Results) != 0 {
		t.Fatalf("select by another namespace's key = %q", keys(r))
	}
	if d, ok := ix.Snapshot().Get("lookup\x00beta"); !ok || d.Description != docs[1].Description {
		t.Fatalf("Get = %+v, %v", d, ok)
	}
	ix.Remove("lookup\x00acme")
	if r := search(t, ix, Request{Query: "dictionary", Mode: ModeBM25, Limit: 5}); !slices.Equal(keys(r), []string{"lookup\x00beta"}) {
		t.Fatalf("after removing acme's = %q", keys(r))
	}
}

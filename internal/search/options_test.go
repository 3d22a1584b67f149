package search

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestServerDiversity(t *testing.T) {
	ctx := context.Background()
	docs := []Document{
		{Name: "a1", Server: "alpha", Description: "weather forecast weather today"},
		{Name: "a2", Server: "alpha", Description: "weather forecast weather tomorrow"},
		{Name: "a3", Server: "alpha", Description: "weather forecast weather week"},
		{Name: "b1", Server: "beta", Description: "weather forecast map"},
	}
	for _, d := range []float64{0, 0.1, 0.5} {
		ix := NewIndex(Options{ServerDiversity: d, DisableSemantic: true})
		if err := ix.Replace(ctx, docs); err != nil {
			t.Fatal(err)
		}
		resp, err := ix.Search(ctx, Request{Query: "weather forecast", Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		got := names(resp)
		t.Logf("diversity %v: %v", d, got)
		if d >= 0.5 && !slices.Contains(got, "b1") {
			t.Errorf("diversity %v: %v, want b1 in the top 2", d, got)
		}
		if d == 0 && slices.Contains(got, "b1") {
			t.Errorf("no diversity: %v, want two alpha tools first", got)
		}
	}
}

func TestSynonymExpansion(t *testing.T) {
	ctx := context.Background()
	docs := []Document{{Name: "uploader", Description: "Upload a photograph"}, {Name: "other", Description: "Send a message"}}
	for _, w := range []float64{0, 0.3} {
		ix := NewIndex(Options{SynonymWeight: w, DisableSemantic: true})
		if err := ix.Replace(ctx, docs); err != nil {
			t.Fatal(err)
		}
		resp, err := ix.Search(ctx, Request{Query: "photo", Mode: ModeBM25})
		if err != nil {
			t.Fatal(err)
		}
		if found := slices.Contains(names(resp), "uploader"); found != (w > 0) {
			t.Errorf("synonym weight %v: %v", w, names(resp))
		}
	}
	if !slices.Contains(synonyms("photo"), "photograph") {
		t.Fatalf("synonyms(photo) = %v", synonyms("photo"))
	}
}

func TestQueryIDFExponent(t *testing.T) {
	ctx := context.Background()
	var docs []Document
	for i := range 20 {
		docs = append(docs, Document{Name: "common" + strings.Repeat("x", i), Description: "list items"})
	}
	docs = append(docs, Document{Name: "rare", Description: "kubernetes"}, Document{Name: "both", Description: "list kubernetes items"})
	ratio := func(e float64) float64 {
		ix := NewIndex(Options{QueryIDFExponent: e, DisableSemantic: true})
		if err := ix.Replace(ctx, docs); err != nil {
			t.Fatal(err)
		}
		resp, err := ix.Search(ctx, Request{Query: "list kubernetes", Mode: ModeBM25, Limit: 30})
		if err != nil {
			t.Fatal(err)
		}
		sc := map[string]float64{}
		for _, r := range resp.Results {
			sc[r.Name] = r.Score
		}
		return sc["rare"] / sc["common"]
	}
	if r1, r2 := ratio(1), ratio(2); r2 <= r1 {
		t.Fatalf("rare/common score ratio %v at idf^1, %v at idf^2: want the rare term to weigh more", r1, r2)
	}
}

func TestSemanticServerText(t *testing.T) {
	d := Document{Name: "get_item", Description: "Get an item", Server: "shopCart", ServerDescription: "Online shop"}
	if s := d.semanticText(false); strings.Contains(s, "shop") {
		t.Fatalf("without server: %q", s)
	}
	if s := d.semanticText(true); !strings.Contains(s, "shop cart") || !strings.Contains(s, "Online shop") {
		t.Fatalf("with server: %q", s)
	}
}

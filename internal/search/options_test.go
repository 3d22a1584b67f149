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
	if s := d.semanticText(false, false); strings.Contains(s, "shop") {
		t.Fatalf("without server: %q", s)
	}
	if s := d.semanticText(true, false); !strings.Contains(s, "shop cart") || !strings.Contains(s, "Online shop") {
		t.Fatalf("with server: %q", s)
	}
}

func TestSplitCompound(t *testing.T) {
	for w, want := range map[string][]string{
		"diceroller":      {"dice", "roller"},
		"socialsearch":    {"social", "search"},
		"keywordexplorer": {"keyword", "explorer"},
		"fundsdbsearch":   {"funds", "db", "search"},
		"calculator":      nil, // an ordinary word
		"kraftful":        nil, // only rare fragments ("kr af tf ul")
		"dicé":            nil, // not ASCII
		"abc":             nil, // too short
	} {
		if got := splitCompound(w); !slices.Equal(got, want) {
			t.Errorf("splitCompound(%q) = %v, want %v", w, got, want)
		}
	}
	long := strings.Repeat("dice", 11)
	if got := splitCompound(long); got != nil {
		t.Errorf("splitCompound(44 letters) = %v, want nil (over compoundMaxLen)", got)
	}
}

func TestSplitCompoundNames(t *testing.T) {
	ctx := context.Background()
	docs := []Document{{Name: "diceroller", Description: "Roll for a tabletop game"}, {Name: "other", Description: "Send a message"}}
	for _, on := range []bool{false, true} {
		ix := NewIndex(Options{SplitCompoundNames: on, DisableSemantic: true})
		if err := ix.Replace(ctx, docs); err != nil {
			t.Fatal(err)
		}
		resp, err := ix.Search(ctx, Request{Query: "dice", Mode: ModeBM25})
		if err != nil {
			t.Fatal(err)
		}
		if found := slices.Contains(names(resp), "diceroller"); found != on {
			t.Errorf("SplitCompoundNames %v: %v", on, names(resp))
		}
	}
	d := Document{Name: "diceroller"}
	if s := d.semanticText(false, true); !strings.Contains(s, "dice roller") {
		t.Errorf("semanticText with compounds = %q, want the parts", s)
	}
	if s := d.semanticText(false, false); strings.Contains(s, "dice ") {
		t.Errorf("semanticText without compounds = %q", s)
	}
}

func TestPseudoRelevanceFeedback(t *testing.T) {
	ctx := context.Background()
	docs := []Document{
		{Name: "forecast", Description: "Weather forecast with temperature and humidity"},
		{Name: "sensor", Description: "Read temperature and humidity from a sensor"},
		{Name: "mail", Description: "Send an email message"},
	}
	for _, o := range []Options{{}, {PRFDocs: -1}, {PRFDocs: 1, PRFWeight: -1}, {PRFDocs: 1}, {PRFDocs: 1, PRFWeight: 0.5}} {
		o.DisableSemantic = true
		ix := NewIndex(o)
		if err := ix.Replace(ctx, docs); err != nil {
			t.Fatal(err)
		}
		resp, err := ix.Search(ctx, Request{Query: "weather", Mode: ModeBM25})
		if err != nil {
			t.Fatal(err)
		}
		got := names(resp)
		on := o.PRFDocs > 0 && o.PRFWeight >= 0
		if len(got) == 0 || got[0] != "forecast" {
			t.Fatalf("PRF %+v: %v, want forecast first", o.PRFDocs, got)
		}
		// Only feedback reaches the sensor (through temperature, humidity);
		// nothing reaches the unrelated mail tool.
		if slices.Contains(got, "sensor") != on || slices.Contains(got, "mail") {
			t.Errorf("PRF docs %d weight %v: %v", o.PRFDocs, o.PRFWeight, got)
		}
		if on {
			sc := ix.Snapshot().bm25("weather", nil)
			if r := sc.scores[ix.Snapshot().byName["sensor"]] / sc.scores[ix.Snapshot().byName["forecast"]]; r <= 0 || r >= 0.5 {
				t.Errorf("expanded-term score ratio %v, want (0, 0.5): expansion counts less than the query", r)
			}
			sc.release()
		}
	}
	// The expansion is deterministic: ties between terms are broken by term.
	ix := NewIndex(Options{PRFDocs: 2, PRFWeight: 0.3, PRFTerms: 2, DisableSemantic: true})
	if err := ix.Replace(ctx, docs); err != nil {
		t.Fatal(err)
	}
	s := ix.Snapshot()
	first := s.bm25Terms(weightedQueryTerms("temperature", 0), nil)
	want := s.prf(weightedQueryTerms("temperature", 0), first)
	for range 20 {
		if got := s.prf(weightedQueryTerms("temperature", 0), first); !slices.Equal(got, want) {
			t.Fatalf("prf not deterministic: %v vs %v", got, want)
		}
	}
	first.release()
	if len(want) != 2 || want[0].weight != 0.3 {
		t.Errorf("prf = %v, want 2 terms, the first weighted 0.3", want)
	}
}

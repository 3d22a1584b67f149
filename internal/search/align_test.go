package search

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/toolplane/toolplane/internal/search/vectors"
)

func TestAlignScore(t *testing.T) {
	e := NewStaticEmbedder(tinyTable(t))
	bag := func(s string) []alignWord { return wordBag(e, s) }
	if got := len(bag("the photo and the photo, resize zebra")); got != 2 {
		t.Fatalf("word bag keeps distinct known content words: got %d, want 2", got)
	}
	if a := alignScore(e, bag("photo resize"), bag("resize photo")); math.Abs(float64(a)-1) > 0.02 {
		t.Errorf("same words: %v, want 1", a)
	}
	if a := alignScore(e, bag("weather"), bag("money")); a != 0 {
		t.Errorf("orthogonal words: %v, want 0", a)
	}
	if a := alignScore(e, bag("zebra"), bag("photo")); a != 0 {
		t.Errorf("no known query word: %v, want 0", a)
	}
	// "picture" is near "photo": a partial match scores between the two.
	part := alignScore(e, bag("picture rain"), bag("photo resize"))
	if part <= 0.2 || part >= 0.9 {
		t.Errorf("partial alignment %v, want inside (0.2, 0.9)", part)
	}
}

// TestAlignWeightReranks checks that AlignWeight adds w × the alignment
// score to AUTO's fused score of each re-ranked candidate.
func TestAlignWeightReranks(t *testing.T) {
	tab := tinyTable(t)
	ctx := context.Background()
	build := func(w float64) *Index {
		ix := NewIndex(Options{Embedder: NewStaticEmbedder(tab), AlignWeight: w})
		if err := ix.Replace(ctx, sampleDocs); err != nil {
			t.Fatal(err)
		}
		return ix
	}
	off, on := build(0), build(1)
	q := "shrink this picture please"
	r0, err := off.Search(ctx, Request{Query: q, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := on.Search(ctx, Request{Query: q, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Results) == 0 || r1.Results[0].Name != "resize_image" {
		t.Fatalf("top result %v, want resize_image", r1.Results)
	}
	base := map[string]float64{}
	for _, r := range r0.Results {
		base[r.Name] = r.Score
	}
	snap := on.Snapshot()
	qb := alignQuery(snap.ix.static, q)
	for _, r := range r1.Results {
		slot := snap.byName[r.Name]
		want := base[r.Name] + float64(alignScore(snap.ix.static, qb, snap.slots[slot].words))
		if math.Abs(r.Score-want) > 1e-5 {
			t.Errorf("%s: score %v, want fused %v + alignment = %v", r.Name, r.Score, base[r.Name], want)
		}
	}
	if on.Snapshot().ix.static == nil || off.Snapshot().ix.static != nil {
		t.Error("the word bags are kept only when AlignWeight is set")
	}
}

// TestAlignQueryBounded checks that a query of more than 64 distinct known
// words is aligned on its 64 rarest words only.
func TestAlignQueryBounded(t *testing.T) {
	words := make([]string, 100)
	counts := make([]uint64, 100)
	vecs := make([][]float32, 100)
	var query []byte
	for i := range words {
		words[i] = "zq" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		counts[i] = uint64(1000 * (i + 1)) // later words are more frequent
		vecs[i] = []float32{float32(i%7) + 1, float32(i%5) + 1, 1, float32(i % 3)}
		query = append(query, words[i]...)
		query = append(query, ' ')
	}
	var buf bytes.Buffer
	if err := vectors.Encode(&buf, 4, words, counts, vecs); err != nil {
		t.Fatal(err)
	}
	tab, err := vectors.Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	e := NewStaticEmbedder(tab)
	if n := len(wordBag(e, string(query))); n != 100 {
		t.Fatalf("word bag has %d words, want 100", n)
	}
	q := alignQuery(e, string(query))
	if len(q) != maxAlignQueryWords {
		t.Fatalf("aligned query words %d, want %d", len(q), maxAlignQueryWords)
	}
	for _, w := range q {
		if w.id >= maxAlignQueryWords {
			t.Errorf("kept %q, one of the 36 most frequent words", tab.Words[w.id])
		}
	}
}

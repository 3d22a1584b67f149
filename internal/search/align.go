package search

import (
	"cmp"
	"slices"

	"github.com/kljensen/snowball/english"
)

// maxAlignQueryWords bounds the query words alignScore compares.
const maxAlignQueryWords = 64

// alignWord is one distinct known content word of a text: its row in the
// static vector table and its SIF weight a/(a+p(w)).
type alignWord struct {
	id int32
	w  float32
}

// wordBag returns the distinct known non-stop words of text with their SIF
// weights: the words the StaticEmbedder averages.
func wordBag(e *StaticEmbedder, text string) []alignWord {
	var out []alignWord
	seen := map[int32]struct{}{}
	splitWords(text, func(w string) {
		if english.IsStopWord(w) {
			return
		}
		id, ok := e.lookup(w)
		if !ok {
			return
		}
		if _, dup := seen[id]; dup {
			return
		}
		seen[id] = struct{}{}
		out = append(out, alignWord{id: id, w: float32(e.sifWeight(id))})
	})
	return out
}

// alignScore is the word-alignment similarity of a query and a document
// (a BERTScore-style F1 over static word vectors, docs/search.md "What each
// change added"): R is the SIF-weighted mean, over the query's words, of
// each word's best cosine with a document word, P the same from the
// document's side, and the score is 2PR/(P+R), negative cosines counting 0.
func alignScore(e *StaticEmbedder, q, d []alignWord) float32 {
	if len(q) == 0 || len(d) == 0 {
		return 0
	}
	t := e.table
	bestD := make([]float32, len(d))
	var rNum, rDen float32
	for _, qw := range q {
		qr, qs := t.RowAt(qw.id)
		var best float32
		for j, dw := range d {
			dr, ds := t.RowAt(dw.id)
			c := float32(dot8(qr, dr)) * qs * ds
			best = max(best, c)
			bestD[j] = max(bestD[j], c)
		}
		rNum += qw.w * best
		rDen += qw.w
	}
	var pNum, pDen float32
	for j, dw := range d {
		pNum += dw.w * bestD[j]
		pDen += dw.w
	}
	r, p := rNum/rDen, pNum/pDen
	if r+p == 0 {
		return 0
	}
	return 2 * r * p / (r + p)
}

// alignQuery is the word bag of a query, cut to its maxAlignQueryWords
// rarest words: a 4 KiB query has hundreds of distinct words, its rarest
// ones (highest SIF weight) carry the alignment, and the cost stays bounded
// (at most 64 × depth × the words of a tool int8 dot products).
func alignQuery(e *StaticEmbedder, text string) []alignWord {
	q := wordBag(e, text)
	if len(q) > maxAlignQueryWords {
		slices.SortStableFunc(q, func(a, b alignWord) int { return cmp.Compare(b.w, a.w) })
		q = q[:maxAlignQueryWords]
	}
	return q
}

// realign re-ranks the best depth candidates of fused by adding
// Options.AlignWeight × their alignment score with text, and returns them
// as a new scratch (the other candidates are dropped: they cannot reach
// the results, whose length is at most depth).
func (s *Snapshot) realign(fused *scratch, text string, depth int) *scratch {
	q := alignQuery(s.ix.static, text)
	top := s.topSlots(fused.hits, fused.scores, depth)
	out := getScratch(len(s.slots))
	w := float32(s.ix.opts.AlignWeight)
	for _, slot := range top {
		v := fused.scores[slot]
		if a := alignScore(s.ix.static, q, s.slots[slot].words); a > 0 {
			v += w * a
		}
		out.scores[slot], out.fields[slot] = v, fused.fields[slot]
		out.hits = append(out.hits, slot)
	}
	return out
}

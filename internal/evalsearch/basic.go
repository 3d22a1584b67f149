package evalsearch

import (
	"math"
	"slices"
	"unicode"
	"unicode/utf8"
)

// basicBM25 is the evaluation-only baseline of the toolret READMEs: plain
// BM25 (k1 1.2, b 0.75, Lucene idf ln(1+(N-df+0.5)/(df+0.5))) over
// name + description; text lower-cased and camelCase split, tokens are runs
// of [a-z0-9] plus each non-ASCII letter on its own; each distinct query
// term counts once; ties in catalog order.
type basicBM25 struct {
	names    []string
	lens     []float64
	avg      float64
	postings map[string][]basicPosting
}

type basicPosting struct {
	doc int
	tf  float64
}

func basicTokens(s string) []string {
	var out []string
	var buf []byte
	flush := func() {
		if len(buf) > 0 {
			out = append(out, string(buf))
			buf = buf[:0]
		}
	}
	var prev rune
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			buf = append(buf, byte(r))
		case r >= 'A' && r <= 'Z':
			if prev >= 'a' && prev <= 'z' {
				flush()
			}
			buf = append(buf, byte(r+'a'-'A'))
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			flush()
			out = append(out, string(unicode.ToLower(r)))
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

func newBasicBM25(tools []Tool) *basicBM25 {
	b := &basicBM25{postings: map[string][]basicPosting{}}
	var total float64
	for i, t := range tools {
		toks := basicTokens(t.Name + " " + t.Description)
		tf := map[string]float64{}
		for _, tok := range toks {
			tf[tok]++
		}
		for tok, n := range tf {
			b.postings[tok] = append(b.postings[tok], basicPosting{doc: i, tf: n})
		}
		b.names = append(b.names, t.Name)
		b.lens = append(b.lens, float64(len(toks)))
		total += float64(len(toks))
	}
	if len(tools) > 0 {
		b.avg = total / float64(len(tools))
	}
	return b
}

func (b *basicBM25) search(q string, k int) []string {
	const k1, bb = 1.2, 0.75
	scores := make([]float64, len(b.names))
	seen := map[string]bool{}
	n := float64(len(b.names))
	for _, t := range basicTokens(q) {
		if seen[t] {
			continue
		}
		seen[t] = true
		list := b.postings[t]
		if len(list) == 0 {
			continue
		}
		df := float64(len(list))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range list {
			norm := 1 - bb + bb*b.lens[p.doc]/b.avg
			scores[p.doc] += idf * p.tf * (k1 + 1) / (p.tf + k1*norm)
		}
	}
	var hits []int
	for i, s := range scores {
		if s > 0 {
			hits = append(hits, i)
		}
	}
	slices.SortStableFunc(hits, func(x, y int) int {
		switch {
		case scores[x] > scores[y]:
			return -1
		case scores[x] < scores[y]:
			return 1
		}
		return 0
	})
	if len(hits) > k {
		hits = hits[:k]
	}
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = b.names[h]
	}
	return out
}

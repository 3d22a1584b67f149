package search

import (
	_ "embed"
	"strings"
	"sync"
)

// synonymsText is the WordNet synonym table written by
// scripts/vectors/synonyms: one line per word, "word syn1 syn2 ...", the
// single-word lemmas of the word's most frequent WordNet 3.0 sense that are
// in the static vectors' vocabulary (WordNet licence:
// internal/search/vectors/LICENSES.md).
//
//go:embed synonyms.txt
var synonymsText string

var (
	synonymsOnce sync.Once
	synonymMap   map[string][]string
)

// synonyms returns the synonyms of a lower-cased surface word.
func synonyms(w string) []string {
	synonymsOnce.Do(func() {
		synonymMap = make(map[string][]string, 8192)
		for line := range strings.Lines(synonymsText) {
			fs := strings.Fields(line)
			if len(fs) > 1 {
				synonymMap[fs[0]] = fs[1:]
			}
		}
	})
	return synonymMap[w]
}

// weightedTerm is a query term with its weight in BM25F.
type weightedTerm struct {
	term   string
	weight float32
}

// weightedQueryTerms returns the distinct index terms of a query with
// weight 1 and, when synWeight > 0, the index terms of the WordNet synonyms
// of its words that the query does not already contain, with weight
// synWeight (each distinct term once).
func weightedQueryTerms(s string, synWeight float32) []weightedTerm {
	base := queryTerms(s)
	out := make([]weightedTerm, 0, len(base))
	seen := make(map[string]struct{}, len(base))
	for _, t := range base {
		out = append(out, weightedTerm{t, 1})
		seen[t] = struct{}{}
	}
	if synWeight <= 0 {
		return out
	}
	splitWords(s, func(w string) {
		if term(w) == "" {
			return
		}
		for _, syn := range synonyms(w) {
			t := term(syn)
			if t == "" {
				continue
			}
			if _, ok := seen[t]; ok {
				continue
			}
			seen[t] = struct{}{}
			out = append(out, weightedTerm{t, synWeight})
		}
	})
	return out
}

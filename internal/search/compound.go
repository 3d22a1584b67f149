package search

import (
	"math"
	"sync"

	"github.com/toolplane/toolplane/internal/search/vectors"
)

// Compound-name splitting (docs/search.md "What each change added"). Many
// tool names are words written together ("diceroller", "socialsearch",
// "themeparkhipster"): as one token they match no query word. A name word
// that is rare or unknown in the static vectors' corpus is segmented into
// known words by the most probable segmentation under a unigram model
// (dictionary-based decompounding, Koehn & Knight 2003, "Empirical methods
// for compound splitting"; the dynamic program of Norvig 2009, "Natural
// language corpus data"), the corpus counts being those of
// internal/search/vectors. The parts are added next to the word itself.

const (
	// compoundMinLen is the shortest word that is considered a compound.
	compoundMinLen = 6
	// compoundMaxProb: words at least this probable in the corpus are
	// ordinary words ("calculator", "universal") and are not split.
	compoundMaxProb = 1e-6
	// compoundMinPart is the shortest part; compoundMaxParts the most parts.
	compoundMinPart  = 2
	compoundMaxParts = 4
	// compoundShortProb: a part shorter than three letters must be at least
	// this probable ("db", "ai"), so that no rare fragments ("kr", "ul")
	// are glued into a segmentation.
	compoundShortProb = 2e-5
	// compoundMaxLen bounds the work per word (the program is O(n²)).
	compoundMaxLen = 40
)

var (
	compoundOnce  sync.Once
	compoundTable *vectors.Table
)

func compoundVocab() *vectors.Table {
	compoundOnce.Do(func() {
		t, err := vectors.Default()
		if err == nil {
			compoundTable = t
		}
	})
	return compoundTable
}

// splitCompound returns the parts of w (lower-cased) when w is a compound of
// known words, else nil. Every part is a word of the vocabulary at least
// compoundMinPart long (shorter than three letters only when common); among the segmentations into 2..compoundMaxParts
// parts the one with the highest Σ log p(part) wins.
func splitCompound(w string) []string {
	if len(w) < compoundMinLen || len(w) > compoundMaxLen || !isASCIIAlpha(w) {
		return nil
	}
	t := compoundVocab()
	if t == nil || t.Prob(w) >= compoundMaxProb {
		return nil
	}
	n := len(w)
	// best[k][i]: the best score of w[:i] in exactly k parts; from[k][i]
	// the start of its last part.
	var best [compoundMaxParts + 1][]float64
	var from [compoundMaxParts + 1][]int
	for k := range best {
		best[k] = make([]float64, n+1)
		from[k] = make([]int, n+1)
		for i := range best[k] {
			best[k][i] = math.Inf(-1)
		}
	}
	best[0][0] = 0
	for i := compoundMinPart; i <= n; i++ {
		for j := 0; j+compoundMinPart <= i; j++ {
			p := t.Prob(w[j:i])
			if p == 0 || (j == 0 && i == n) || (i-j < 3 && p < compoundShortProb) {
				continue
			}
			lp := math.Log(p)
			for k := 1; k <= compoundMaxParts; k++ {
				if v := best[k-1][j] + lp; v > best[k][i] {
					best[k][i], from[k][i] = v, j
				}
			}
		}
	}
	bk := 0
	for k := 2; k <= compoundMaxParts; k++ {
		if best[k][n] > math.Inf(-1) && (bk == 0 || best[k][n] > best[bk][n]) {
			bk = k
		}
	}
	if bk == 0 {
		return nil
	}
	parts := make([]string, bk)
	for k, i := bk, n; k > 0; k-- {
		j := from[k][i]
		parts[k-1] = w[j:i]
		i = j
	}
	return parts
}

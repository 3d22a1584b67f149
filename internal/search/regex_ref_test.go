package search

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// deerflowRegexReference is DeerFlow's regex search written plainly from
// docs/deerflow.md §2.3 (compile per query, match "<name> <description>"
// for every tool, score 2 on a name match, stable sort, cap). It is the
// baseline of the benchmarks and the oracle of TestRegexMatchesReference.
func deerflowRegexReference(docs []Document, query string, limit int) []Result {
	re, err := regexp.Compile("(?i)" + query)
	if err != nil {
		re = regexp.MustCompile("(?i)" + regexp.QuoteMeta(query))
	}
	var out []Result
	for _, d := range docs {
		if !re.MatchString(d.Name + " " + d.Description) {
			continue
		}
		score := 1.0
		if re.MatchString(d.Name) {
			score = 2
		}
		out = append(out, Result{Name: d.Name, Score: score})
	}
	slices.SortStableFunc(out, func(a, b Result) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// TestRegexMatchesReference checks the REGEX mode (with its literal fast
// path) against the plain reference on random ASCII and non-ASCII texts.
func TestRegexMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	alphabet := []string{"a", "B", "c", "Slack", "file", " ", "_", ".", "(", "+", "é", "É", "ſ", "K", "k", "s", "S", "ß"}
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	var docs []Document
	for i := range 300 {
		docs = append(docs, Document{Name: word(1+rng.IntN(3)) + "_" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Description: word(rng.IntN(12))})
	}
	ix := newTestIndex(t, docs)
	queries := []string{"slack", "SLACK", "k", "s", "é", "É", "ſ", "(", "a+", "c++", "file.", "b c", "S.a", "(?-i)B", "[a-c]+", "x{3}", "ß"}
	for range 200 {
		queries = append(queries, word(1+rng.IntN(3)))
	}
	for _, q := range queries {
		if strings.TrimSpace(q) == "" || strings.HasPrefix(strings.TrimSpace(q), "+") || strings.HasPrefix(strings.TrimSpace(q), "select:") {
			continue
		}
		q = strings.TrimSpace(q)
		got := search(t, ix, Request{Query: q, Mode: ModeRegex, Limit: 1000})
		want := deerflowRegexReference(docs, q, 1000)
		if len(got.Results) != len(want) {
			t.Fatalf("%q: %d results, reference %d", q, len(got.Results), len(want))
		}
		for i := range want {
			if got.Results[i].Name != want[i].Name || got.Results[i].Score != want[i].Score {
				t.Fatalf("%q #%d: %s/%v, reference %s/%v", q, i, got.Results[i].Name, got.Results[i].Score, want[i].Name, want[i].Score)
			}
		}
	}
}

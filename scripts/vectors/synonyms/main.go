// Command synonyms writes the WordNet synonym table of internal/search
// (synonyms.txt, docs/search.md "What was measured"): for every single-word
// lemma of WordNet 3.0 (Debian's wordnet-base) that is in the static
// vectors' vocabulary, the other single-word lemmas of its most frequent
// sense (the first synset listed in index.noun / index.verb / index.adj /
// index.adv) that are in the vocabulary too, at most -max per word.
//
// Output: one line per word, "word syn1 syn2 ...", sorted.
//
// Usage: go run ./scripts/vectors/synonyms -wordnet /usr/share/wordnet > internal/search/synonyms.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane/internal/search/vectors"
)

func main() {
	dir := flag.String("wordnet", "/usr/share/wordnet", "WordNet dict folder (wordnet-base)")
	maxSyn := flag.Int("max", 4, "synonyms per word")
	flag.Parse()
	tab, err := vectors.Default()
	if err != nil {
		log.Fatal(err)
	}
	vocab := make(map[string]bool, len(tab.Words))
	for _, w := range tab.Words {
		vocab[w] = true
	}
	single := func(w string) bool {
		if w == "" {
			return false
		}
		for i := 0; i < len(w); i++ {
			if c := w[i]; c < 'a' || c > 'z' {
				return false
			}
		}
		return vocab[w]
	}
	syn := map[string][]string{}
	bestTag := map[string]int{}
	for _, pos := range []string{"noun", "verb", "adj", "adv"} {
		data := readData(filepath.Join(*dir, "data."+pos))
		f, err := os.Open(filepath.Join(*dir, "index."+pos))
		if err != nil {
			log.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, " ") {
				continue // licence header
			}
			fs := strings.Fields(line)
			if len(fs) < 6 || !single(fs[0]) {
				continue
			}
			nSyn, _ := strconv.Atoi(fs[2])
			nPtr, _ := strconv.Atoi(fs[3])
			if len(fs) < 4+nPtr+3 {
				continue
			}
			tagged, _ := strconv.Atoi(fs[4+nPtr+1])
			offs := fs[4+nPtr+2:]
			if nSyn == 0 || len(offs) == 0 {
				continue
			}
			if prev, ok := bestTag[fs[0]]; ok && prev >= tagged {
				continue
			}
			bestTag[fs[0]] = tagged
			var list []string
			for _, w := range data[offs[0]] {
				if w != fs[0] && single(w) && !slices.Contains(list, w) && len(list) < *maxSyn {
					list = append(list, w)
				}
			}
			if len(list) == 0 {
				delete(syn, fs[0])
			} else {
				syn[fs[0]] = list
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			log.Fatal(err)
		}
	}
	words := make([]string, 0, len(syn))
	for w := range syn {
		words = append(words, w)
	}
	slices.Sort(words)
	out := bufio.NewWriter(os.Stdout)
	for _, w := range words {
		fmt.Fprintln(out, w+" "+strings.Join(syn[w], " "))
	}
	if err := out.Flush(); err != nil {
		log.Fatal(err)
	}
}

// readData maps each synset offset of a data.* file to its lemmas
// (lower-cased, adjective markers such as "(a)" removed).
func readData(path string) map[string][]string {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, " ") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 4 {
			continue
		}
		n, err := strconv.ParseInt(fs[3], 16, 32)
		if err != nil {
			continue
		}
		var lemmas []string
		for i := 0; i < int(n) && 4+2*i < len(fs); i++ {
			w := strings.ToLower(fs[4+2*i])
			if j := strings.IndexByte(w, '('); j >= 0 {
				w = w[:j]
			}
			lemmas = append(lemmas, w)
		}
		out[fs[0]] = lemmas
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	return out
}

// Command wordnet writes WordNet 3.0 (Debian's wordnet-base) as training
// lines for the static word vectors (scripts/vectors/build.sh,
// docs/search.md "Static word vectors: provenance"): one line per synset
// holding its lemmas, the lemmas of the synsets it points to as hypernym
// (@, @i), similar-to (&) and, with -related (the default), derivationally
// related (+, any part of speech), then its gloss. Putting synonyms and their
// hypernyms into one context window is what brings "petrol" next to
// "gasoline" and "horoscope" next to "astrology"; the glosses alone (the
// previous corpus) leave many lemmas out of the vocabulary.
//
// Usage: go run ./scripts/vectors/wordnet -wordnet /usr/share/wordnet > wordnet.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

type synset struct {
	words []string
	ptrs  []string // "pos:offset" of the synsets pointed to
	gloss string
}

func main() {
	dir := flag.String("wordnet", "/usr/share/wordnet", "WordNet dict folder (wordnet-base)")
	related := flag.Bool("related", true, "add derivationally related lemmas (+)")
	flag.Parse()
	all := map[string]*synset{}
	var order []string
	for _, pos := range []string{"noun", "verb", "adj", "adv"} {
		f, err := os.Open(filepath.Join(*dir, "data."+pos))
		if err != nil {
			log.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "  ") {
				continue // licence header
			}
			s, key, err := parse(line, *related)
			if err != nil {
				log.Fatalf("data.%s: %v", pos, err)
			}
			all[key] = s
			order = append(order, key)
		}
		if err := sc.Err(); err != nil {
			log.Fatal(err)
		}
		f.Close()
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for _, key := range order {
		s := all[key]
		parts := append([]string(nil), s.words...)
		for _, p := range s.ptrs {
			if t, ok := all[p]; ok {
				parts = append(parts, t.words...)
			}
		}
		parts = append(parts, s.gloss)
		fmt.Fprintln(w, strings.Join(parts, " "))
	}
}

// posKey maps the synset type letters of data files and pointers to the
// file they live in (satellite adjectives s are in data.adj).
func posKey(t string) string {
	switch t {
	case "n":
		return "n"
	case "v":
		return "v"
	case "a", "s":
		return "a"
	case "r":
		return "r"
	}
	return t
}

// parse reads one data line: offset lex_filenum ss_type w_cnt (word lex_id)×w_cnt
// p_cnt (ptr offset pos source/target)×p_cnt [frames] | gloss.
func parse(line string, related bool) (*synset, string, error) {
	head, gloss, _ := strings.Cut(line, " | ")
	f := strings.Fields(head)
	if len(f) < 4 {
		return nil, "", fmt.Errorf("short line %q", line)
	}
	key := posKey(f[2]) + ":" + f[0]
	wc, err := strconv.ParseUint(f[3], 16, 16)
	if err != nil {
		return nil, "", fmt.Errorf("word count %q: %v", f[3], err)
	}
	i := 4
	s := &synset{gloss: strings.TrimSpace(gloss)}
	for range wc {
		if i+1 >= len(f) {
			return nil, "", fmt.Errorf("truncated words in %q", line)
		}
		word := f[i]
		if p := strings.IndexByte(word, '('); p > 0 { // adjective markers: "big(a)"
			word = word[:p]
		}
		s.words = append(s.words, strings.ReplaceAll(word, "_", " "))
		i += 2
	}
	if i >= len(f) {
		return s, key, nil
	}
	pc, err := strconv.Atoi(f[i])
	if err != nil {
		return nil, "", fmt.Errorf("pointer count %q: %v", f[i], err)
	}
	i++
	for range pc {
		if i+3 >= len(f) {
			return nil, "", fmt.Errorf("truncated pointers in %q", line)
		}
		sym, off, pos := f[i], f[i+1], f[i+2]
		switch sym {
		case "@", "@i", "&":
			s.ptrs = append(s.ptrs, posKey(pos)+":"+off)
		case "+":
			if related {
				s.ptrs = append(s.ptrs, posKey(pos)+":"+off)
			}
		}
		i += 4
	}
	return s, key, nil
}

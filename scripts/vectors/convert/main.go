// Command convert turns a fastText text .vec file into the compact binary
// format of internal/search/vectors (unit-normalised, int8-quantised).
//
// Word counts for SIF weighting are taken from the training corpus (-corpus,
// whitespace-separated tokens); without it they are estimated from the
// frequency rank of the .vec file (Zipf, count ∝ 1/rank).
//
// Usage: go run ./scripts/vectors/convert -in vec.vec -corpus train.txt -out internal/search/vectors/words.bin
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane/internal/search/vectors"
)

func main() {
	in := flag.String("in", "", "fastText .vec text file (required)")
	corpus := flag.String("corpus", "", "training text to count words from (optional)")
	out := flag.String("out", "", "output binary file (required)")
	flag.Parse()
	if *in == "" || *out == "" {
		log.Fatal("convert: -in and -out are required")
	}
	words, vecs, dim, err := readVec(*in)
	if err != nil {
		log.Fatal(err)
	}
	counts := make([]uint64, len(words))
	if *corpus != "" {
		c, err := countWords(*corpus)
		if err != nil {
			log.Fatal(err)
		}
		for i, w := range words {
			counts[i] = max(c[w], 1)
		}
	} else {
		for i := range words {
			counts[i] = uint64(1_000_000_000 / (i + 1))
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	if err := vectors.Encode(f, dim, words, counts, vecs); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wrote %s: %d words × %d dims\n", *out, len(words), dim)
}

func readVec(path string) (words []string, vecs [][]float32, dim int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() {
		return nil, nil, 0, fmt.Errorf("convert: %s: empty file", path)
	}
	hdr := strings.Fields(sc.Text())
	if len(hdr) != 2 {
		return nil, nil, 0, fmt.Errorf("convert: %s: bad header %q", path, sc.Text())
	}
	if dim, err = strconv.Atoi(hdr[1]); err != nil {
		return nil, nil, 0, fmt.Errorf("convert: %s: bad dim: %w", path, err)
	}
	line := 1
	for sc.Scan() {
		line++
		fields := strings.Fields(sc.Text())
		if len(fields) != dim+1 {
			return nil, nil, 0, fmt.Errorf("convert: %s:%d: %d fields, want %d", path, line, len(fields), dim+1)
		}
		if fields[0] == "</s>" {
			continue
		}
		v := make([]float32, dim)
		for j := range dim {
			x, err := strconv.ParseFloat(fields[j+1], 32)
			if err != nil {
				return nil, nil, 0, fmt.Errorf("convert: %s:%d: %w", path, line, err)
			}
			v[j] = float32(x)
		}
		words = append(words, fields[0])
		vecs = append(vecs, v)
	}
	return words, vecs, dim, sc.Err()
}

func countWords(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := make(map[string]uint64)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		c[sc.Text()]++
	}
	return c, sc.Err()
}

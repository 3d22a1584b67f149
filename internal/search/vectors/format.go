// Package vectors holds Toolplane's committed static word vectors and their
// binary codec.
//
// The vectors are 100-dimension fastText skip-gram vectors trained offline on
// Debian long package descriptions, WordNet glosses and MCP tool texts of
// the catalogs' training part (docs/search.md, "Static word vectors:
// provenance"); scripts/vectors/build.sh rebuilds them and LICENSES.md
// records the provenance. They are stored unit-normalised and int8-quantised with one
// float32 scale per word, so the embedded file is a few MB and loads in
// milliseconds without parsing text.
//
// Binary layout (all integers little-endian):
//
//	magic   [6]byte  "TPWV1\n"
//	dim     uint32   vector dimension
//	n       uint32   vocabulary size
//	total   uint64   corpus token count (sum of the counts below)
//	n × { len uvarint, word [len]byte (UTF-8, lower case), count uvarint }
//	n × scale float32  (row i decodes as int8 × scale[i])
//	n × dim int8
package vectors

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// magic identifies the version-1 binary format.
const magic = "TPWV1\n"

//go:embed words.bin
var embedded []byte

// Table is a decoded vector table. Vectors are unit length (or zero) and
// stay int8-quantised in memory as in the file, row i being Q[i·Dim:] ×
// Scales[i] (a quarter of the memory of float32 rows: 3.7 MB instead of
// 14.8 MB for 37k words); Table is immutable after decoding and safe for
// concurrent use.
type Table struct {
	// Dim is the vector dimension.
	Dim int
	// Words lists the vocabulary in file order (most frequent first).
	Words []string
	// Counts holds the corpus count of each word, aligned with Words.
	Counts []uint64
	// Total is the corpus token count used to turn Counts into probabilities.
	Total uint64
	// Q holds len(Words) × Dim int8 values, row-major.
	Q []int8
	// Scales holds one scale per row.
	Scales []float32

	index map[string]int32
}

// Lookup returns a new float32 copy of the row of word, or nil when the word
// is not in the vocabulary.
func (t *Table) Lookup(word string) []float32 {
	q, s, _, ok := t.Row(word)
	if !ok {
		return nil
	}
	out := make([]float32, len(q))
	for j, x := range q {
		out[j] = float32(x) * s
	}
	return out
}

// Row returns the quantised row of word (shared, not to be modified), its
// scale and its probability; ok is false for unknown words.
func (t *Table) Row(word string) (q []int8, scale float32, prob float64, ok bool) {
	i, found := t.index[word]
	if !found {
		return nil, 0, 0, false
	}
	if t.Total > 0 {
		prob = float64(t.Counts[i]) / float64(t.Total)
	}
	return t.Q[int(i)*t.Dim : int(i+1)*t.Dim], t.Scales[i], prob, true
}

// ID returns the row number of word; ok is false for unknown words.
func (t *Table) ID(word string) (id int32, ok bool) {
	id, ok = t.index[word]
	return id, ok
}

// RowAt returns the quantised row id (shared, not to be modified) and its
// scale; id must come from ID.
func (t *Table) RowAt(id int32) (q []int8, scale float32) {
	return t.Q[int(id)*t.Dim : int(id+1)*t.Dim], t.Scales[id]
}

// Prob returns the corpus probability of word (count/total), or 0 when the
// word is unknown.
func (t *Table) Prob(word string) float64 {
	i, ok := t.index[word]
	if !ok || t.Total == 0 {
		return 0
	}
	return float64(t.Counts[i]) / float64(t.Total)
}

// Entry returns a float32 copy of the row and the probability of word in one
// lookup; ok is false for unknown words.
func (t *Table) Entry(word string) (vec []float32, prob float64, ok bool) {
	_, _, prob, ok = t.Row(word)
	if !ok {
		return nil, 0, false
	}
	return t.Lookup(word), prob, true
}

var (
	defaultOnce  sync.Once
	defaultTable *Table
	defaultErr   error
)

// Default decodes the embedded vector file once and returns it. The error is
// non-nil only if the committed file is corrupt.
func Default() (*Table, error) {
	defaultOnce.Do(func() {
		defaultTable, defaultErr = Decode(embedded)
	})
	return defaultTable, defaultErr
}

// Decode parses the binary format described in the package documentation.
func Decode(b []byte) (*Table, error) {
	if len(b) < len(magic)+16 || string(b[:len(magic)]) != magic {
		return nil, errors.New("vectors: bad magic (not a TPWV1 file)")
	}
	p := b[len(magic):]
	dim := int(binary.LittleEndian.Uint32(p))
	n := int(binary.LittleEndian.Uint32(p[4:]))
	total := binary.LittleEndian.Uint64(p[8:])
	p = p[16:]
	if dim <= 0 || dim > 4096 || n < 0 || n > 10_000_000 {
		return nil, fmt.Errorf("vectors: implausible header dim=%d n=%d", dim, n)
	}
	t := &Table{Dim: dim, Words: make([]string, n), Counts: make([]uint64, n), Total: total, index: make(map[string]int32, n)}
	for i := range n {
		l, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < l {
			return nil, fmt.Errorf("vectors: truncated word %d", i)
		}
		p = p[k:]
		w := string(p[:l])
		p = p[l:]
		c, k := binary.Uvarint(p)
		if k <= 0 {
			return nil, fmt.Errorf("vectors: truncated count of word %d", i)
		}
		p = p[k:]
		t.Words[i], t.Counts[i] = w, c
		t.index[w] = int32(i)
	}
	if len(p) != n*4+n*dim {
		return nil, fmt.Errorf("vectors: payload is %d bytes, want %d", len(p), n*4+n*dim)
	}
	scales := p[:n*4]
	q := p[n*4:]
	t.Scales = make([]float32, n)
	for i := range n {
		t.Scales[i] = math.Float32frombits(binary.LittleEndian.Uint32(scales[i*4:]))
	}
	t.Q = make([]int8, n*dim)
	for i, b := range q {
		t.Q[i] = int8(b)
	}
	return t, nil
}

// Encode writes words (with counts) and their vectors in the binary format.
// Each vector is normalised to unit length before int8 quantisation; vecs
// must hold len(words) rows of dim values.
func Encode(w io.Writer, dim int, words []string, counts []uint64, vecs [][]float32) error {
	if len(words) != len(counts) || len(words) != len(vecs) {
		return errors.New("vectors: words, counts and vecs differ in length")
	}
	bw := bufio.NewWriter(w)
	var total uint64
	for _, c := range counts {
		total += c
	}
	var hdr [16]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(dim))
	binary.LittleEndian.PutUint32(hdr[4:], uint32(len(words)))
	binary.LittleEndian.PutUint64(hdr[8:], total)
	bw.WriteString(magic)
	bw.Write(hdr[:])
	var tmp [binary.MaxVarintLen64]byte
	for i, word := range words {
		bw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(word)))])
		bw.WriteString(word)
		bw.Write(tmp[:binary.PutUvarint(tmp[:], counts[i])])
	}
	quant := make([]byte, 0, len(words)*dim)
	var scales bytes.Buffer
	for i, v := range vecs {
		if len(v) != dim {
			return fmt.Errorf("vectors: row %d (%q) has %d values, want %d", i, words[i], len(v), dim)
		}
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		norm = math.Sqrt(norm)
		var maxAbs float64
		for _, x := range v {
			if a := math.Abs(float64(x)); a > maxAbs {
				maxAbs = a
			}
		}
		scale := 0.0
		if norm > 0 && maxAbs > 0 {
			scale = maxAbs / norm / 127
		}
		var sb [4]byte
		binary.LittleEndian.PutUint32(sb[:], math.Float32bits(float32(scale)))
		scales.Write(sb[:])
		for _, x := range v {
			qv := 0.0
			if scale > 0 {
				qv = math.Round(float64(x) / norm / scale)
			}
			quant = append(quant, byte(int8(max(-127, min(127, qv)))))
		}
	}
	bw.Write(scales.Bytes())
	bw.Write(quant)
	return bw.Flush()
}

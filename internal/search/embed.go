package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"sync"

	"github.com/kljensen/snowball/english"

	"github.com/toolplane/toolplane/internal/search/vectors"
)

// Embedder turns texts into vectors for SEMANTIC and AUTO ranking. Vectors
// of one Embedder must all have the same dimension; a zero vector means
// "nothing known about this text" and never matches. Implementations must be
// safe for concurrent use. Errors should wrap the cause; the Index wraps
// them in *EmbedError (ErrEmbedding).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// SIFParameter is the a of the SIF weight a/(a+p(w)) (Arora et al. 2017;
// recipe in docs/search.md, "Static word vectors").
const SIFParameter = 1e-3

// StaticEmbedder embeds text as the SIF-weighted mean of unit static word
// vectors (docs/search.md, "Static word vectors"): words are lower-cased and split like index
// terms (no stemming, since the vectors were trained on surface forms),
// Snowball English stop words and unknown words are skipped (stop-word
// removal measured +0.08 Recall@5 on metatool DEV), and the result is L2-normalised. Centring is
// done by the Index against the mean of the indexed documents. It never
// returns an error and makes no network calls.
type StaticEmbedder struct {
	table *vectors.Table
	// fallback embeds a word missing from the vocabulary as the vocabulary
	// word with its Snowball stem (docs/search.md, "Static word vectors").
	fallback bool
	stemOnce sync.Once
	// stems maps a Snowball stem that is not itself a vocabulary word to
	// the most frequent vocabulary word with that stem; built on the first
	// unknown word.
	stems map[string]int32
}

// NewStaticEmbedder returns a StaticEmbedder over t that skips unknown words.
func NewStaticEmbedder(t *vectors.Table) *StaticEmbedder { return &StaticEmbedder{table: t} }

// NewStaticEmbedderStemFallback returns a StaticEmbedder over t that embeds
// a word missing from the vocabulary as the vocabulary word with the same
// Snowball stem ("renting" → "rent", "smartphones" → "smartphone"); the
// most frequent one when several share it. Words with no such relative are
// skipped. It is what DefaultEmbedder uses
// (docs/decisions/0056-static-vectors-wordnet-synsets.md).
func NewStaticEmbedderStemFallback(t *vectors.Table) *StaticEmbedder {
	return &StaticEmbedder{table: t, fallback: true}
}

// lookup returns the vocabulary row of word, falling back to a word of the
// same stem when the embedder does.
func (e *StaticEmbedder) lookup(w string) (id int32, ok bool) {
	if id, ok = e.table.ID(w); ok || !e.fallback || len(w) < 3 || !isASCIIAlpha(w) {
		return id, ok
	}
	st := english.Stem(w, false)
	if id, ok = e.table.ID(st); ok {
		return id, true
	}
	e.stemOnce.Do(e.buildStems)
	id, ok = e.stems[st]
	return id, ok
}

// buildStems fills stems from the vocabulary (most frequent first, so the
// first word of a stem wins).
func (e *StaticEmbedder) buildStems() {
	m := make(map[string]int32)
	for i, w := range e.table.Words {
		if len(w) < 3 || !isASCIIAlpha(w) {
			continue
		}
		st := english.Stem(w, false)
		if st == w {
			continue
		}
		if _, known := e.table.ID(st); known {
			continue
		}
		if _, ok := m[st]; !ok {
			m[st] = int32(i)
		}
	}
	e.stems = m
}

var (
	defaultEmbedderOnce sync.Once
	defaultEmbedder     *StaticEmbedder
	defaultEmbedderErr  error
)

// DefaultEmbedder returns the StaticEmbedder over the committed vectors
// (internal/search/vectors), decoding them once, on first use (about 0.1 s).
func DefaultEmbedder() (*StaticEmbedder, error) {
	defaultEmbedderOnce.Do(func() {
		t, err := vectors.Default()
		if err != nil {
			defaultEmbedderErr = err
			return
		}
		defaultEmbedder = NewStaticEmbedderStemFallback(t)
	})
	return defaultEmbedder, defaultEmbedderErr
}

// Dim returns the vector dimension.
func (e *StaticEmbedder) Dim() int { return e.table.Dim }

// Embed implements Embedder.
func (e *StaticEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out[i] = e.embedOne(t)
	}
	return out, nil
}

// sifWeight is the SIF weight a/(a+p(w)) of the word with row id, p(w) its
// frequency in the vectors' training corpus.
func (e *StaticEmbedder) sifWeight(id int32) float64 {
	p := 0.0
	if e.table.Total > 0 {
		p = float64(e.table.Counts[id]) / float64(e.table.Total)
	}
	return SIFParameter / (SIFParameter + p)
}

func (e *StaticEmbedder) embedOne(text string) []float32 {
	dim := e.table.Dim
	acc := make([]float64, dim)
	n := 0
	splitWords(text, func(w string) {
		if english.IsStopWord(w) {
			return
		}
		id, ok := e.lookup(w)
		if !ok {
			return
		}
		q, scale := e.table.RowAt(id)
		wt := e.sifWeight(id) * float64(scale)
		for j, x := range q {
			acc[j] += wt * float64(x)
		}
		n++
	})
	out := make([]float32, dim)
	if n == 0 {
		return out
	}
	var norm float64
	for _, x := range acc {
		norm += x * x
	}
	if norm == 0 {
		return out
	}
	norm = math.Sqrt(norm)
	for j, x := range acc {
		out[j] = float32(x / norm)
	}
	return out
}

// VectorCache stores embedding vectors keyed by content hash (see
// VectorKey). The catalog backs it with its sqlite store; MemoryCache is the
// in-memory implementation. Implementations must be safe for concurrent use.
type VectorCache interface {
	// GetVectors returns the cached vectors of the keys it knows; missing
	// keys are simply absent from the map.
	GetVectors(ctx context.Context, keys []string) (map[string][]float32, error)
	// PutVectors stores vectors by key.
	PutVectors(ctx context.Context, vecs map[string][]float32) error
}

// VectorKey is the cache key of text embedded by model: the hex SHA-256 of
// model, a NUL byte and text.
func VectorKey(model, text string) string {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))
}

// MemoryCache is a VectorCache in memory, bounded to a number of entries
// (when full, new vectors are not stored).
type MemoryCache struct {
	mu  sync.RWMutex
	m   map[string][]float32
	max int
}

// NewMemoryCache returns a MemoryCache holding at most maxEntries vectors
// (<= 0 means 100,000).
func NewMemoryCache(maxEntries int) *MemoryCache {
	if maxEntries <= 0 {
		maxEntries = 100_000
	}
	return &MemoryCache{m: make(map[string][]float32), max: maxEntries}
}

// GetVectors implements VectorCache.
func (c *MemoryCache) GetVectors(_ context.Context, keys []string) (map[string][]float32, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string][]float32)
	for _, k := range keys {
		if v, ok := c.m[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// PutVectors implements VectorCache.
func (c *MemoryCache) PutVectors(_ context.Context, vecs map[string][]float32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range vecs {
		if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
			continue
		}
		c.m[k] = v
	}
	return nil
}

// Len returns the number of cached vectors.
func (c *MemoryCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// CachedEmbedder wraps an Embedder with a VectorCache: texts whose key
// (VectorKey(model, text)) is cached are not sent to the Embedder. Cache
// read or write failures are ignored (the Embedder is the source of truth).
type CachedEmbedder struct {
	inner Embedder
	model string
	cache VectorCache
}

// NewCachedEmbedder returns inner wrapped with cache; model must identify the
// embedding model (and its settings) so different models never share keys.
func NewCachedEmbedder(inner Embedder, model string, cache VectorCache) *CachedEmbedder {
	return &CachedEmbedder{inner: inner, model: model, cache: cache}
}

// Embed implements Embedder.
func (c *CachedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	keys := make([]string, len(texts))
	for i, t := range texts {
		keys[i] = VectorKey(c.model, t)
	}
	hit, err := c.cache.GetVectors(ctx, keys)
	if err != nil {
		hit = nil
	}
	out := make([][]float32, len(texts))
	var missIdx []int
	var missTexts []string
	for i, k := range keys {
		if v, ok := hit[k]; ok {
			out[i] = v
			continue
		}
		missIdx = append(missIdx, i)
		missTexts = append(missTexts, texts[i])
	}
	if len(missTexts) == 0 {
		return out, nil
	}
	vecs, err := c.inner.Embed(ctx, missTexts)
	if err != nil {
		return nil, err
	}
	put := make(map[string][]float32, len(vecs))
	for j, i := range missIdx {
		out[i] = vecs[j]
		put[keys[i]] = vecs[j]
	}
	_ = c.cache.PutVectors(ctx, put)
	return out, nil
}

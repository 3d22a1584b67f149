package search

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// FieldParam is the BM25F weight and length normalisation of one field.
type FieldParam struct {
	// Weight multiplies the field's term frequency (BM25F field boost).
	Weight float64
	// B is the length-normalisation strength in [0, 1].
	B float64
}

// BM25Params are the BM25F parameters (Robertson & Zaragoza 2009, "simple
// BM25F": per-field weighted, length-normalised term frequencies summed
// before one saturation with K1).
type BM25Params struct {
	// K1 is the term-frequency saturation.
	K1 float64
	// Name covers Document.Name and OriginalName, split on `_ - . /` and camelCase.
	Name FieldParam
	// Title covers Document.Title and Keywords.
	Title FieldParam
	// Description covers Document.Description.
	Description FieldParam
	// Params covers parameter names and descriptions.
	Params FieldParam
	// Server covers the server name and description.
	Server FieldParam
	// Delta is BM25+'s lower bound of a matched term's saturated tf (Lv &
	// Zhai 2011, "Lower-bounding term frequency normalization"): a term a
	// long document matches never counts less than Delta·idf. 0 is BM25.
	Delta float64
}

// DefaultBM25Params returns the parameters measured best on the DEV parts of
// the toolret benchmarks (docs/search.md). They are general field weights,
// not tuned to single queries.
func DefaultBM25Params() BM25Params {
	return BM25Params{
		K1:          1.2,
		Name:        FieldParam{Weight: 3.0, B: 0.5},
		Title:       FieldParam{Weight: 1.5, B: 0.5},
		Description: FieldParam{Weight: 1.0, B: 0.75},
		Params:      FieldParam{Weight: 0.5, B: 0.75},
		Server:      FieldParam{Weight: 0.5, B: 0.5},
	}
}

func (p BM25Params) fields() [numFields]FieldParam {
	return [numFields]FieldParam{p.Name, p.Title, p.Description, p.Params, p.Server}
}

// Fusion selects how AUTO combines lexical and semantic rankings.
type Fusion int

const (
	// FusionWeighted sums max-normalised BM25F scores and cosine similarities
	// with SemanticWeight (a calibrated weighted sum). It is the default:
	// it measured best on both DEV sets (docs/search.md).
	FusionWeighted Fusion = iota
	// FusionRRF is reciprocal-rank fusion: Σ 1/(RRFK + rank).
	FusionRRF
)

// Options configure an Index. Zero fields take the documented defaults.
type Options struct {
	// Embedder embeds documents and queries for SEMANTIC and AUTO; nil uses
	// DefaultEmbedder() (the committed static vectors).
	Embedder Embedder
	// DisableSemantic turns semantic ranking off: SEMANTIC returns no
	// results and AUTO is lexical only.
	DisableSemantic bool
	// BM25 holds the BM25F parameters; a zero K1 selects DefaultBM25Params().
	BM25 BM25Params
	// Fusion selects the AUTO fusion method (default FusionWeighted).
	Fusion Fusion
	// RRFK is the RRF constant (default 60).
	RRFK float64
	// SemanticWeight is the weight of the cosine term in FusionWeighted
	// (default 0.2, measured on both DEV sets; lexical gets 1 - SemanticWeight).
	SemanticWeight float64
	// MinSemanticScore is the cosine below which a document does not match
	// semantically (default 0.2; negative means no threshold).
	MinSemanticScore float64
	// SemanticDepth is how many semantic results RRF fusion considers
	// (default 100). The weighted sum needs no depth: it scores every
	// lexical hit's cosine and adds the semantic-only documents that can
	// reach the top results.
	SemanticDepth int
	// ANNMinDocs is the number of document vectors from which AUTO finds
	// semantic-only candidates with the IVF index instead of scanning every
	// vector (ann.go; default 2048; negative: always scan).
	ANNMinDocs int
	// SemanticServer adds the server's name and description to the text a
	// tool is embedded from (docs/search.md, "What was measured").
	SemanticServer bool
	// QueryIDFExponent raises each query term's idf to this power in BM25F
	// (0 or 1: plain idf); above 1 it favours the rare words of long task
	// queries over their generic ones.
	QueryIDFExponent float64
	// SynonymWeight, when > 0, expands BM25F queries with the WordNet
	// synonyms of their words (synonyms.go), each counting SynonymWeight
	// times its idf. 0 turns it off.
	SynonymWeight float64
	// ServerDiversity, in [0, 1), diversifies AUTO's results across servers
	// (MMR-style): each result's fused score is multiplied by
	// (1 − ServerDiversity)^n, n being the number of results of the same
	// server already chosen, greedily over the best 3·limit candidates.
	// 0 turns it off.
	ServerDiversity float64
	// PRFDocs, when > 0, turns on pseudo-relevance feedback (RM3, search.go
	// prf) in BM25 and AUTO: the PRFDocs best BM25F hits expand the query
	// with their PRFTerms most probable other terms, weighted up to
	// PRFWeight, and BM25F scores the expanded query. 0 (the default) turns
	// it off: measured, it adds on LiveMCPBench but not on MetaTool
	// (docs/decisions/0055-pseudo-relevance-feedback.md).
	PRFDocs int
	// PRFTerms is the number of expansion terms (default 10).
	PRFTerms int
	// PRFWeight is the weight of the most probable expansion term relative
	// to an original query term (1); the others are scaled by probability
	// (default 0.1, measured with PRFDocs 2; negative turns feedback off).
	PRFWeight float64
	// SplitCompoundNames adds, to the name field, the parts of name words
	// written together ("diceroller" → dice roller; compound.go).
	SplitCompoundNames bool
	// SplitCompoundSemantic does the same in the text the Embedder sees.
	SplitCompoundSemantic bool
	// AlignWeight, when > 0, re-ranks AUTO's best AlignDepth candidates by
	// adding AlignWeight × their word-alignment score (align.go) with the
	// static vectors (at most 64 query words, the rarest). It needs a
	// *StaticEmbedder (the default) and is ignored with any other Embedder.
	// 0 turns it off: measured, it does not add
	// (docs/decisions/0056-stem-fallback-and-third-round.md).
	AlignWeight float64
	// AlignDepth is how many fused candidates are re-ranked (default 50).
	AlignDepth int
	// ANNProbes is the number of IVF cells AUTO probes (default
	// max(8, ⌈2√cells⌉)).
	ANNProbes int
}

func (o Options) withDefaults() Options {
	if o.BM25.K1 == 0 {
		o.BM25 = DefaultBM25Params()
	}
	if o.RRFK <= 0 {
		o.RRFK = 60
	}
	if o.SemanticWeight == 0 {
		o.SemanticWeight = 0.2
	}
	if o.MinSemanticScore == 0 {
		o.MinSemanticScore = 0.2
	}
	if o.SemanticDepth <= 0 {
		o.SemanticDepth = 100
	}
	if o.ANNMinDocs == 0 {
		o.ANNMinDocs = 2048
	}
	if o.PRFWeight == 0 {
		o.PRFWeight = 0.1
	}
	if o.AlignDepth <= 0 {
		o.AlignDepth = 50
	}
	if o.PRFTerms <= 0 {
		o.PRFTerms = 10
	}
	return o
}

// Index is a concurrent, incrementally updated search index over Documents.
//
// Writers (Upsert, Remove, Replace) are serialised and build a new immutable
// snapshot next to the current one (copy-on-write: untouched documents,
// posting lists and vectors are shared), then publish it with one atomic
// pointer swap. Searches load the current snapshot and never wait for a
// writer nor see a half-built index.
//
// Catalog order — the order of select: results and of score ties — is
// insertion order: Upsert of an existing name keeps its place, new names go
// last, Replace sets the whole order.
type Index struct {
	opts     Options
	embedder Embedder
	embErr   error
	static   *StaticEmbedder // the static embedder for AlignWeight, nil when off
	mu       sync.Mutex      // serialises writers
	snap     atomic.Pointer[Snapshot]
}

// NewIndex returns an empty Index. When opts.Embedder is nil and the
// committed vectors cannot be decoded, semantic ranking is disabled and
// searches report it in Response.Degraded.
func NewIndex(opts Options) *Index {
	ix := &Index{opts: opts.withDefaults()}
	switch {
	case ix.opts.DisableSemantic:
	case ix.opts.Embedder != nil:
		ix.embedder = ix.opts.Embedder
	default:
		e, err := DefaultEmbedder()
		if err != nil {
			ix.embErr = err
		} else {
			ix.embedder = e
		}
	}
	if se, ok := ix.embedder.(*StaticEmbedder); ok && ix.opts.AlignWeight > 0 {
		ix.static = se
	}
	ix.snap.Store(&Snapshot{ix: ix, byName: map[string]int32{}, postings: map[string][]posting{}})
	return ix
}

// Snapshot returns the current immutable view; searches on it are
// consistent with each other whatever writers do meanwhile.
func (ix *Index) Snapshot() *Snapshot { return ix.snap.Load() }

// Search runs req on the current snapshot (see Snapshot.Search).
func (ix *Index) Search(ctx context.Context, req Request) (*Response, error) {
	return ix.snap.Load().Search(ctx, req)
}

// Len returns the number of indexed documents.
func (ix *Index) Len() int { return ix.snap.Load().Len() }

// termTF is one distinct term of a document with its per-field frequency
// (capped at 255).
type termTF struct {
	term string
	tf   [numFields]uint8
}

// posting is one (document slot, per-field tf) entry of a term.
type posting struct {
	slot int32
	tf   [numFields]uint8
}

// docData is the analysed, immutable form of one Document.
type docData struct {
	doc       Document
	hash      [32]byte
	terms     []termTF
	lens      [numFields]float32
	lowerName string
	regexText string      // "<name> <description>" (docs/deerflow.md §2.3)
	lowerText string      // strings.ToLower(regexText) when it is pure ASCII, else ""
	vec       []float32   // unit vector, nil when not embedded
	words     []alignWord // content words for AlignWeight, nil when off
	q8        []int8      // vec quantised (ann.go), nil when not embedded
	q8s       float32     // scale of q8: vec[i] ≈ q8[i]·q8s
}

func analyze(d Document, compounds bool) (*docData, error) {
	if d.Name == "" {
		return nil, &DocumentError{Name: d.Name, Reason: "name is empty"}
	}
	if !utf8.ValidString(d.Name) {
		return nil, &DocumentError{Name: d.Name, Reason: "name is not valid UTF-8"}
	}
	d.ParamNames = slices.Clone(d.ParamNames)
	d.ParamDescriptions = slices.Clone(d.ParamDescriptions)
	d.Keywords = slices.Clone(d.Keywords)
	dd := &docData{doc: d, hash: d.contentHash(), lowerName: strings.ToLower(d.Name), regexText: d.Name + " " + d.Description}
	if isASCII(dd.regexText) {
		dd.lowerText = strings.ToLower(dd.regexText)
	}
	idx := make(map[string]int, 32)
	texts := d.fieldTexts()
	for f := range numFields {
		n := 0
		for _, s := range texts[f] {
			add := func(w string) {
				t := term(w)
				if t == "" {
					return
				}
				n++
				i, ok := idx[t]
				if !ok {
					i = len(dd.terms)
					idx[t] = i
					dd.terms = append(dd.terms, termTF{term: t})
				}
				if dd.terms[i].tf[f] < math.MaxUint8 {
					dd.terms[i].tf[f]++
				}
			}
			splitWords(s, func(w string) {
				add(w)
				if compounds && f == fieldName {
					for _, part := range splitCompound(w) {
						add(part)
					}
				}
			})
		}
		dd.lens[f] = float32(n)
	}
	return dd, nil
}

// prepare analyses docs (last duplicate wins), reuses the vectors of
// unchanged documents of cur and embeds the rest. A failing embedder leaves
// those documents without vectors and returns an *EmbedError next to the
// analysed documents.
func (ix *Index) prepare(ctx context.Context, cur *Snapshot, docs []Document) ([]*docData, error) {
	last := make(map[string]int, len(docs))
	for i, d := range docs {
		last[d.ID()] = i
	}
	out := make([]*docData, 0, len(last))
	for i, d := range docs {
		if last[d.ID()] != i {
			continue
		}
		dd, err := analyze(d, ix.opts.SplitCompoundNames)
		if err != nil {
			return nil, err
		}
		if ix.static != nil {
			dd.words = wordBag(ix.static, dd.doc.semanticText(ix.opts.SemanticServer, ix.opts.SplitCompoundSemantic))
		}
		out = append(out, dd)
	}
	if ix.embedder == nil {
		return out, nil
	}
	var need []*docData
	var texts []string
	for _, dd := range out {
		if slot, ok := cur.byName[dd.doc.ID()]; ok {
			if old := cur.slots[slot]; old.hash == dd.hash && old.vec != nil {
				dd.vec, dd.q8, dd.q8s = old.vec, old.q8, old.q8s
				continue
			}
		}
		need = append(need, dd)
		texts = append(texts, dd.doc.semanticText(ix.opts.SemanticServer, ix.opts.SplitCompoundSemantic))
	}
	if len(need) == 0 {
		return out, nil
	}
	vecs, err := ix.embedder.Embed(ctx, texts)
	if err == nil && len(vecs) != len(texts) {
		err = errors.New("embedder returned a wrong number of vectors")
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return out, &EmbedError{Op: "documents", Err: err}
	}
	for i, dd := range need {
		if dd.vec = unit(vecs[i]); dd.vec != nil {
			dd.q8, dd.q8s = quantize(dd.vec)
		}
	}
	return out, nil
}

// unit returns a normalised copy of v, or nil for a zero or non-finite vector.
func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return nil
	}
	n = math.Sqrt(n)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// Upsert adds or replaces documents by Name (a duplicate name within docs:
// the last one wins). Unchanged documents keep their vectors. It returns a
// *DocumentError (nothing applied) for an invalid document, ctx.Err() if
// cancelled while embedding (nothing applied), or an *EmbedError after
// applying the documents lexically when the Embedder failed (their
// semantic vectors are retried on the next Upsert of the same documents).
func (ix *Index) Upsert(ctx context.Context, docs ...Document) error {
	if len(docs) == 0 {
		return nil
	}
	prepared, perr := ix.prepare(ctx, ix.snap.Load(), docs)
	if prepared == nil && perr != nil {
		return perr
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.snap.Store(ix.apply(ix.snap.Load(), nil, prepared))
	return perr
}

// Remove deletes documents by name; unknown names are ignored.
func (ix *Index) Remove(names ...string) {
	if len(names) == 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.snap.Store(ix.apply(ix.snap.Load(), names, nil))
}

// Replace makes docs the whole content of the index, in this catalog order.
// Errors are as for Upsert.
func (ix *Index) Replace(ctx context.Context, docs []Document) error {
	prepared, perr := ix.prepare(ctx, ix.snap.Load(), docs)
	if prepared == nil && perr != nil {
		return perr
	}
	empty := &Snapshot{ix: ix, byName: map[string]int32{}, postings: map[string][]posting{}}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.snap.Store(ix.apply(empty, nil, prepared))
	return perr
}

// apply builds the snapshot that results from removing names and upserting
// ups on old. old is never modified.
func (ix *Index) apply(old *Snapshot, removes []string, ups []*docData) *Snapshot {
	ns := &Snapshot{
		ix:     ix,
		slots:  slices.Clone(old.slots),
		order:  old.order,
		byName: maps.Clone(old.byName),
		keyed:  old.keyed,
		sumLen: old.sumLen,
		live:   old.live,
	}
	changed := make(map[int32]struct{})
	touched := make(map[string]struct{})
	adds := make(map[string][]posting)
	removed := false
	drop := func(slot int32) {
		d := ns.slots[slot]
		for _, t := range d.terms {
			touched[t.term] = struct{}{}
		}
		for f := range numFields {
			ns.sumLen[f] -= float64(d.lens[f])
		}
		changed[slot] = struct{}{}
	}
	for _, name := range removes {
		slot, ok := ns.byName[name]
		if !ok {
			continue
		}
		drop(slot)
		ns.slots[slot] = nil
		delete(ns.byName, name)
		ns.live--
		removed = true
	}
	var appended []int32
	for _, d := range ups {
		ns.keyed = ns.keyed || d.doc.Key != ""
		slot, ok := ns.byName[d.doc.ID()]
		if ok {
			drop(slot)
			ns.slots[slot] = d
		} else {
			slot = int32(len(ns.slots))
			ns.slots = append(ns.slots, d)
			ns.byName[d.doc.ID()] = slot
			appended = append(appended, slot)
			ns.live++
		}
		for f := range numFields {
			ns.sumLen[f] += float64(d.lens[f])
		}
		for _, t := range d.terms {
			touched[t.term] = struct{}{}
			adds[t.term] = append(adds[t.term], posting{slot: slot, tf: t.tf})
		}
	}
	if removed || len(appended) > 0 {
		order := make([]int32, 0, ns.live)
		for _, s := range old.order {
			if ns.slots[s] != nil {
				order = append(order, s)
			}
		}
		ns.order = append(order, appended...)
	}
	// Posting lists: share untouched ones, rebuild touched ones.
	ns.postings = maps.Clone(old.postings)
	for t := range touched {
		prev := old.postings[t]
		list := make([]posting, 0, len(prev)+len(adds[t]))
		for _, p := range prev {
			if _, gone := changed[p.slot]; !gone {
				list = append(list, p)
			}
		}
		list = append(list, adds[t]...)
		if len(list) == 0 {
			delete(ns.postings, t)
		} else {
			ns.postings[t] = list
		}
	}
	// Compact when more than half of the slots are free.
	if len(ns.slots) > 2*ns.live+1024 {
		docs := make([]*docData, 0, ns.live)
		for _, s := range ns.order {
			docs = append(docs, ns.slots[s])
		}
		empty := &Snapshot{ix: ix, byName: map[string]int32{}, postings: map[string][]posting{}}
		return ix.apply(empty, nil, docs)
	}
	ns.finish(old)
	return ns
}

// finish computes the per-snapshot derived arrays: positions, BM25F length
// norms, the semantic centring statistics and the IVF index (built from
// old's where possible).
func (s *Snapshot) finish(old *Snapshot) {
	n := len(s.slots)
	s.pos = make([]int32, n)
	for i := range s.pos {
		s.pos[i] = -1
	}
	for p, slot := range s.order {
		s.pos[slot] = int32(p)
	}
	params := s.ix.opts.BM25.fields()
	var avg [numFields]float64
	if s.live > 0 {
		for f := range numFields {
			avg[f] = s.sumLen[f] / float64(s.live)
		}
	}
	s.norm = make([][numFields]float32, n)
	for slot, d := range s.slots {
		if d == nil {
			continue
		}
		for f := range numFields {
			p := params[f]
			den := 1.0
			if avg[f] > 0 {
				den = 1 - p.B + p.B*float64(d.lens[f])/avg[f]
			}
			s.norm[slot][f] = float32(p.Weight / den)
		}
	}
	// Semantic centring (docs/search.md, "Static word vectors"): cos(q-mu, d-mu) needs d·mu and
	// |d-mu| per document; vectors themselves stay shared.
	var sum []float64
	for _, d := range s.slots {
		if d == nil || d.vec == nil {
			continue
		}
		if sum == nil {
			s.dim = len(d.vec)
			sum = make([]float64, s.dim)
		}
		if len(d.vec) != s.dim {
			continue
		}
		for j, x := range d.vec {
			sum[j] += float64(x)
		}
		s.nVec++
	}
	if s.nVec == 0 {
		return
	}
	s.mu = make([]float32, s.dim)
	var muMu float64
	for j := range sum {
		m := sum[j] / float64(s.nVec)
		s.mu[j] = float32(m)
		muMu += m * m
	}
	s.muMu = float32(muMu)
	s.dMu = make([]float32, n)
	s.dNorm = make([]float32, n)
	for slot, d := range s.slots {
		if d == nil || len(d.vec) != s.dim {
			continue
		}
		dm := dot(d.vec, s.mu)
		s.dMu[slot] = dm
		s.dNorm[slot] = float32(math.Sqrt(math.Max(0, 1-2*float64(dm)+muMu)))
	}
	s.buildIVF(old)
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// Snapshot is an immutable view of an Index. All methods are safe for
// concurrent use.
type Snapshot struct {
	ix       *Index
	slots    []*docData       // nil = free slot
	order    []int32          // catalog order of live slots
	pos      []int32          // slot → catalog position, -1 when free
	byName   map[string]int32 // by Document.ID
	keyed    bool             // some document has a Key (selectNames)
	postings map[string][]posting
	sumLen   [numFields]float64
	norm     [][numFields]float32
	live     int

	dim   int
	nVec  int
	mu    []float32
	muMu  float32
	dMu   []float32
	dNorm []float32
	ann   *ivf // nil below Options.ANNMinDocs vectors
}

// Len returns the number of documents.
func (s *Snapshot) Len() int { return s.live }

// Names returns the document ids (Document.ID) in catalog order.
func (s *Snapshot) Names() []string {
	out := make([]string, len(s.order))
	for i, slot := range s.order {
		out[i] = s.slots[slot].doc.ID()
	}
	return out
}

// Get returns the document whose id (Document.ID) is name.
func (s *Snapshot) Get(name string) (Document, bool) {
	slot, ok := s.byName[name]
	if !ok {
		return Document{}, false
	}
	return s.slots[slot].doc, true
}

// HasVector reports whether the document called name has a semantic vector.
func (s *Snapshot) HasVector(name string) bool {
	slot, ok := s.byName[name]
	return ok && s.slots[slot].vec != nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

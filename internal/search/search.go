package search

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Mode selects the ranker for ranked text (the SearchTools modes, docs/search.md "Modes"). The
// zero value is ModeAuto, so SEARCH_MODE_UNSPECIFIED maps to the default.
type Mode int

const (
	// ModeAuto fuses BM25F and semantic rankings (Options.Fusion).
	ModeAuto Mode = iota
	// ModeRegex is DeerFlow's algorithm (docs/deerflow.md §2.3).
	ModeRegex
	// ModeBM25 is BM25F over name, title, description, parameters, server.
	ModeBM25
	// ModeSemantic is cosine similarity of centred sentence vectors.
	ModeSemantic
)

// String returns "auto", "regex", "bm25" or "semantic".
func (m Mode) String() string {
	switch m {
	case ModeRegex:
		return "regex"
	case ModeBM25:
		return "bm25"
	case ModeSemantic:
		return "semantic"
	case ModeAuto:
		return "auto"
	default:
		return "mode(" + strconv.Itoa(int(m)) + ")"
	}
}

// ParseMode parses "auto", "regex", "bm25" or "semantic" (case-insensitive).
// The error matches ErrInvalidQuery with Field "mode".
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "":
		return ModeAuto, nil
	case "regex":
		return ModeRegex, nil
	case "bm25":
		return ModeBM25, nil
	case "semantic":
		return ModeSemantic, nil
	}
	return 0, queryErr("mode", "unknown mode %q (want auto, regex, bm25 or semantic)", s)
}

// Request is one search.
type Request struct {
	// Query is the raw query (see ParseQuery for the forms and limits).
	Query string
	// Mode selects the ranker for ranked text.
	Mode Mode
	// Limit caps ranked and +required results; <= 0 means DefaultLimit.
	// select: ignores it (MaxSelectResults). The library sets no maximum;
	// the catalog enforces its per-caller cap.
	Limit int
	// Candidates, when non-nil, restricts the search to these names
	// (unknown names are ignored; an empty non-nil slice matches nothing).
	Candidates []string
	// CandidateSet, when made by the snapshot searched
	// (Snapshot.CandidateSet), stands for Candidates already resolved, so
	// a caller searching the same set repeatedly skips the per-name lookups
	// (the catalog's candidate views, docs/decisions/0144-candidate-views.md).
	// One made by another snapshot is ignored and Candidates is used.
	CandidateSet *CandidateSet
}

// CandidateSet is a candidate list resolved against one Snapshot. It is
// immutable and safe for concurrent use.
type CandidateSet struct {
	snap *Snapshot
	mask []bool
}

// CandidateSet resolves names (unknown ones ignored) for
// Request.CandidateSet on s.
func (s *Snapshot) CandidateSet(names []string) *CandidateSet {
	return &CandidateSet{snap: s, mask: s.maskOf(names)}
}

// Of reports whether c was made by s.
func (c *CandidateSet) Of(s *Snapshot) bool { return c != nil && c.snap == s }

// Bytes returns the memory the set holds.
func (c *CandidateSet) Bytes() int { return len(c.mask) }

func (s *Snapshot) maskOf(names []string) []bool {
	mask := make([]bool, len(s.slots))
	for _, name := range names {
		if slot, ok := s.byName[name]; ok {
			mask[slot] = true
		}
	}
	return mask
}

// Result is one hit.
type Result struct {
	// Name is the document's exposed name; Key its id (Document.ID).
	Name, Key string
	// Score is the ranker's score: REGEX 2 (name match) or 1, or the match
	// count for `+required` text; BM25 the BM25F score; SEMANTIC the cosine
	// similarity; AUTO the fused score; 0 for select: and for `+required`
	// hits that the rest did not match.
	Score float64
	// Matched names the fields that matched: "name", "title",
	// "description", "parameters", "server", and "semantic" for a semantic
	// match.
	Matched []string
}

// Response is the outcome of a search.
type Response struct {
	// Query is the parsed query.
	Query Query
	// Results are ordered best first (select: in catalog order).
	Results []Result
	// Truncated is set when a select: matched more than MaxSelectResults.
	Truncated bool
	// Degraded, when non-empty, says why AUTO ran lexical-only (e.g. the
	// query could not be embedded).
	Degraded string
}

// Search runs req. Invalid input returns an error matching ErrInvalidQuery;
// SEMANTIC with a failing Embedder returns an *EmbedError; anything that
// simply matches nothing returns an empty Response.
func (s *Snapshot) Search(ctx context.Context, req Request) (*Response, error) {
	if req.Mode < ModeAuto || req.Mode > ModeSemantic {
		return nil, queryErr("mode", "unknown mode %d", int(req.Mode))
	}
	q, err := ParseQuery(req.Query)
	if err != nil {
		return nil, err
	}
	resp := &Response{Query: q}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	var mask []bool
	switch {
	case req.CandidateSet.Of(s):
		mask = req.CandidateSet.mask
		if q.Kind == KindRequired {
			mask = slices.Clone(mask) // the required filter narrows it in place
		}
	case req.Candidates != nil:
		mask = s.maskOf(req.Candidates)
	}
	switch q.Kind {
	case KindEmpty:
		return resp, nil
	case KindSelect:
		s.selectNames(q.Names, mask, resp)
		return resp, nil
	case KindRequired:
		if mask == nil {
			mask = make([]bool, len(s.slots))
			for _, slot := range s.order {
				mask[slot] = true
			}
		}
		any := false
		for slot, ok := range mask {
			if ok && !strings.Contains(s.slots[slot].lowerName, q.Required) {
				mask[slot] = false
			}
			any = any || mask[slot]
		}
		if !any {
			return resp, nil
		}
		if q.Text != "" {
			if err := s.rank(ctx, q.Text, req.Mode, mask, limit, true, resp); err != nil {
				return nil, err
			}
		}
		// The required filter is the match; ranked hits come first, the
		// other required matches follow in catalog order (deerflow §2.3).
		if len(resp.Results) < limit {
			seen := make(map[string]struct{}, len(resp.Results))
			for _, r := range resp.Results {
				seen[r.Key] = struct{}{}
			}
			for _, slot := range s.order {
				if len(resp.Results) >= limit {
					break
				}
				if !mask[slot] {
					continue
				}
				d := &s.slots[slot].doc
				if _, ok := seen[d.ID()]; ok {
					continue
				}
				resp.Results = append(resp.Results, Result{Name: d.Name, Key: d.ID(), Matched: []string{"name"}})
			}
		}
		return resp, nil
	default:
		if err := s.rank(ctx, q.Text, req.Mode, mask, limit, false, resp); err != nil {
			return nil, err
		}
		return resp, nil
	}
}

func (s *Snapshot) selectNames(names []string, mask []bool, resp *Response) {
	want := make(map[int32]struct{}, min(len(names), len(s.slots)))
	var byName map[string]bool
	for _, n := range names {
		if slot, ok := s.byName[n]; ok && (mask == nil || mask[slot]) {
			want[slot] = struct{}{}
		} else {
			if byName == nil {
				byName = map[string]bool{}
			}
			byName[n] = true
		}
	}
	if byName != nil && s.keyed {
		// Names not found as ids: documents whose Name differs from their
		// Key (Document.Key) are selected by Name among the candidates.
		for slot, d := range s.slots {
			if d != nil && d.doc.Key != "" && byName[d.doc.Name] && (mask == nil || mask[slot]) {
				want[int32(slot)] = struct{}{}
			}
		}
	}
	if len(want) == 0 {
		return
	}
	for _, slot := range s.order {
		if _, ok := want[slot]; !ok {
			continue
		}
		if len(resp.Results) == MaxSelectResults {
			resp.Truncated = true
			return
		}
		d := &s.slots[slot].doc
		resp.Results = append(resp.Results, Result{Name: d.Name, Key: d.ID(), Matched: []string{"name"}})
	}
}

// rank ranks text in mode over the masked documents (nil mask = all).
// countRegex selects the `+required` REGEX scoring (match counts).
func (s *Snapshot) rank(ctx context.Context, text string, mode Mode, mask []bool, limit int, countRegex bool, resp *Response) error {
	switch mode {
	case ModeRegex:
		res, err := s.regexRank(text, mask, limit, countRegex)
		resp.Results = res
		return err
	case ModeBM25:
		sc := s.bm25(text, mask)
		defer sc.release()
		resp.Results = s.topResults(sc.hits, sc.scores, sc.fields, false, limit)
		return nil
	case ModeSemantic:
		sc := getScratch(len(s.slots))
		defer sc.release()
		ok, err := s.semantic(ctx, text, mask, sc)
		if err != nil {
			return err
		}
		if !ok {
			if s.ix.embErr != nil {
				resp.Degraded = "semantic: " + s.ix.embErr.Error()
			}
			return nil
		}
		resp.Results = s.topResults(sc.hits, sc.scores, sc.fields, true, limit)
		return nil
	default:
		return s.auto(ctx, text, mask, limit, resp)
	}
}

// regexRank is DeerFlow's search (docs/deerflow.md §2.3): the text is a
// case-insensitive RE2 pattern over "<name> <description>", an invalid
// pattern is matched literally; a hit scores 2 when the pattern also
// matches the name, else 1 (countRegex: the number of matches); stable
// order, ties in catalog order.
func (s *Snapshot) regexRank(text string, mask []bool, limit int, countRegex bool) ([]Result, error) {
	if n := utf8.RuneCountInString(text); n > MaxRegexChars {
		return nil, queryErr("query", "regex pattern is %d characters, longer than %d", n, MaxRegexChars)
	}
	re, err := regexp.Compile("(?i)" + text)
	// Fast path with identical results: when the pattern is a literal (it
	// has no metacharacter, or is invalid and so matched literally) and
	// ASCII, an ASCII document matches iff its lower-cased text contains the
	// lower-cased pattern (RE2 case folding and ASCII lower-casing agree on
	// ASCII); other documents use the regexp.
	lit := ""
	if err != nil {
		re = regexp.MustCompile("(?i)" + regexp.QuoteMeta(text))
		lit = strings.ToLower(text)
	} else if regexp.QuoteMeta(text) == text {
		lit = strings.ToLower(text)
	}
	if !isASCII(lit) {
		lit = ""
	}
	type hit struct {
		slot  int32
		score float64
		name  bool
	}
	var hits []hit
	for _, slot := range s.order {
		if mask != nil && !mask[slot] {
			continue
		}
		d := s.slots[slot]
		if lit != "" && d.lowerText != "" {
			n := 0
			if countRegex {
				n = strings.Count(d.lowerText, lit)
			} else if strings.Contains(d.lowerText, lit) {
				n = 1
			}
			if n == 0 {
				continue
			}
			inName := strings.Contains(d.lowerName, lit)
			h := hit{slot: slot, score: float64(n), name: inName}
			if !countRegex && inName {
				h.score = 2
			}
			hits = append(hits, h)
			continue
		}
		if countRegex {
			if n := len(re.FindAllStringIndex(d.regexText, -1)); n > 0 {
				hits = append(hits, hit{slot: slot, score: float64(n), name: re.MatchString(d.doc.Name)})
			}
			continue
		}
		if !re.MatchString(d.regexText) {
			continue
		}
		h := hit{slot: slot, score: 1}
		if re.MatchString(d.doc.Name) {
			h.score, h.name = 2, true
		}
		hits = append(hits, h)
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]Result, len(hits))
	for i, h := range hits {
		m := []string{"description"}
		if h.name {
			m = []string{"name"}
			if re.MatchString(s.slots[h.slot].doc.Description) {
				m = append(m, "description")
			}
		}
		out[i] = Result{Name: s.slots[h.slot].doc.Name, Key: s.slots[h.slot].doc.ID(), Score: h.score, Matched: m}
	}
	return out, nil
}

// scratch holds per-query accumulators indexed by slot.
type scratch struct {
	scores []float32
	fields []uint8 // matched-field bit set; bit numFields = semantic
	hits   []int32 // slots with a non-zero entry
}

var scratchPool sync.Pool

func getScratch(n int) *scratch {
	sc, _ := scratchPool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	if cap(sc.scores) < n {
		sc.scores = make([]float32, n)
		sc.fields = make([]uint8, n)
	}
	sc.scores = sc.scores[:n]
	sc.fields = sc.fields[:n]
	sc.hits = sc.hits[:0]
	return sc
}

func (sc *scratch) release() {
	for _, h := range sc.hits {
		sc.scores[h] = 0
		sc.fields[h] = 0
	}
	sc.hits = sc.hits[:0]
	scratchPool.Put(sc)
}

const semanticBit = 1 << numFields

// bm25 scores text with BM25F (Lucene idf ln(1+(N-df+0.5)/(df+0.5)); each
// distinct query term once). With Options.PRFDocs set, the query is then
// expanded by pseudo-relevance feedback (prf) and scored again.
func (s *Snapshot) bm25(text string, mask []bool) *scratch {
	terms := weightedQueryTerms(text, float32(s.ix.opts.SynonymWeight))
	sc := s.bm25Terms(terms, mask)
	if s.ix.opts.PRFDocs <= 0 || s.ix.opts.PRFWeight <= 0 || len(sc.hits) == 0 {
		return sc
	}
	exp := s.prf(terms, sc)
	if len(exp) == 0 {
		return sc
	}
	sc.release()
	return s.bm25Terms(append(terms, exp...), mask)
}

// bm25Terms scores the weighted terms with BM25F.
func (s *Snapshot) bm25Terms(terms []weightedTerm, mask []bool) *scratch {
	sc := getScratch(len(s.slots))
	if s.live == 0 {
		return sc
	}
	k1 := float32(s.ix.opts.BM25.K1)
	delta := float32(s.ix.opts.BM25.Delta)
	n := float64(s.live)
	for _, wt := range terms {
		list := s.postings[wt.term]
		if len(list) == 0 {
			continue
		}
		df := float64(len(list))
		idf64 := math.Log(1 + (n-df+0.5)/(df+0.5))
		if e := s.ix.opts.QueryIDFExponent; e != 0 && e != 1 {
			idf64 = math.Pow(idf64, e)
		}
		idf := float32(idf64) * wt.weight
		for _, p := range list {
			if mask != nil && !mask[p.slot] {
				continue
			}
			nm := &s.norm[p.slot]
			var tf float32
			var bits uint8
			for f := range numFields {
				if p.tf[f] != 0 {
					tf += float32(p.tf[f]) * nm[f]
					bits |= 1 << f
				}
			}
			if sc.scores[p.slot] == 0 {
				sc.hits = append(sc.hits, p.slot)
			}
			sc.scores[p.slot] += idf * (tf*(k1+1)/(k1+tf) + delta)
			sc.fields[p.slot] |= bits
		}
	}
	return sc
}

// prf returns the expansion terms of relevance-model pseudo-relevance
// feedback (RM3: Lavrenko & Croft 2001, "Relevance-based language models";
// Abdul-Jaleel et al. 2004, UMass at TREC 2004), docs/search.md "What each
// change added". The Options.PRFDocs best BM25F hits of the first pass are
// taken as relevant; each term w of theirs gets
//
//	p(w|R) = Σ_d score(d)/Σ score · tf_F(w, d)/len_F(d)
//
// tf_F and len_F being the field-weighted term frequency and length (the
// BM25F field weights). The Options.PRFTerms most probable terms that the
// query does not contain and that occur in at most a tenth of the
// documents are returned, weighted PRFWeight·p(w|R)/max p.
func (s *Snapshot) prf(query []weightedTerm, first *scratch) []weightedTerm {
	o := s.ix.opts
	top := s.topSlots(first.hits, first.scores, o.PRFDocs)
	var total float64
	for _, slot := range top {
		total += float64(first.scores[slot])
	}
	if total <= 0 {
		return nil
	}
	params := o.BM25.fields()
	in := make(map[string]struct{}, len(query))
	for _, t := range query {
		in[t.term] = struct{}{}
	}
	maxDF := max(s.live/10, 5)
	p := make(map[string]float64, 64)
	for _, slot := range top {
		d := s.slots[slot]
		var dlen float64
		for f := range numFields {
			dlen += params[f].Weight * float64(d.lens[f])
		}
		if dlen <= 0 {
			continue
		}
		dw := float64(first.scores[slot]) / total
		for _, t := range d.terms {
			if _, ok := in[t.term]; ok {
				continue
			}
			// A term of more than a tenth of the catalog adds little
			// (idf ≤ ln 10.5 at a tenth of the query's weight) and costs a
			// walk of its long posting list: it is not an expansion term.
			if df := len(s.postings[t.term]); df > maxDF {
				continue
			}
			var tf float64
			for f := range numFields {
				tf += params[f].Weight * float64(t.tf[f])
			}
			if tf > 0 {
				p[t.term] += dw * tf / dlen
			}
		}
	}
	if len(p) == 0 {
		return nil
	}
	out := make([]weightedTerm, 0, len(p))
	for t, v := range p {
		out = append(out, weightedTerm{term: t, weight: float32(v)})
	}
	// Ties by term so the expansion does not depend on map order.
	slices.SortFunc(out, func(a, b weightedTerm) int {
		if a.weight != b.weight {
			if a.weight > b.weight {
				return -1
			}
			return 1
		}
		return strings.Compare(a.term, b.term)
	})
	if len(out) > o.PRFTerms {
		out = out[:o.PRFTerms]
	}
	maxP := out[0].weight
	for i := range out {
		out[i].weight = float32(o.PRFWeight) * out[i].weight / maxP
	}
	return out
}

// queryVector embeds text and centres it; ok is false when semantic ranking
// is unavailable (disabled, no vectors, or the text has no known words).
func (s *Snapshot) queryVector(ctx context.Context, text string) (qv []float32, qMu, qNorm float32, ok bool, err error) {
	if s.ix.embedder == nil || s.nVec == 0 {
		return nil, 0, 0, false, nil
	}
	vecs, err := s.ix.embedder.Embed(ctx, []string{text})
	if err != nil {
		return nil, 0, 0, false, &EmbedError{Op: "query", Err: err}
	}
	if len(vecs) != 1 {
		return nil, 0, 0, false, &EmbedError{Op: "query", Err: errWrongCount}
	}
	qv = unit(vecs[0])
	if qv == nil || len(qv) != s.dim {
		return nil, 0, 0, false, nil
	}
	qMu = dot(qv, s.mu)
	qNorm = float32(math.Sqrt(math.Max(0, 1-2*float64(qMu)+float64(s.muMu))))
	if qNorm == 0 {
		return nil, 0, 0, false, nil
	}
	return qv, qMu, qNorm, true, nil
}

var errWrongCount = &QueryError{Field: "embedder", Reason: "returned a wrong number of vectors"}

// semantic fills sc with centred cosine similarities at or above
// MinSemanticScore.
func (s *Snapshot) semantic(ctx context.Context, text string, mask []bool, sc *scratch) (bool, error) {
	qv, qMu, qNorm, ok, err := s.queryVector(ctx, text)
	if err != nil || !ok {
		return false, err
	}
	s.scanSemantic(qv, qMu, qNorm, mask, sc)
	return true, nil
}

// scanSemantic scores every (masked) vector against the centred query.
func (s *Snapshot) scanSemantic(qv []float32, qMu, qNorm float32, mask []bool, sc *scratch) {
	minScore := float32(s.ix.opts.MinSemanticScore)
	for _, slot := range s.order {
		if mask != nil && !mask[slot] {
			continue
		}
		d := s.slots[slot]
		if len(d.vec) != s.dim || s.dNorm[slot] == 0 {
			continue
		}
		cos := (dot(qv, d.vec) - qMu - s.dMu[slot] + s.muMu) / (qNorm * s.dNorm[slot])
		if cos < minScore || cos <= 0 && minScore >= 0 {
			continue
		}
		sc.scores[slot] = cos
		sc.fields[slot] = semanticBit
		sc.hits = append(sc.hits, slot)
	}
}

// auto fuses BM25F and semantic rankings (Options.Fusion).
func (s *Snapshot) auto(ctx context.Context, text string, mask []bool, limit int, resp *Response) error {
	lex := s.bm25(text, mask)
	defer lex.release()
	qv, qMu, qNorm, ok, err := s.queryVector(ctx, text)
	if err != nil {
		resp.Degraded = err.Error()
	} else if !ok && s.ix.embErr != nil {
		resp.Degraded = "semantic: " + s.ix.embErr.Error()
	}
	if !ok {
		resp.Results = s.diverseResults(lex, limit)
		return nil
	}
	if s.ix.opts.Fusion == FusionRRF {
		s.autoRRF(qv, qMu, qNorm, mask, limit, lex, resp)
		return nil
	}
	depth := limit
	if s.ix.opts.ServerDiversity > 0 {
		depth = 3 * limit
	}
	alignOn := s.ix.static != nil
	if alignOn {
		depth = max(depth, s.ix.opts.AlignDepth)
	}
	fused, _ := s.autoWeighted(lex, qv, qMu, qNorm, mask, depth, false)
	if alignOn {
		re := s.realign(fused, text, depth)
		fused.release()
		fused = re
	}
	defer fused.release()
	resp.Results = s.diverseResults(fused, limit)
	return nil
}

// diverseResults returns the top limit of sc, diversified across servers
// when Options.ServerDiversity is set.
func (s *Snapshot) diverseResults(sc *scratch, limit int) []Result {
	d := float32(s.ix.opts.ServerDiversity)
	if d <= 0 {
		return s.topResults(sc.hits, sc.scores, sc.fields, false, limit)
	}
	top := s.diversify(s.topSlots(sc.hits, sc.scores, 3*limit), sc.scores, limit, d)
	out := make([]Result, len(top))
	for i, slot := range top {
		out[i] = Result{Name: s.slots[slot].doc.Name, Key: s.slots[slot].doc.ID(), Score: float64(sc.scores[slot]), Matched: matchedNames(sc.fields[slot])}
	}
	return out
}

// diversify picks limit of the ranked candidates greedily, each time the one
// with the best score·(1 − d)^n, n counting the picks of its server so far
// (documents without a server are never penalised).
func (s *Snapshot) diversify(ranked []int32, scores []float32, limit int, d float32) []int32 {
	picked := make([]int32, 0, min(limit, len(ranked)))
	perServer := map[string]int{}
	rest := slices.Clone(ranked)
	for len(picked) < limit && len(rest) > 0 {
		best, bestV := 0, float32(math.Inf(-1))
		for i, slot := range rest {
			v := scores[slot]
			if srv := s.slots[slot].doc.Server; srv != "" {
				v *= float32(math.Pow(float64(1-d), float64(perServer[srv])))
			}
			if v > bestV {
				best, bestV = i, v
			}
		}
		slot := rest[best]
		picked = append(picked, slot)
		if srv := s.slots[slot].doc.Server; srv != "" {
			perServer[srv]++
		}
		rest = slices.Delete(rest, best, best+1)
	}
	return picked
}

// autoWeighted computes the calibrated weighted sum
//
//	(1 − w) · BM25F/max(BM25F) + w · cos   (cos counted when ≥ MinSemanticScore)
//
// for every document that can reach the top limit. Lexical hits are scored
// exactly. Semantic-only documents score w · cos: with exact, or without an
// IVF index, or when a small candidate mask makes a scan cheap, every vector
// is scanned; otherwise only those that can beat the limit-th lexical score
// are looked for, in the IVF cells nearest the query (ann.go).
// scanned counts the vectors compared with the query.
func (s *Snapshot) autoWeighted(lex *scratch, qv []float32, qMu, qNorm float32, mask []bool, limit int, exact bool) (fused *scratch, scanned int) {
	w := float32(s.ix.opts.SemanticWeight)
	minScore := float32(s.ix.opts.MinSemanticScore)
	cosOf := func(slot int32) (float32, bool) {
		d := s.slots[slot]
		if len(d.vec) != s.dim || s.dNorm[slot] == 0 {
			return 0, false
		}
		cos := (dot(qv, d.vec) - qMu - s.dMu[slot] + s.muMu) / (qNorm * s.dNorm[slot])
		if cos < minScore || cos <= 0 && minScore >= 0 {
			return 0, false
		}
		return cos, true
	}
	fused = getScratch(len(s.slots))
	var maxLex float32
	for _, slot := range lex.hits {
		maxLex = max(maxLex, lex.scores[slot])
	}
	addLex := func(slot int32) {
		v, bits := (1-w)*lex.scores[slot]/maxLex, lex.fields[slot]
		if cos, ok := cosOf(slot); ok {
			v += w * cos
			bits |= semanticBit
		}
		fused.scores[slot], fused.fields[slot] = v, bits
		fused.hits = append(fused.hits, slot)
		scanned++
	}
	if exact || w >= 1 || len(lex.hits) <= 4*limit {
		for _, slot := range lex.hits {
			addLex(slot)
		}
	} else {
		// The limit best lexical hits, scored exactly, bound the limit-th
		// fused score from below by tau0. Another lexical hit scores at most
		// (1 − w)·lex/max + w, so only those above the cut can beat tau0;
		// the others never reach the results and are not scored.
		top := s.topSlots(lex.hits, lex.scores, limit)
		for _, slot := range top {
			addLex(slot)
		}
		tau0 := float32(math.Inf(1))
		for _, slot := range top {
			tau0 = min(tau0, fused.scores[slot])
		}
		cut := (tau0-w)/(1-w)*maxLex - 1e-6*maxLex
		for _, slot := range lex.hits {
			if fused.scores[slot] == 0 && lex.scores[slot] >= cut {
				addLex(slot)
			}
		}
	}
	addSem := func(slot int32) {
		if cos, ok := cosOf(slot); ok {
			fused.scores[slot], fused.fields[slot] = w*cos, semanticBit
			fused.hits = append(fused.hits, slot)
		}
	}
	a := s.ann
	if !exact && a != nil && mask != nil {
		n := 0
		for _, m := range mask {
			if m {
				n++
			}
		}
		if n < s.ix.opts.ANNMinDocs {
			a = nil // a scan of the few candidates is cheap and exact
		}
	}
	if exact || a == nil {
		for _, slot := range s.order {
			if (mask == nil || mask[slot]) && lex.scores[slot] == 0 {
				addSem(slot)
				scanned++
			}
		}
		return fused, scanned
	}
	// A semantic-only document scores w·cos ≤ w: it can only enter the top
	// limit when w·cos beats the limit-th score of the lexical hits.
	need := minScore
	if len(fused.hits) >= limit {
		top := s.topSlots(fused.hits, fused.scores, limit)
		tau := fused.scores[top[len(top)-1]]
		if tau >= w {
			return fused, scanned
		}
		need = max(need, tau/w)
	}
	qq, qs := quantize(qv)
	// Keep the best few by the int8 estimate, then score them exactly.
	keep := limit + 8
	type cand struct {
		slot int32
		est  float32
	}
	best := make([]cand, 0, keep+1)
	floor := need - 0.05
	for _, cell := range a.probe(qv, qMu, s.muMu) {
		for _, slot := range a.lists[cell] {
			if mask != nil && !mask[slot] || lex.scores[slot] != 0 || s.dNorm[slot] == 0 {
				continue
			}
			d := s.slots[slot]
			scanned++
			est := (float32(dot8(qq, d.q8))*qs*d.q8s - qMu - s.dMu[slot] + s.muMu) / (qNorm * s.dNorm[slot])
			if est < floor || len(best) == keep && est <= best[keep-1].est {
				continue
			}
			j := len(best)
			if j < keep {
				best = append(best, cand{})
			} else {
				j--
			}
			for j > 0 && best[j-1].est < est {
				best[j] = best[j-1]
				j--
			}
			best[j] = cand{slot, est}
		}
	}
	for _, c := range best {
		addSem(c.slot)
	}
	return fused, scanned
}

// autoRRF is reciprocal-rank fusion of the BM25F ranking and the top
// SemanticDepth semantic hits (a full vector scan).
func (s *Snapshot) autoRRF(qv []float32, qMu, qNorm float32, mask []bool, limit int, lex *scratch, resp *Response) {
	sem := getScratch(len(s.slots))
	defer sem.release()
	s.scanSemantic(qv, qMu, qNorm, mask, sem)
	depth := s.ix.opts.SemanticDepth
	semTop := s.topSlots(sem.hits, sem.scores, depth)
	fused := getScratch(len(s.slots))
	defer fused.release()
	add := func(slot int32, v float32, bits uint8) {
		if fused.fields[slot] == 0 && fused.scores[slot] == 0 {
			fused.hits = append(fused.hits, slot)
		}
		fused.scores[slot] += v
		fused.fields[slot] |= bits
	}
	k := float32(s.ix.opts.RRFK)
	lexTop := s.topSlots(lex.hits, lex.scores, max(depth, limit))
	for r, slot := range lexTop {
		add(slot, 1/(k+float32(r+1)), lex.fields[slot])
	}
	for r, slot := range semTop {
		add(slot, 1/(k+float32(r+1)), semanticBit)
	}
	resp.Results = s.topResults(fused.hits, fused.scores, fused.fields, false, limit)
}

// better orders by score descending, then catalog position (deterministic).
func (s *Snapshot) better(scores []float32, a, b int32) bool {
	if scores[a] != scores[b] {
		return scores[a] > scores[b]
	}
	return s.pos[a] < s.pos[b]
}

// topSlots returns the k best hits, best first, using a bounded min-heap.
func (s *Snapshot) topSlots(hits []int32, scores []float32, k int) []int32 {
	if k <= 0 {
		return nil
	}
	h := make([]int32, 0, min(k, len(hits)))
	// worse(i, j): h[i] ranks below h[j] — the heap root is the worst kept.
	worse := func(i, j int) bool { return s.better(scores, h[j], h[i]) }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && worse(r, l) {
				m = r
			}
			if !worse(m, i) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for _, slot := range hits {
		if len(h) < k {
			h = append(h, slot)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(i, p) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if s.better(scores, slot, h[0]) {
			h[0] = slot
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b int32) int {
		if s.better(scores, a, b) {
			return -1
		}
		return 1
	})
	return h
}

func (s *Snapshot) topResults(hits []int32, scores []float32, fields []uint8, _ bool, limit int) []Result {
	top := s.topSlots(hits, scores, limit)
	out := make([]Result, len(top))
	for i, slot := range top {
		out[i] = Result{Name: s.slots[slot].doc.Name, Key: s.slots[slot].doc.ID(), Score: float64(scores[slot]), Matched: matchedNames(fields[slot])}
	}
	return out
}

func matchedNames(bits uint8) []string {
	var out []string
	for f := range numFields {
		if bits&(1<<f) != 0 {
			out = append(out, fieldNames[f])
		}
	}
	if bits&semanticBit != 0 {
		out = append(out, "semantic")
	}
	return out
}

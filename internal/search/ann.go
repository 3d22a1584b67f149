package search

import (
	"math"
)

// Approximate top-k for the semantic part of AUTO (docs/search.md, "AUTO
// without a full scan"; docs/decisions/0052-auto-topk-ivf.md).
//
// Every document vector is also kept int8-quantised (one scale per vector).
// Above Options.ANNMinDocs vectors, a snapshot carries an inverted-file
// index (IVF): the vectors are partitioned by k-means into about √N cells.
// AUTO then
//
//  1. scores the lexical (BM25F) hits exactly, cosine included;
//  2. works out the k-th best fused score τ among them: a document that no
//     lexical term matched scores w·cos, so it can only enter the top k
//     when cos > τ/w — when τ ≥ w no such document can, and no vector is
//     scanned at all;
//  3. otherwise probes the max(8, ⌈2√C⌉) cells whose centroids are nearest the query,
//     ranks their members by the int8 dot product and re-scores the best
//     few exactly in float32.
//
// Steps 1–2 are exact; only step 3 can miss a document (one in a cell not
// probed). TestAutoTopKAgreesWithExactScan measures the agreement with the
// exact scan on the MetaTool DEV queries with the IVF forced on.

// quantize returns v (a unit vector) as int8 with its scale: v[i] ≈ q[i]·scale.
func quantize(v []float32) ([]int8, float32) {
	var m float32
	for _, x := range v {
		m = max(m, float32(math.Abs(float64(x))))
	}
	if m == 0 {
		return make([]int8, len(v)), 0
	}
	scale := m / 127
	q := make([]int8, len(v))
	for i, x := range v {
		q[i] = int8(math.Round(float64(x / scale)))
	}
	return q, scale
}

// dot8 is the int8 dot product.
func dot8(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// ivf is the inverted-file index of one snapshot.
type ivf struct {
	centroids [][]float32 // raw-space cell means (not normalised)
	trainedN  int         // vectors when the centroids were trained
	assign    []int32     // slot → cell, -1 for no vector
	owner     []*docData  // slot → the document the assignment belongs to
	lists     [][]int32   // cell → slots
	cMu       []float32   // centroid · mu
	cNorm     []float32   // |centroid − mu|
	nprobe    int
}

// cellsFor returns the number of k-means cells for n vectors: ⌈√n⌉, at most 1024.
func cellsFor(n int) int {
	return max(1, min(1024, int(math.Ceil(math.Sqrt(float64(n))))))
}

// buildIVF makes the IVF of s, reusing old's centroids while the number of
// vectors stays within a factor 2 of the count they were trained on, and
// old's cell of every document whose analysed form is unchanged.
func (s *Snapshot) buildIVF(old *Snapshot) {
	minDocs := s.ix.opts.ANNMinDocs
	if minDocs < 0 || s.nVec < minDocs || s.nVec == 0 {
		return
	}
	var prev *ivf
	if old != nil && old.ann != nil && len(old.ann.centroids[0]) == s.dim &&
		s.nVec <= 2*old.ann.trainedN && 2*s.nVec >= old.ann.trainedN {
		prev = old.ann
	}
	a := &ivf{}
	if prev != nil {
		a.centroids, a.trainedN = prev.centroids, prev.trainedN
	} else {
		a.centroids = s.trainCentroids(cellsFor(s.nVec))
		a.trainedN = s.nVec
	}
	c := len(a.centroids)
	a.assign = make([]int32, len(s.slots))
	a.owner = make([]*docData, len(s.slots))
	a.lists = make([][]int32, c)
	for slot, d := range s.slots {
		a.assign[slot] = -1
		if d == nil || len(d.vec) != s.dim {
			continue
		}
		cell := int32(-1)
		if prev != nil && slot < len(prev.owner) && prev.owner[slot] == d {
			cell = prev.assign[slot]
		}
		if cell < 0 {
			cell = int32(nearest(a.centroids, d.vec))
		}
		a.assign[slot], a.owner[slot] = cell, d
		a.lists[cell] = append(a.lists[cell], int32(slot))
	}
	a.cMu = make([]float32, c)
	a.cNorm = make([]float32, c)
	for i, cv := range a.centroids {
		a.cMu[i] = dot(cv, s.mu)
		var n float64
		for j, x := range cv {
			d := float64(x - s.mu[j])
			n += d * d
		}
		a.cNorm[i] = float32(math.Sqrt(n))
	}
	a.nprobe = min(c, max(8, int(math.Ceil(2*math.Sqrt(float64(c))))))
	if s.ix.opts.ANNProbes > 0 {
		a.nprobe = min(c, s.ix.opts.ANNProbes)
	}
	s.ann = a
}

// nearest returns the index of the centroid nearest v (Euclidean):
// argmax v·c − |c|²/2.
func nearest(centroids [][]float32, v []float32) int {
	best, bv := 0, float32(math.Inf(-1))
	for i, c := range centroids {
		var cc float32
		for _, x := range c {
			cc += x * x
		}
		if s := dot(v, c) - cc/2; s > bv {
			best, bv = i, s
		}
	}
	return best
}

// trainCentroids runs Lloyd's k-means (6 iterations) on a deterministic
// sample of at most 32·c vectors, seeded with evenly spaced sample members.
func (s *Snapshot) trainCentroids(c int) [][]float32 {
	var vecs [][]float32
	for _, slot := range s.order {
		if d := s.slots[slot]; len(d.vec) == s.dim {
			vecs = append(vecs, d.vec)
		}
	}
	if want := 32 * c; len(vecs) > want {
		step := float64(len(vecs)) / float64(want)
		sample := make([][]float32, want)
		for i := range sample {
			sample[i] = vecs[int(float64(i)*step)]
		}
		vecs = sample
	}
	c = min(c, len(vecs))
	cent := make([][]float32, c)
	for i := range cent {
		cent[i] = append([]float32(nil), vecs[i*len(vecs)/c]...)
	}
	assign := make([]int, len(vecs))
	sums := make([][]float64, c)
	for i := range sums {
		sums[i] = make([]float64, s.dim)
	}
	counts := make([]int, c)
	for range 6 {
		norms := make([]float32, c)
		for i, cv := range cent {
			norms[i] = dot(cv, cv) / 2
		}
		for i, v := range vecs {
			best, bv := 0, float32(math.Inf(-1))
			for j, cv := range cent {
				if sc := dot(v, cv) - norms[j]; sc > bv {
					best, bv = j, sc
				}
			}
			assign[i] = best
		}
		for j := range sums {
			clear(sums[j])
			counts[j] = 0
		}
		for i, v := range vecs {
			j := assign[i]
			counts[j]++
			for k, x := range v {
				sums[j][k] += float64(x)
			}
		}
		for j := range cent {
			if counts[j] == 0 {
				continue // keep an empty cell's centroid
			}
			for k := range cent[j] {
				cent[j][k] = float32(sums[j][k] / float64(counts[j]))
			}
		}
	}
	return cent
}

// probe returns the cells to scan for a centred query, nearest first:
// cells ranked by (q−mu)·(c−mu)/|c−mu|.
func (a *ivf) probe(qv []float32, qMu, muMu float32) []int {
	type cs struct {
		cell  int
		score float32
	}
	best := make([]cs, 0, a.nprobe+1)
	for i, cv := range a.centroids {
		if len(a.lists[i]) == 0 || a.cNorm[i] == 0 {
			continue
		}
		sc := (dot(qv, cv) - qMu - a.cMu[i] + muMu) / a.cNorm[i]
		if len(best) == a.nprobe && sc <= best[len(best)-1].score {
			continue
		}
		j := len(best)
		if j < a.nprobe {
			best = append(best, cs{})
		} else {
			j--
		}
		for j > 0 && best[j-1].score < sc {
			best[j] = best[j-1]
			j--
		}
		best[j] = cs{i, sc}
	}
	out := make([]int, len(best))
	for i, b := range best {
		out[i] = b.cell
	}
	return out
}

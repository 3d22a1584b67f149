package evalsearch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/toolplane/toolplane/internal/search"
)

// QueryScore is the score of one query in one mode.
type QueryScore struct {
	// R1, R3, R5, R10 are the recalls at 1, 3, 5 and 10.
	R1, R3, R5, R10 float64
	// NDCG10 is nDCG@10 with binary gains.
	NDCG10 float64
	// RR is the reciprocal rank of the first relevant tool (0 when none).
	RR float64
	// Refused is set when tool_search refuses the query (over 4 KiB).
	Refused bool
}

// objective is what cross-validation maximises per query: Recall@5 plus
// nDCG@10 (docs/decisions/0050-cross-validated-settings.md).
func (q QueryScore) objective() float64 { return q.R5 + q.NDCG10 }

// refused reports whether tool_search refuses text: the catalog answers
// INVALID_ARGUMENT for a ranked query over search.MaxQueryBytes or invalid
// UTF-8 (search.ParseQuery), so nothing is retrieved.
func refused(text string) bool {
	_, err := search.ParseQuery(text)
	return err != nil
}

// runQueries runs every query through run and scores it. A query that
// tool_search refuses is scored as a miss, in every mode (also
// bm25-basic), and never aborts the run; other errors do.
func runQueries(ctx context.Context, mode string, queries []Query, k int, run func(string) ([]string, error)) ([]QueryScore, []float64, error) {
	out := make([]QueryScore, len(queries))
	lat := make([]float64, 0, len(queries))
	for i, q := range queries {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if refused(q.Query) {
			out[i] = QueryScore{Refused: true}
			continue
		}
		text := q.Query
		if mode == "regex" {
			text = regexQuery(text)
		}
		start := time.Now()
		got, err := run(text)
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e6)
		if errors.Is(err, search.ErrInvalidQuery) {
			out[i] = QueryScore{Refused: true}
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("mode %s, query %s: %w", mode, q.ID, err)
		}
		out[i] = scoreOne(got, q.Relevant)
	}
	return out, lat, nil
}

// scoreOne scores a ranked list against the relevant names (strict).
func scoreOne(got, relevant []string) QueryScore {
	rel := make(map[string]bool, len(relevant))
	for _, r := range relevant {
		rel[r] = true
	}
	hitsAt := func(k int) float64 {
		n := 0
		for i := 0; i < k && i < len(got); i++ {
			if rel[got[i]] {
				n++
			}
		}
		return float64(n) / float64(len(rel))
	}
	s := QueryScore{R1: hitsAt(1), R3: hitsAt(3), R5: hitsAt(5), R10: hitsAt(10)}
	var dcg, idcg float64
	for i := 0; i < 10 && i < len(got); i++ {
		if rel[got[i]] {
			dcg += 1 / math.Log2(float64(i+2))
		}
	}
	for i := 0; i < 10 && i < len(rel); i++ {
		idcg += 1 / math.Log2(float64(i+2))
	}
	s.NDCG10 = dcg / idcg
	for i, name := range got {
		if rel[name] {
			s.RR = 1 / float64(i+1)
			break
		}
	}
	return s
}

// summarise averages per-query scores and adds the bootstrap intervals.
func summarise(mode string, pq []QueryScore, lat []float64, resamples int, seed uint64) Metrics {
	m := Metrics{Mode: mode, Queries: len(pq)}
	for _, q := range pq {
		m.R1 += q.R1
		m.R3 += q.R3
		m.R5 += q.R5
		m.R10 += q.R10
		m.NDCG10 += q.NDCG10
		m.MRR += q.RR
		if q.Refused {
			m.Refused++
		}
	}
	if n := float64(len(pq)); n > 0 {
		m.R1 /= n
		m.R3 /= n
		m.R5 /= n
		m.R10 /= n
		m.NDCG10 /= n
		m.MRR /= n
	}
	m.R5CI = Bootstrap(pq, func(q QueryScore) float64 { return q.R5 }, resamples, seed)
	m.NDCG10CI = Bootstrap(pq, func(q QueryScore) float64 { return q.NDCG10 }, resamples, seed)
	slices.Sort(lat)
	m.P50ms = percentile(lat, 0.50)
	m.P99ms = percentile(lat, 0.99)
	return m
}

// Bootstrap returns the 95% percentile-bootstrap confidence interval of the
// mean of f over pq: resamples means of len(pq) queries drawn with
// replacement, then their 2.5th and 97.5th percentiles. The generator is
// seeded with seed, so a report is reproducible.
func Bootstrap(pq []QueryScore, f func(QueryScore) float64, resamples int, seed uint64) [2]float64 {
	n := len(pq)
	if n == 0 || resamples <= 0 {
		return [2]float64{}
	}
	vals := make([]float64, n)
	for i, q := range pq {
		vals[i] = f(q)
	}
	return bootstrapValues(vals, resamples, seed)
}

func bootstrapValues(vals []float64, resamples int, seed uint64) [2]float64 {
	n := len(vals)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	means := make([]float64, resamples)
	for r := range means {
		var s float64
		for range n {
			s += vals[rng.IntN(n)]
		}
		means[r] = s / float64(n)
	}
	slices.Sort(means)
	return [2]float64{quantile(means, 0.025), quantile(means, 0.975)}
}

// quantile is the linearly interpolated quantile of sorted values.
func quantile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	x := p * float64(len(sorted)-1)
	lo := int(math.Floor(x))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (x-float64(lo))*(sorted[hi]-sorted[lo])
}

// percentile returns the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

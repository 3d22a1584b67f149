package evalsearch

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/toolplane/toolplane/internal/search"
)

// Grid names for Options.Grid.
const (
	// GridFusion varies AUTO's semantic weight only (the CI form).
	GridFusion = "fusion"
	// GridFull varies the semantic weight, the semantic threshold and the
	// name field weight (the `make eval` form).
	GridFull = "full"
	// GridPRF varies the semantic weight and pseudo-relevance feedback
	// (off, or its number of feedback documents and weight).
	GridPRF = "prf"
)

// Setting is one candidate configuration of AUTO that cross-validation may
// choose. It overrides three measured settings of a base search.Options
// (which carries everything else: embedder, fusion, diversity).
type Setting struct {
	// Name describes the setting, e.g. "w=0.2 min=0.2 name=3".
	Name string
	// Weight is the semantic weight (0: lexical only).
	Weight float64
	// MinScore is the semantic cosine threshold.
	MinScore float64
	// NameWeight is the BM25F name field weight.
	NameWeight float64
	// PRFDocs and PRFWeight, when PRFDocs is non-zero, set
	// search.Options.PRFDocs and PRFWeight (PRFDocs -1: feedback off);
	// 0 keeps the base's.
	PRFDocs   int
	PRFWeight float64
}

// Apply returns base with the setting's values.
func (s Setting) Apply(base search.Options) search.Options {
	o := base
	if o.BM25.K1 == 0 {
		o.BM25 = search.DefaultBM25Params()
	}
	o.BM25.Name.Weight = s.NameWeight
	o.SemanticWeight, o.MinSemanticScore = s.Weight, s.MinScore
	if s.Weight == 0 {
		o.DisableSemantic = true
	}
	if s.PRFDocs != 0 {
		o.PRFDocs, o.PRFWeight = s.PRFDocs, s.PRFWeight
	}
	return o
}

// GridByName returns the named grid ("" is GridFusion).
func GridByName(name string) ([]Setting, error) {
	switch name {
	case "", GridFusion:
		return fusionGrid(), nil
	case GridFull:
		return fullGrid(), nil
	case GridPRF:
		return prfGrid(), nil
	}
	return nil, fmt.Errorf("grid: unknown %q (want %s, %s or %s)", name, GridFusion, GridFull, GridPRF)
}

var gridWeights = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5}

// setting builds the Setting of semantic weight w (0 = lexical only),
// semantic threshold minScore and name field weight nameW.
func setting(w, minScore, nameW float64) Setting {
	s := Setting{Weight: w, MinScore: minScore, NameWeight: nameW}
	if w == 0 {
		s.Name = fmt.Sprintf("lexical name=%g", nameW)
	} else {
		s.Name = fmt.Sprintf("w=%g min=%g name=%g", w, minScore, nameW)
	}
	return s
}

func fusionGrid() []Setting {
	def := search.DefaultBM25Params()
	var out []Setting
	for _, w := range gridWeights {
		out = append(out, setting(w, 0.2, def.Name.Weight))
	}
	return out
}

// prfGrid crosses the fusion grid with pseudo-relevance feedback off and
// five (feedback documents, weight) pairs (docs/search.md, "What each change
// added").
func prfGrid() []Setting {
	var out []Setting
	for _, s := range fusionGrid() {
		off := s
		off.PRFDocs, off.Name = -1, s.Name+" prf=off"
		out = append(out, off)
		for _, p := range []struct {
			k int
			w float64
		}{{2, 0.1}, {2, 0.2}, {3, 0.1}, {3, 0.2}, {5, 0.1}} {
			v := s
			v.PRFDocs, v.PRFWeight = p.k, p.w
			v.Name = fmt.Sprintf("%s prf=%d/%g", s.Name, p.k, p.w)
			out = append(out, v)
		}
	}
	return out
}

func fullGrid() []Setting {
	var out []Setting
	for _, nameW := range []float64{2, 3, 4} {
		out = append(out, setting(0, 0.2, nameW))
		for _, w := range gridWeights[1:] {
			for _, minScore := range []float64{0.1, 0.2, 0.3} {
				out = append(out, setting(w, minScore, nameW))
			}
		}
	}
	return out
}

// CVOptions configure CrossValidate.
type CVOptions struct {
	// Folds is the number of folds (at least 2).
	Folds int
	// Grid lists the candidate settings (default GridFusion).
	Grid []Setting
	// K is the retrieval depth (at least 10).
	K int
	// Resamples is the number of bootstrap resamples (default 2000).
	Resamples int
	// Seed seeds the bootstrap.
	Seed uint64
	// Base holds the index options every setting starts from.
	Base search.Options
}

// Spread summarises one figure across folds.
type Spread struct {
	// Mean, Std (population), Min and Max across folds.
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// CVSetting is one grid setting's cross-validated figures.
type CVSetting struct {
	// Name is the setting's name.
	Name string `json:"name"`
	// Folds holds the objective (mean Recall@5 + nDCG@10) on each fold.
	Folds []float64 `json:"fold_objective"`
	// Objective is the spread of Folds; settings are chosen on its mean.
	Objective Spread `json:"objective"`
	// R5 and NDCG10 are the setting's figures over all queries.
	R5     float64 `json:"recall@5"`
	NDCG10 float64 `json:"ndcg@10"`
}

// CVFold is one fold scored with the setting chosen on the other folds.
type CVFold struct {
	// Fold numbers the fold from 0.
	Fold int `json:"fold"`
	// Queries is the fold's size.
	Queries int `json:"queries"`
	// Chosen names the setting with the best mean objective on the other folds.
	Chosen string `json:"chosen"`
	// R5 and NDCG10 are the fold's figures with that setting.
	R5     float64 `json:"recall@5"`
	NDCG10 float64 `json:"ndcg@10"`
}

// CVReport is the outcome of CrossValidate.
type CVReport struct {
	// Folds is the number of folds.
	Folds int `json:"folds"`
	// Objective names what is maximised.
	Objective string `json:"objective"`
	// Grid holds every setting's figures, in grid order.
	Grid []CVSetting `json:"grid"`
	// Chosen is the setting with the best mean objective across all folds
	// (what the full DEV set chooses); ChosenFull is its full-DEV row.
	Chosen     string  `json:"chosen"`
	ChosenFull Metrics `json:"chosen_full"`
	// PerFold are the out-of-fold folds.
	PerFold []CVFold `json:"per_fold"`
	// OutOfFold scores every query with the setting chosen without its
	// fold ("auto (out-of-fold)"); this is the honest AUTO figure.
	OutOfFold Metrics `json:"out_of_fold"`
	// FoldR5 and FoldNDCG10 spread the out-of-fold figures across folds.
	FoldR5     Spread `json:"fold_recall@5"`
	FoldNDCG10 Spread `json:"fold_ndcg@10"`
	// WithinCI reports whether the out-of-fold Recall@5 and nDCG@10 lie in
	// the 95% intervals of the chosen setting's full-DEV figures.
	WithinCI bool `json:"oof_within_full_ci"`

	oofScores []QueryScore
}

// OutOfFoldScores returns the per-query out-of-fold scores (query order).
func (c *CVReport) OutOfFoldScores() []QueryScore { return c.oofScores }

// AssignFolds assigns each query a fold in [0, k): queries are ordered by
// SHA-256("fold:" + id) and dealt round-robin, so folds are balanced,
// deterministic and independent of the DEV/HELD-OUT rule (which uses the
// hash of the bare id).
func AssignFolds(queries []Query, k int) []int {
	idx := make([]int, len(queries))
	keys := make([][32]byte, len(queries))
	for i, q := range queries {
		idx[i] = i
		keys[i] = sha256.Sum256([]byte("fold:" + q.ID))
	}
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(string(keys[a][:]), string(keys[b][:])) })
	folds := make([]int, len(queries))
	for r, i := range idx {
		folds[i] = r % k
	}
	return folds
}

// CrossValidate runs every grid setting (AUTO mode) over all queries, then
// chooses per fold the setting with the best mean objective on the other
// folds and scores the fold with it.
func CrossValidate(ctx context.Context, tools []Tool, queries []Query, o CVOptions) (*CVReport, error) {
	if o.Folds < 2 {
		return nil, fmt.Errorf("folds: want at least 2, got %d", o.Folds)
	}
	if len(queries) < o.Folds {
		return nil, fmt.Errorf("folds: %d folds need at least as many queries, got %d (--folds 0 turns cross-validation off)", o.Folds, len(queries))
	}
	if len(o.Grid) == 0 {
		o.Grid = fusionGrid()
	}
	if o.K < 10 {
		o.K = 10
	}
	if o.Resamples <= 0 {
		o.Resamples = 2000
	}
	folds := AssignFolds(queries, o.Folds)
	scores := make([][]QueryScore, len(o.Grid))
	rep := &CVReport{Folds: o.Folds, Objective: "mean Recall@5 + nDCG@10"}
	for g, s := range o.Grid {
		pq, _, err := runProduct(ctx, "auto", tools, queries, s.Apply(o.Base), o.K)
		if err != nil {
			return nil, fmt.Errorf("setting %s: %w", s.Name, err)
		}
		scores[g] = pq
		row := CVSetting{Name: s.Name, Folds: foldMeans(pq, folds, o.Folds, QueryScore.objective)}
		row.Objective = spread(row.Folds)
		all := summarise("", pq, nil, 0, 0)
		row.R5, row.NDCG10 = all.R5, all.NDCG10
		rep.Grid = append(rep.Grid, row)
	}
	best := func(skip int) int {
		bi, bv := 0, math.Inf(-1)
		for g, row := range rep.Grid {
			var s float64
			n := 0
			for f, v := range row.Folds {
				if f == skip {
					continue
				}
				s += v
				n++
			}
			if v := s / float64(n); v > bv+1e-12 {
				bi, bv = g, v
			}
		}
		return bi
	}
	chosen := best(-1)
	rep.Chosen = o.Grid[chosen].Name
	rep.ChosenFull = summarise("auto ("+rep.Chosen+", full DEV)", scores[chosen], nil, o.Resamples, o.Seed)
	oof := make([]QueryScore, len(queries))
	var r5s, nds []float64
	for f := range o.Folds {
		g := best(f)
		fold := CVFold{Fold: f, Chosen: o.Grid[g].Name}
		for i, qf := range folds {
			if qf != f {
				continue
			}
			oof[i] = scores[g][i]
			fold.Queries++
			fold.R5 += oof[i].R5
			fold.NDCG10 += oof[i].NDCG10
		}
		fold.R5 /= float64(fold.Queries)
		fold.NDCG10 /= float64(fold.Queries)
		r5s = append(r5s, fold.R5)
		nds = append(nds, fold.NDCG10)
		rep.PerFold = append(rep.PerFold, fold)
	}
	rep.oofScores = oof
	rep.OutOfFold = summarise("auto (out-of-fold)", oof, nil, o.Resamples, o.Seed)
	rep.FoldR5, rep.FoldNDCG10 = spread(r5s), spread(nds)
	in := func(v float64, ci [2]float64) bool { return v >= ci[0]-1e-12 && v <= ci[1]+1e-12 }
	rep.WithinCI = in(rep.OutOfFold.R5, rep.ChosenFull.R5CI) && in(rep.OutOfFold.NDCG10, rep.ChosenFull.NDCG10CI)
	return rep, nil
}

// foldMeans averages f over the queries of each fold.
func foldMeans(pq []QueryScore, folds []int, k int, f func(QueryScore) float64) []float64 {
	sum := make([]float64, k)
	n := make([]int, k)
	for i, q := range pq {
		sum[folds[i]] += f(q)
		n[folds[i]]++
	}
	for i := range sum {
		if n[i] > 0 {
			sum[i] /= float64(n[i])
		}
	}
	return sum
}

func spread(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := Spread{Min: v[0], Max: v[0]}
	for _, x := range v {
		s.Mean += x
		s.Min = min(s.Min, x)
		s.Max = max(s.Max, x)
	}
	s.Mean /= float64(len(v))
	for _, x := range v {
		s.Std += (x - s.Mean) * (x - s.Mean)
	}
	s.Std = math.Sqrt(s.Std / float64(len(v)))
	return s
}

// PairedDiffCI is the 95% bootstrap interval of mean(f(a) − f(b)) over
// paired per-query scores (same queries, same order).
func PairedDiffCI(a, b []QueryScore, f func(QueryScore) float64, resamples int, seed uint64) [2]float64 {
	n := min(len(a), len(b))
	vals := make([]float64, n)
	for i := range n {
		vals[i] = f(a[i]) - f(b[i])
	}
	if n == 0 {
		return [2]float64{}
	}
	return bootstrapValues(vals, resamples, seed)
}

func writeCV(w io.Writer, cv *CVReport) error {
	fmt.Fprintf(w, "\ncross-validation: %d folds, objective %s; chosen on the mean: %s\n", cv.Folds, cv.Objective, cv.Chosen)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setting\tobjective mean\tstd\tmin\tmax\tR@5 (all)\tnDCG@10 (all)\t")
	for _, g := range cv.Grid {
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.3f\t%.3f\t\n", g.Name, g.Objective.Mean, g.Objective.Std, g.Objective.Min, g.Objective.Max, g.R5, g.NDCG10)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fold\tqueries\tchosen on the other folds\tR@5\tnDCG@10\t")
	for _, f := range cv.PerFold {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.3f\t%.3f\t\n", f.Fold, f.Queries, f.Chosen, f.R5, f.NDCG10)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "out-of-fold R@5 %.3f (folds: mean %.3f, std %.3f, %.3f–%.3f); nDCG@10 %.3f (folds: mean %.3f, std %.3f, %.3f–%.3f)\n",
		cv.OutOfFold.R5, cv.FoldR5.Mean, cv.FoldR5.Std, cv.FoldR5.Min, cv.FoldR5.Max,
		cv.OutOfFold.NDCG10, cv.FoldNDCG10.Mean, cv.FoldNDCG10.Std, cv.FoldNDCG10.Min, cv.FoldNDCG10.Max)
	fmt.Fprintf(w, "full DEV with %s: R@5 %.3f (95%% CI %.3f–%.3f), nDCG@10 %.3f (%.3f–%.3f); out-of-fold within both intervals: %v\n",
		cv.Chosen, cv.ChosenFull.R5, cv.ChosenFull.R5CI[0], cv.ChosenFull.R5CI[1], cv.ChosenFull.NDCG10, cv.ChosenFull.NDCG10CI[0], cv.ChosenFull.NDCG10CI[1], cv.WithinCI)
	return nil
}

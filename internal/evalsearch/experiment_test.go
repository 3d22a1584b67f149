package evalsearch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/search"
	"github.com/toolplane/toolplane/internal/search/vectors"
)

// TestReportAllModes prints the full tables (every mode, the full grid
// cross-validated, or EVAL_GRID's) on both DEV sets and on the catalog benchmark when
// EVAL_REPORT=1 (used to write docs/search.md; `make eval` prints the same
// through the binary).
func TestReportAllModes(t *testing.T) {
	if os.Getenv("EVAL_REPORT") != "1" {
		t.Skip("set EVAL_REPORT=1 to print the full evaluation tables")
	}
	grid := GridFull
	if g := os.Getenv("EVAL_GRID"); g != "" {
		grid = g
	}
	for _, set := range []string{"livemcpbench", "metatool"} {
		tools, queries := toolret(t, set)
		rep, err := Evaluate(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Name: set, Split: SplitDev, Folds: 5, Grid: grid})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_ = WriteTable(&buf, rep)
		t.Logf("%s DEV\n%s", set, buf.String())
	}
	cb := catalogBench(t)
	for _, part := range []struct {
		name string
		set  Set
	}{{"train", cb.Train}, {"bench", cb.Bench}} {
		rep, err := Evaluate(context.Background(), Options{Tools: part.set.Tools, Queries: part.set.Queries, Name: "catalog " + part.name, Folds: 5, Grid: grid})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_ = WriteTable(&buf, rep)
		t.Logf("catalog benchmark %s\n%s", part.name, buf.String())
	}
}

// variant is one candidate change to the product's search options.
type variant struct {
	name  string
	apply func(*search.Options)
	grid  string // cross-validated grid; "" is GridFusion
}

// experimentVariants are the changes measured for docs/search.md ("What
// each change added"). EVAL_VECTORS=FILE[,FILE...] adds the static vectors of each FILE
// (scripts/vectors/build.sh with DOMAIN=...) as a variant.
func experimentVariants(t *testing.T) []variant {
	vs := []variant{
		{name: "baseline", apply: func(*search.Options) {}},
		{name: "server context in the semantic text", apply: func(o *search.Options) { o.SemanticServer = true }},
		{name: "query idf^1.5", apply: func(o *search.Options) { o.QueryIDFExponent = 1.5 }},
		{name: "query idf^2", apply: func(o *search.Options) { o.QueryIDFExponent = 2 }},
		{name: "WordNet synonyms 0.2", apply: func(o *search.Options) { o.SynonymWeight = 0.2 }},
		{name: "WordNet synonyms 0.4", apply: func(o *search.Options) { o.SynonymWeight = 0.4 }},
		{name: "server diversity 0.1", apply: func(o *search.Options) { o.ServerDiversity = 0.1 }},
		{name: "server diversity 0.2", apply: func(o *search.Options) { o.ServerDiversity = 0.2 }},
		{name: "server diversity 0.4", apply: func(o *search.Options) { o.ServerDiversity = 0.4 }},
	}
	vs = append(vs,
		variant{name: "prf on (2 documents, weight 0.1)", apply: func(o *search.Options) { o.PRFDocs = 2 }},
	)
	vs = append(vs, variant{name: "prf chosen by CV (prf grid)", apply: func(*search.Options) {}, grid: GridPRF})
	vs = append(vs,
		variant{name: "compound names (bm25)", apply: func(o *search.Options) { o.SplitCompoundNames = true }},
		variant{name: "compound names (semantic)", apply: func(o *search.Options) { o.SplitCompoundSemantic = true }},
		variant{name: "compound names (both)", apply: func(o *search.Options) { o.SplitCompoundNames, o.SplitCompoundSemantic = true, true }},
	)
	for _, k := range []int{2, 3, 5, 10} {
		for _, w := range []float64{0.1, 0.2, 0.5} {
			vs = append(vs, variant{name: fmt.Sprintf("prf k=%d w=%g", k, w), apply: func(o *search.Options) { o.PRFDocs, o.PRFWeight = k, w }})
		}
	}
	bm := func(name string, f func(*search.BM25Params)) variant {
		return variant{name: name, apply: func(o *search.Options) {
			o.BM25 = search.DefaultBM25Params()
			f(&o.BM25)
		}}
	}
	vs = append(vs,
		bm("bm25+ delta=0.5", func(p *search.BM25Params) { p.Delta = 0.5 }),
		bm("bm25+ delta=1", func(p *search.BM25Params) { p.Delta = 1 }),
		bm("bm25 k1=0.9", func(p *search.BM25Params) { p.K1 = 0.9 }),
		bm("bm25 k1=1.6", func(p *search.BM25Params) { p.K1 = 1.6 }),
		bm("bm25 k1=2.0", func(p *search.BM25Params) { p.K1 = 2.0 }),
		bm("bm25 name b=0.25", func(p *search.BM25Params) { p.Name.B = 0.25 }),
		bm("bm25 name b=0.75", func(p *search.BM25Params) { p.Name.B = 0.75 }),
		bm("bm25 description b=0.5", func(p *search.BM25Params) { p.Description.B = 0.5 }),
		bm("bm25 description b=0.9", func(p *search.BM25Params) { p.Description.B = 0.9 }),
	)
	if def, err := vectors.Default(); err == nil {
		// The default embedder falls back to stems (decision 0056); this is
		// the embedder before it.
		emb := search.NewStaticEmbedder(def)
		vs = append(vs, variant{name: "without stem fallback", apply: func(o *search.Options) { o.Embedder = emb }})
	}
	for _, w := range []float64{0.05, 0.1, 0.2, 0.3, 0.5, 1} {
		vs = append(vs, variant{name: fmt.Sprintf("word alignment %g", w), apply: func(o *search.Options) { o.AlignWeight = w }})
	}
	for _, p := range strings.Split(os.Getenv("EVAL_VECTORS"), ",") {
		if p == "" {
			continue
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := vectors.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		emb := search.NewStaticEmbedder(tab)
		vs = append(vs, variant{name: "vectors " + p, apply: func(o *search.Options) { o.Embedder = emb }})
		embS := search.NewStaticEmbedderStemFallback(tab)
		vs = append(vs, variant{name: "vectors+stem " + p, apply: func(o *search.Options) { o.Embedder = embS }})
		if def, err := vectors.Default(); err == nil {
			cat := concatEmbedder{search.NewStaticEmbedderStemFallback(def), embS}
			vs = append(vs, variant{name: "vectors concat committed+" + p, apply: func(o *search.Options) { o.Embedder = cat }})
		}
	}
	return vs
}

// TestExperimentVariants reports, per variant and data set, the
// out-of-fold AUTO figures (5 folds, fusion grid) and the paired 95%
// interval of the change against the baseline, when EVAL_EXPERIMENT=1.
func TestExperimentVariants(t *testing.T) {
	if os.Getenv("EVAL_EXPERIMENT") != "1" {
		t.Skip("set EVAL_EXPERIMENT=1 to measure the candidate changes")
	}
	type dataset struct {
		name string
		opts Options
	}
	var sets []dataset
	only := os.Getenv("EVAL_VARIANTS") // comma-separated substrings; empty: all
	for _, set := range []string{"livemcpbench", "metatool"} {
		tools, queries := toolret(t, set)
		sets = append(sets, dataset{set + " DEV", Options{ToolsPath: tools, QueriesPath: queries, Split: SplitDev}})
	}
	cb := catalogBench(t)
	sets = append(sets, dataset{"catalog train", Options{Tools: cb.Train.Tools, Queries: cb.Train.Queries}})
	sets = append(sets, dataset{"catalog bench", Options{Tools: cb.Bench.Tools, Queries: cb.Bench.Queries}})
	var out strings.Builder
	sel := os.Getenv("EVAL_SETS") // comma-separated substrings of set names; empty: all
	for _, ds := range sets {
		if sel != "" && !slices.ContainsFunc(strings.Split(sel, ","), func(p string) bool { return strings.Contains(ds.name, p) }) {
			continue
		}
		var base []QueryScore
		fmt.Fprintf(&out, "\n%s\n%-40s %7s %7s %7s   %-22s %-22s\n", ds.name, "variant (out-of-fold AUTO)", "R@5", "R@10", "nDCG@10", "ΔR@5 95% CI", "ΔnDCG@10 95% CI")
		for i, v := range experimentVariants(t) {
			if i > 0 && only != "" && !slices.ContainsFunc(strings.Split(only, ","), func(p string) bool { return strings.Contains(v.name, p) }) {
				continue
			}
			o := ds.opts
			o.Modes = []string{"bm25"}
			o.Folds = 5
			o.Search = search.Options{}
			o.Grid = v.grid
			v.apply(&o.Search)
			rep, err := Evaluate(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			oof := rep.CV.OutOfFoldScores()
			if base == nil {
				base = oof
			}
			m := rep.CV.OutOfFold
			d5 := PairedDiffCI(oof, base, func(q QueryScore) float64 { return q.R5 }, 2000, 1)
			dn := PairedDiffCI(oof, base, func(q QueryScore) float64 { return q.NDCG10 }, 2000, 1)
			var r5, nd float64
			for i := range oof {
				r5 += oof[i].R5 - base[i].R5
				nd += oof[i].NDCG10 - base[i].NDCG10
			}
			n := float64(len(oof))
			fmt.Fprintf(&out, "%-40s %7.3f %7.3f %7.3f   %+.3f (%+.3f…%+.3f)  %+.3f (%+.3f…%+.3f)\n", v.name, m.R5, m.R10, m.NDCG10, r5/n, d5[0], d5[1], nd/n, dn[0], dn[1])
			if v.grid != "" {
				for _, f := range rep.CV.PerFold {
					fmt.Fprintf(&out, "    fold %d chose %s\n", f.Fold, f.Chosen)
				}
			}
		}
	}
	t.Log(out.String())
}

// concatEmbedder concatenates the vectors of two embedders (each unit or
// zero), so a cosine over the result is the mean of the two cosines: an
// ensemble of two static vector tables (docs/search.md, third round).
type concatEmbedder [2]search.Embedder

func (c concatEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	a, err := c[0].Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	b, err := c[1].Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i := range texts {
		out[i] = append(append([]float32(nil), a[i]...), b[i]...)
	}
	return out, nil
}

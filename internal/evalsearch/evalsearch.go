// Package evalsearch is the search evaluation harness behind
// `toolplane eval search`: it loads a tool catalog and labelled queries in
// the neutral JSONL format of the toolret data READMEs (see docs/search.md),
// indexes the tools in-process with internal/search (no per-caller result
// cap), and reports per mode Recall@1/3/5/10, nDCG@10 (binary gains), MRR,
// query latency p50/p99, and 95% bootstrap confidence intervals for
// Recall@5 and nDCG@10.
//
// Anything chosen by measurement (fusion weight, field weights, thresholds)
// is chosen by k-fold cross-validation (CrossValidate): every candidate
// setting of the grid is scored on every fold, the setting with the best
// mean across folds is the choice, and the out-of-fold figures score each
// fold with the setting chosen on the other folds only. The CI gate compares
// those out-of-fold AUTO figures with bm25-basic (docs/search.md).
//
// Each query is sent as tool_search receives it: a ranked query over
// search.MaxQueryBytes (4 KiB) is refused by the catalog with
// INVALID_ARGUMENT, so the harness counts it as refused and scores it as a
// miss in every mode (nothing retrieved) instead of aborting the run.
//
// Scoring is strict: a result counts only when its name is in the query's
// `relevant` list (the optional `equivalent` map is ignored), and names are
// the original tool names of tools.jsonl.
//
// Besides the product modes (regex, bm25, semantic, auto) it offers the
// evaluation-only "bm25-basic" baseline: plain BM25 (k1 1.2, b 0.75,
// Lucene idf) over name + description with the tokenisation of the data
// READMEs, no stemming and no stop words.
package evalsearch

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/toolplane/toolplane/internal/search"
)

// ModeBM25Basic names the evaluation-only baseline ranker.
const ModeBM25Basic = "bm25-basic"

// AllModes lists every mode in report order.
var AllModes = []string{"regex", ModeBM25Basic, "bm25", "semantic", "auto"}

// Split selects which queries to evaluate, by the rule of the toolret
// READMEs: a query is DEV iff the first 8 hex digits of SHA-256(id), as an
// integer, mod 100 is below 30.
type Split string

const (
	// SplitAll evaluates every query in the file.
	SplitAll Split = "all"
	// SplitDev evaluates the DEV queries only.
	SplitDev Split = "dev"
	// SplitHeldOut evaluates the HELD-OUT queries only.
	SplitHeldOut Split = "heldout"
)

// Options configure a run.
type Options struct {
	// ToolsPath is the tools JSONL file (name, description, input_schema, server).
	ToolsPath string
	// QueriesPath is the queries JSONL file (id, query, relevant[], equivalent{}).
	QueriesPath string
	// Tools and Queries, when Tools is non-nil, are used instead of the
	// files (e.g. the catalog benchmark of BuildCatalogBenchmark).
	Tools   []Tool
	Queries []Query
	// Name labels the data set in the report (default: the tools file).
	Name string
	// Modes to evaluate (default AllModes): regex, bm25-basic, bm25, semantic, auto.
	Modes []string
	// K is the retrieval depth per query (default and minimum 10); MRR is
	// computed within it.
	K int
	// Output is "table" (default) or "json".
	Output string
	// Split filters queries (default SplitAll).
	Split Split
	// Search configures the product index (zero value: product defaults).
	Search search.Options
	// Folds is the number of cross-validation folds (0: no cross-validation).
	Folds int
	// Grid is the cross-validated grid: GridFusion (default) or GridFull.
	Grid string
	// Resamples is the number of bootstrap resamples for the confidence
	// intervals (default 2000).
	Resamples int
}

// Tool is one row of tools.jsonl.
type Tool struct {
	// Name is the original tool name (unique in the file); results are scored on it.
	Name string `json:"name"`
	// Description is the tool description.
	Description string `json:"description"`
	// InputSchema is the tool's JSON Schema, or null.
	InputSchema json.RawMessage `json:"input_schema"`
	// Server is the server key, or null.
	Server *string `json:"server"`
}

// Query is one row of queries.jsonl.
type Query struct {
	// ID identifies the query (and decides its split and fold).
	ID string `json:"id"`
	// Query is the request text.
	Query string `json:"query"`
	// Relevant lists the tool names a correct answer uses.
	Relevant []string `json:"relevant"`
	// Equivalent maps a relevant tool to same-named tools of other servers;
	// strict scoring ignores it.
	Equivalent map[string][]string `json:"equivalent,omitempty"`
}

// Metrics are the averaged results of one mode (per-query means).
type Metrics struct {
	// Mode is the evaluated mode (or "auto (out-of-fold)").
	Mode string `json:"mode"`
	// Queries is the number of scored queries.
	Queries int `json:"queries"`
	// Refused counts queries tool_search refuses (over 4 KiB); each is
	// scored as a miss.
	Refused int `json:"refused"`
	// R1, R3, R5 and R10 are Recall@k: the share of relevant tools in the top k.
	R1  float64 `json:"recall@1"`
	R3  float64 `json:"recall@3"`
	R5  float64 `json:"recall@5"`
	R10 float64 `json:"recall@10"`
	// NDCG10 is nDCG@10 with binary gains.
	NDCG10 float64 `json:"ndcg@10"`
	// MRR is the mean reciprocal rank of the first relevant tool within K.
	MRR float64 `json:"mrr"`
	// R5CI and NDCG10CI are 95% percentile-bootstrap confidence intervals
	// (queries resampled with replacement).
	R5CI     [2]float64 `json:"recall@5_ci95"`
	NDCG10CI [2]float64 `json:"ndcg@10_ci95"`
	// P50ms and P99ms are per-query search latencies in milliseconds.
	P50ms float64 `json:"latency_p50_ms"`
	P99ms float64 `json:"latency_p99_ms"`
}

// Report is the outcome of Evaluate.
type Report struct {
	// Name labels the data set.
	Name string `json:"name,omitempty"`
	// Tools is the number of indexed tools.
	Tools int `json:"tools"`
	// Queries is the number of scored queries.
	Queries int `json:"queries"`
	// Split is the evaluated split.
	Split Split `json:"split"`
	// Modes holds one entry per evaluated mode, in request order.
	Modes []Metrics `json:"modes"`
	// CV is the cross-validation of AUTO's measured settings (nil when
	// Options.Folds is 0).
	CV *CVReport `json:"cross_validation,omitempty"`

	perQuery map[string][]QueryScore
}

// Mode returns the metrics of mode, or nil.
func (r *Report) Mode(mode string) *Metrics {
	for i := range r.Modes {
		if r.Modes[i].Mode == mode {
			return &r.Modes[i]
		}
	}
	return nil
}

// PerQuery returns the per-query scores of mode (in query order), or nil.
func (r *Report) PerQuery(mode string) []QueryScore { return r.perQuery[mode] }

// IsDev reports whether a query id is in the DEV split (toolret READMEs).
func IsDev(id string) bool {
	sum := sha256.Sum256([]byte(id))
	v, _ := strconv.ParseUint(hex.EncodeToString(sum[:4]), 16, 64)
	return v%100 < 30
}

// Run evaluates and writes the report to w as a table or JSON.
func Run(ctx context.Context, opts Options, w io.Writer) error {
	if opts.Output == "" {
		opts.Output = "table"
	}
	if opts.Output != "table" && opts.Output != "json" {
		return fmt.Errorf("output: want table or json, got %q", opts.Output)
	}
	rep, err := Evaluate(ctx, opts)
	if err != nil {
		return err
	}
	if opts.Output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return WriteTable(w, rep)
}

// WriteTable writes rep as aligned text tables: one row per mode (and the
// out-of-fold AUTO row), then the cross-validation details.
func WriteTable(w io.Writer, rep *Report) error {
	name := ""
	if rep.Name != "" {
		name = rep.Name + "  "
	}
	fmt.Fprintf(w, "%stools: %d  queries: %d  split: %s\n", name, rep.Tools, rep.Queries, rep.Split)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tR@1\tR@3\tR@5\tR@5 95% CI\tR@10\tnDCG@10\tnDCG@10 95% CI\tMRR\trefused\tp50 ms\tp99 ms\t")
	rows := rep.Modes
	if rep.CV != nil {
		rows = append(slices.Clone(rows), rep.CV.OutOfFold)
	}
	for _, m := range rows {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f–%.3f\t%.3f\t%.3f\t%.3f–%.3f\t%.3f\t%d\t%.3f\t%.3f\t\n",
			m.Mode, m.R1, m.R3, m.R5, m.R5CI[0], m.R5CI[1], m.R10, m.NDCG10, m.NDCG10CI[0], m.NDCG10CI[1], m.MRR, m.Refused, m.P50ms, m.P99ms)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.CV != nil {
		return writeCV(w, rep.CV)
	}
	return nil
}

// Evaluate loads the data, runs every mode and, when opts.Folds > 1,
// cross-validates AUTO's settings over the grid.
func Evaluate(ctx context.Context, opts Options) (*Report, error) {
	if opts.K < 10 {
		opts.K = 10
	}
	if opts.Split == "" {
		opts.Split = SplitAll
	}
	if opts.Resamples <= 0 {
		opts.Resamples = 2000
	}
	modes := opts.Modes
	if len(modes) == 0 {
		modes = AllModes
	}
	for _, m := range modes {
		if !slices.Contains(AllModes, m) {
			return nil, fmt.Errorf("mode: unknown %q (want one of %s)", m, strings.Join(AllModes, ", "))
		}
	}
	if opts.Folds < 0 || opts.Folds == 1 {
		return nil, fmt.Errorf("folds: want 0 (no cross-validation) or at least 2, got %d", opts.Folds)
	}
	grid, err := GridByName(opts.Grid)
	if err != nil {
		return nil, err
	}
	tools, queries, err := loadData(opts)
	if err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = opts.ToolsPath
	}
	rep := &Report{Name: name, Tools: len(tools), Queries: len(queries), Split: opts.Split, perQuery: map[string][]QueryScore{}}
	seed := seedOf(queries)
	var basic *basicBM25
	for _, m := range modes {
		var pq []QueryScore
		var lat []float64
		if m == ModeBM25Basic {
			if basic == nil {
				basic = newBasicBM25(tools)
			}
			pq, lat, err = runQueries(ctx, m, queries, opts.K, func(q string) ([]string, error) { return basic.search(q, opts.K), nil })
		} else {
			pq, lat, err = runProduct(ctx, m, tools, queries, opts.Search, opts.K)
		}
		if err != nil {
			return nil, err
		}
		rep.perQuery[m] = pq
		rep.Modes = append(rep.Modes, summarise(m, pq, lat, opts.Resamples, seed))
	}
	if opts.Folds >= 2 {
		cv, err := CrossValidate(ctx, tools, queries, CVOptions{Folds: opts.Folds, Grid: grid, K: opts.K, Resamples: opts.Resamples, Seed: seed, Base: opts.Search})
		if err != nil {
			return nil, err
		}
		rep.CV = cv
	}
	return rep, nil
}

// loadData returns the tools and the labelled queries of the selected split.
func loadData(opts Options) ([]Tool, []Query, error) {
	tools, allQ := opts.Tools, opts.Queries
	if tools == nil {
		if opts.ToolsPath == "" || opts.QueriesPath == "" {
			return nil, nil, errors.New("tools and queries files are required")
		}
		var err error
		if tools, err = readJSONL[Tool](opts.ToolsPath); err != nil {
			return nil, nil, err
		}
		if allQ, err = readJSONL[Query](opts.QueriesPath); err != nil {
			return nil, nil, err
		}
	}
	var queries []Query
	for _, q := range allQ {
		switch opts.Split {
		case SplitDev:
			if !IsDev(q.ID) {
				continue
			}
		case SplitHeldOut:
			if IsDev(q.ID) {
				continue
			}
		case SplitAll:
		default:
			return nil, nil, fmt.Errorf("split: unknown %q (want all, dev or heldout)", opts.Split)
		}
		if len(q.Relevant) > 0 {
			queries = append(queries, q)
		}
	}
	if len(queries) == 0 {
		return nil, nil, errors.New("queries: no labelled queries in the selected split")
	}
	return tools, queries, nil
}

// runProduct indexes tools with o and runs every query in mode.
func runProduct(ctx context.Context, m string, tools []Tool, queries []Query, o search.Options, k int) ([]QueryScore, []float64, error) {
	ix, err := buildIndex(ctx, tools, o)
	if err != nil {
		return nil, nil, err
	}
	mode, err := search.ParseMode(m)
	if err != nil {
		return nil, nil, err
	}
	return runQueries(ctx, m, queries, k, func(q string) ([]string, error) {
		resp, err := ix.Search(ctx, search.Request{Query: q, Mode: mode, Limit: k})
		if err != nil {
			return nil, err
		}
		names := make([]string, len(resp.Results))
		for i, r := range resp.Results {
			names[i] = r.Name
		}
		return names, nil
	})
}

// buildIndex loads tools into a product index in file (catalog) order.
func buildIndex(ctx context.Context, tools []Tool, o search.Options) (*search.Index, error) {
	ix := search.NewIndex(o)
	docs := make([]search.Document, len(tools))
	for i, t := range tools {
		pn, pd := search.ParamsFromSchema(t.InputSchema)
		d := search.Document{Name: t.Name, Description: t.Description, ParamNames: pn, ParamDescriptions: pd}
		if t.Server != nil {
			d.Server = *t.Server
		}
		docs[i] = d
	}
	if err := ix.Replace(ctx, docs); err != nil {
		return nil, err
	}
	return ix, nil
}

// regexQuery quotes a natural-language query for REGEX mode the way a model
// using DeerFlow's tool would send it: the text itself, cut to the 200
// character pattern limit so long tasks are still evaluated.
func regexQuery(q string) string {
	if r := []rune(q); len(r) > search.MaxRegexChars {
		return string(r[:search.MaxRegexChars])
	}
	return q
}

// seedOf derives a deterministic bootstrap seed from the query ids, so a
// report is the same on every machine.
func seedOf(queries []Query) uint64 {
	h := sha256.New()
	for _, q := range queries {
		h.Write([]byte(q.ID))
		h.Write([]byte{0})
	}
	var v uint64
	for _, b := range h.Sum(nil)[:8] {
		v = v<<8 | uint64(b)
	}
	return v
}

func readJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

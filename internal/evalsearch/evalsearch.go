// Package evalsearch is the search evaluation harness (docs/search.md): it loads
// a tool catalog and labelled queries in the neutral JSONL format of
// testdata/toolret/*/README.md, indexes the tools in-process with
// internal/search (no per-caller result cap), and reports per mode
// Recall@1/3/5/10, nDCG@10 (binary gains), MRR and query latency p50/p99.
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
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

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
	// ID identifies the query (and decides its split).
	ID string `json:"id"`
	// Query is the request text.
	Query string `json:"query"`
	// Relevant lists the tool names a correct answer uses.
	Relevant []string `json:"relevant"`
	// Equivalent maps a relevant tool to same-named tools of other servers;
	// strict scoring ignores it.
	Equivalent map[string][]string `json:"equivalent,omitempty"`
}

// Metrics are the averaged results of one mode (per-query means). JSON keys
// follow docs/search.md.
type Metrics struct {
	// Mode is the evaluated mode.
	Mode string `json:"mode"`
	// Queries is the number of scored queries.
	Queries int `json:"queries"`
	// R1, R3, R5 and R10 are Recall@k: the share of relevant tools in the top k.
	R1  float64 `json:"recall@1"`
	R3  float64 `json:"recall@3"`
	R5  float64 `json:"recall@5"`
	R10 float64 `json:"recall@10"`
	// NDCG10 is nDCG@10 with binary gains.
	NDCG10 float64 `json:"ndcg@10"`
	// MRR is the mean reciprocal rank of the first relevant tool within K.
	MRR float64 `json:"mrr"`
	// P50ms and P99ms are per-query search latencies in milliseconds.
	P50ms float64 `json:"latency_p50_ms"`
	P99ms float64 `json:"latency_p99_ms"`
}

// Report is the outcome of Evaluate.
type Report struct {
	// Tools is the number of indexed tools.
	Tools int `json:"tools"`
	// Queries is the number of scored queries.
	Queries int `json:"queries"`
	// Split is the evaluated split.
	Split Split `json:"split"`
	// Modes holds one entry per evaluated mode, in request order.
	Modes []Metrics `json:"modes"`
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

// WriteTable writes rep as an aligned text table.
func WriteTable(w io.Writer, rep *Report) error {
	fmt.Fprintf(w, "tools: %d  queries: %d  split: %s\n", rep.Tools, rep.Queries, rep.Split)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tR@1\tR@3\tR@5\tR@10\tnDCG@10\tMRR\tp50 ms\tp99 ms\t")
	for _, m := range rep.Modes {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n",
			m.Mode, m.R1, m.R3, m.R5, m.R10, m.NDCG10, m.MRR, m.P50ms, m.P99ms)
	}
	return tw.Flush()
}

// Evaluate loads the files, runs every mode and returns the metrics.
func Evaluate(ctx context.Context, opts Options) (*Report, error) {
	if opts.ToolsPath == "" || opts.QueriesPath == "" {
		return nil, errors.New("tools and queries files are required")
	}
	if opts.K < 10 {
		opts.K = 10
	}
	if opts.Split == "" {
		opts.Split = SplitAll
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
	tools, err := readJSONL[Tool](opts.ToolsPath)
	if err != nil {
		return nil, err
	}
	allQ, err := readJSONL[Query](opts.QueriesPath)
	if err != nil {
		return nil, err
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
			return nil, fmt.Errorf("split: unknown %q", opts.Split)
		}
		if len(q.Relevant) > 0 {
			queries = append(queries, q)
		}
	}
	if len(queries) == 0 {
		return nil, errors.New("queries: no labelled queries in the selected split")
	}
	rep := &Report{Tools: len(tools), Queries: len(queries), Split: opts.Split}

	var ix *search.Index
	var basic *basicBM25
	for _, m := range modes {
		var run func(q string) ([]string, error)
		if m == ModeBM25Basic {
			if basic == nil {
				basic = newBasicBM25(tools)
			}
			run = func(q string) ([]string, error) { return basic.search(q, opts.K), nil }
		} else {
			if ix == nil {
				if ix, err = buildIndex(ctx, tools, opts.Search); err != nil {
					return nil, err
				}
			}
			mode, err := search.ParseMode(m)
			if err != nil {
				return nil, err
			}
			run = func(q string) ([]string, error) {
				resp, err := ix.Search(ctx, search.Request{Query: q, Mode: mode, Limit: opts.K})
				if err != nil {
					return nil, err
				}
				names := make([]string, len(resp.Results))
				for i, r := range resp.Results {
					names[i] = r.Name
				}
				return names, nil
			}
		}
		met, err := score(ctx, m, queries, run)
		if err != nil {
			return nil, err
		}
		rep.Modes = append(rep.Modes, met)
	}
	return rep, nil
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

func score(ctx context.Context, mode string, queries []Query, run func(string) ([]string, error)) (Metrics, error) {
	m := Metrics{Mode: mode, Queries: len(queries)}
	lat := make([]float64, 0, len(queries))
	for _, q := range queries {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		text := q.Query
		if mode == "regex" {
			text = regexQuery(text)
		}
		start := time.Now()
		got, err := run(text)
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e6)
		if err != nil {
			return m, fmt.Errorf("mode %s, query %s: %w", mode, q.ID, err)
		}
		rel := make(map[string]bool, len(q.Relevant))
		for _, r := range q.Relevant {
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
		m.R1 += hitsAt(1)
		m.R3 += hitsAt(3)
		m.R5 += hitsAt(5)
		m.R10 += hitsAt(10)
		var dcg, idcg float64
		for i := 0; i < 10 && i < len(got); i++ {
			if rel[got[i]] {
				dcg += 1 / math.Log2(float64(i+2))
			}
		}
		for i := 0; i < 10 && i < len(rel); i++ {
			idcg += 1 / math.Log2(float64(i+2))
		}
		m.NDCG10 += dcg / idcg
		for i, name := range got {
			if rel[name] {
				m.MRR += 1 / float64(i+1)
				break
			}
		}
	}
	n := float64(len(queries))
	m.R1 /= n
	m.R3 /= n
	m.R5 /= n
	m.R10 /= n
	m.NDCG10 /= n
	m.MRR /= n
	slices.Sort(lat)
	m.P50ms = percentile(lat, 0.50)
	m.P99ms = percentile(lat, 0.99)
	return m, nil
}

// percentile returns the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
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

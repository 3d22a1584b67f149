package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/internal/evalsearch"
	"github.com/toolplane/toolplane/internal/search"
)

// newEvalCmd returns `toolplane eval`, whose `search` sub-command runs the
// tool-search evaluation harness (internal/evalsearch, docs/search.md) on
// files in the neutral JSONL format of the toolret data READMEs, or on the
// catalog benchmark synthesised from an MCP catalog.
func newEvalCmd() *cobra.Command {
	eval := &cobra.Command{
		Use:   "eval",
		Short: "Evaluate Toolplane components offline",
	}
	var (
		tools, queries, output, split, grid string
		catalog, part                       string
		embURL, embModel, embKeyEnv         string
		embDims                             int
		modes, exclude                      []string
		k, folds, resamples                 int
	)
	searchCmd := &cobra.Command{
		Use:   "search (--tools FILE --queries FILE | --catalog FILE [--exclude FILE]...) [--mode M]... [--folds N] [--output table|json]",
		Short: "Measure tool-search quality (Recall@1/3/5/10, nDCG@10, MRR, 95% CIs, latency) per mode, cross-validated",
		Long: "Loads the tools as a static catalog (no result cap), runs every labelled query in each mode\n" +
			"and prints Recall@1/3/5/10, nDCG@10, MRR, 95% bootstrap intervals for Recall@5 and nDCG@10,\n" +
			"and query latency p50/p99. Modes: " + strings.Join(evalsearch.AllModes, ", ") + " (bm25-basic is the\n" +
			"evaluation-only baseline: plain BM25, k1 1.2, b 0.75, over name + description). Scoring is strict,\n" +
			"on the original tool names. A query over 4 KiB is refused as tool_search refuses it and scored as\n" +
			"a miss. With --folds N (default 5) AUTO's measured settings (--grid fusion|full|prf) are chosen by\n" +
			"N-fold cross-validation and the out-of-fold AUTO row is printed.\n" +
			"--catalog FILE builds the catalog benchmark instead: tools whose description occurs in an\n" +
			"--exclude file are dropped, servers are split into train and bench parts (--part), and each\n" +
			"tool's parameter descriptions become a query against its name, description and server.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := evalsearch.Options{
				ToolsPath:   tools,
				QueriesPath: queries,
				Modes:       modes,
				K:           k,
				Output:      output,
				Split:       evalsearch.Split(split),
				Folds:       folds,
				Grid:        grid,
				Resamples:   resamples,
			}
			if embURL != "" {
				emb, err := search.NewHTTPEmbedder(search.HTTPEmbedderConfig{URL: embURL, Model: embModel, APIKeyEnv: embKeyEnv, Dimensions: embDims})
				if err != nil {
					return fmt.Errorf("--embedder-%w", err)
				}
				// Tool texts are embedded once per run and reused by every
				// cross-validated setting.
				opts.Search.Embedder = search.NewCachedEmbedder(emb, embModel, search.NewMemoryCache(0))
			}
			switch {
			case catalog != "":
				if tools != "" || queries != "" {
					return fmt.Errorf("--catalog excludes --tools and --queries")
				}
				cb, err := evalsearch.BuildCatalogBenchmark(catalog, exclude)
				if err != nil {
					return err
				}
				set := cb.Bench
				switch part {
				case "bench":
				case "train":
					set = cb.Train
				default:
					return fmt.Errorf("--part: want bench or train, got %q", part)
				}
				opts.Tools, opts.Queries = set.Tools, set.Queries
				opts.Name = "catalog benchmark (" + part + ")"
				opts.Split = evalsearch.SplitAll
				fmt.Fprintf(cmd.ErrOrStderr(), "catalog benchmark: %d rows, %d dropped (description in an --exclude set), servers %d train / %d bench, tools %d / %d, queries %d / %d\n",
					cb.Stats.Tools, cb.Stats.DroppedToolret, cb.Stats.TrainServers, cb.Stats.BenchServers,
					cb.Stats.TrainTools, cb.Stats.BenchTools, cb.Stats.TrainQueries, cb.Stats.BenchQueries)
			case tools == "" || queries == "":
				return fmt.Errorf("--tools and --queries are required (or --catalog)")
			}
			return evalsearch.Run(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	f := searchCmd.Flags()
	f.StringVar(&tools, "tools", "", "tools JSONL file (name, description, input_schema, server)")
	f.StringVar(&queries, "queries", "", "queries JSONL file (id, query, relevant[], equivalent{})")
	f.StringArrayVar(&modes, "mode", nil, "mode to evaluate, repeatable: "+strings.Join(evalsearch.AllModes, ", ")+" (default all)")
	f.IntVar(&k, "k", 10, "retrieval depth per query (at least 10)")
	f.StringVar(&output, "output", "table", "output format: table or json")
	f.StringVar(&split, "split", string(evalsearch.SplitAll), "queries to score: all, dev or heldout (split rule of the toolret READMEs)")
	f.IntVar(&folds, "folds", 5, "cross-validation folds for AUTO's measured settings (0: none)")
	f.StringVar(&grid, "grid", evalsearch.GridFusion, "cross-validated grid: fusion (semantic weight), full (weight, threshold, name field weight) or prf (weight and pseudo-relevance feedback)")
	f.IntVar(&resamples, "resamples", 2000, "bootstrap resamples for the 95% confidence intervals")
	f.StringVar(&catalog, "catalog", "", "build the catalog benchmark from this tools JSONL file (with input schemas)")
	f.StringArrayVar(&exclude, "exclude", nil, "tools JSONL file whose descriptions are dropped from --catalog, repeatable")
	f.StringVar(&part, "part", "bench", "catalog benchmark part: bench or train")
	f.StringVar(&embURL, "embedder-url", "", "OpenAI-compatible /v1/embeddings URL to embed with instead of the static vectors")
	f.StringVar(&embModel, "embedder-model", "", "model sent to --embedder-url (required with it)")
	f.StringVar(&embKeyEnv, "embedder-key-env", "", "environment variable holding the bearer token for --embedder-url")
	f.IntVar(&embDims, "embedder-dimensions", 0, "dimensions sent to --embedder-url (0: the model's own)")
	eval.AddCommand(searchCmd)
	return eval
}

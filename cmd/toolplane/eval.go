package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/internal/evalsearch"
)

// newEvalCmd returns `toolplane eval`, whose `search` sub-command runs the
// tool-search evaluation harness (internal/evalsearch, docs/search.md) on files
// in the neutral JSONL format of testdata/toolret/*/README.md.
func newEvalCmd() *cobra.Command {
	eval := &cobra.Command{
		Use:   "eval",
		Short: "Evaluate Toolplane components offline",
	}
	var (
		tools, queries, output, split string
		modes                         []string
		k                             int
	)
	searchCmd := &cobra.Command{
		Use:   "search --tools FILE --queries FILE [--mode M]... [--k N] [--output table|json]",
		Short: "Measure tool-search quality (Recall@1/3/5/10, nDCG@10, MRR, latency) per mode",
		Long: "Loads the tools as a static catalog (no result cap), runs every labelled query in each mode\n" +
			"and prints Recall@1/3/5/10, nDCG@10, MRR and query latency p50/p99. Modes: " +
			strings.Join(evalsearch.AllModes, ", ") + " (bm25-basic is the evaluation-only baseline:\n" +
			"plain BM25, k1 1.2, b 0.75, over name + description). Scoring is strict, on the original tool names.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tools == "" || queries == "" {
				return fmt.Errorf("--tools and --queries are required")
			}
			return evalsearch.Run(cmd.Context(), evalsearch.Options{
				ToolsPath:   tools,
				QueriesPath: queries,
				Modes:       modes,
				K:           k,
				Output:      output,
				Split:       evalsearch.Split(split),
			}, cmd.OutOrStdout())
		},
	}
	f := searchCmd.Flags()
	f.StringVar(&tools, "tools", "", "tools JSONL file (name, description, input_schema, server)")
	f.StringVar(&queries, "queries", "", "queries JSONL file (id, query, relevant[], equivalent{})")
	f.StringArrayVar(&modes, "mode", nil, "mode to evaluate, repeatable: "+strings.Join(evalsearch.AllModes, ", ")+" (default all)")
	f.IntVar(&k, "k", 10, "retrieval depth per query (at least 10)")
	f.StringVarP(&output, "output", "o", "table", "output format: table or json")
	f.StringVar(&split, "split", string(evalsearch.SplitAll), "queries to score: all, dev or heldout (split rule of the toolret READMEs)")
	eval.AddCommand(searchCmd)
	return eval
}

package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// newToolsCmd returns `toolplane tools search "..." [--mode] [--limit]` and
// `toolplane tools get NAME`, clients of a running suite's CatalogService
// (service or admin credential; works as-is with auth off).
func newToolsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tools", Short: "Search and inspect catalog tools"}
	cf := addClientFlags(cmd)
	var asJSON bool
	addOutputFlags(cmd.PersistentFlags(), &asJSON)
	var mode string
	var limit int32
	search := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search tools (`select:a,b`, `+required rest`, or free text)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			m, ok := catalogv1.SearchMode_value["SEARCH_MODE_"+strings.ToUpper(mode)]
			if !ok {
				return fmt.Errorf("--mode: %q is not one of auto, bm25, semantic, regex", mode)
			}
			cc, err := cf.dial()
			if err != nil {
				return err
			}
			defer cc.Close()
			r, err := catalogv1.NewCatalogServiceClient(cc).SearchTools(callCtx(c),
				&catalogv1.SearchToolsRequest{Query: a[0], Mode: catalogv1.SearchMode(m), Limit: limit})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCORE\tNAME\tSERVER\tMATCHED\tDESCRIPTION")
			for _, h := range r.GetHits() {
				d := strings.ReplaceAll(strings.TrimSpace(h.GetTool().GetDescription()), "\n", " ")
				if len(d) > 70 {
					d = d[:67] + "..."
				}
				fmt.Fprintf(tw, "%.3f\t%s\t%s\t%s\t%s\n", h.GetScore(), h.GetTool().GetName(), h.GetTool().GetServer(), strings.Join(h.GetMatchedFields(), ","), d)
			}
			tw.Flush()
			fmt.Fprintf(c.OutOrStdout(), "catalog hash %s%s\n", r.GetCatalogHash(), map[bool]string{true: " (truncated)"}[r.GetTruncated()])
			return nil
		},
	}
	search.Flags().StringVar(&mode, "mode", "auto", "ranking: auto, bm25, semantic or regex")
	search.Flags().Int32Var(&limit, "limit", 0, "maximum results (0 = the server default, 5)")
	cmd.AddCommand(search)
	cmd.AddCommand(&cobra.Command{
		Use: "get NAME", Short: "Show one tool with its full schemas", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			cc, err := cf.dial()
			if err != nil {
				return err
			}
			defer cc.Close()
			r, err := catalogv1.NewCatalogServiceClient(cc).GetTool(callCtx(c), &catalogv1.GetToolRequest{Name: a[0]})
			if err != nil {
				return err
			}
			return printJSON(c.OutOrStdout(), r.GetTool())
		},
	})
	cmd.AddCommand(newToolsStatsCmd())  // tools_stats.go
	addToolReviewCmds(cmd, cf, &asJSON) // tools_review_cmds.go
	return cmd
}

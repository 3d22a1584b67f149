package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// addToolReviewCmds adds `toolplane tools pending|approve|reject` (definition
// pinning, docs/architecture.md §7): clients of ListPendingTools,
// ApproveTool and RejectTool (admin credential).
func addToolReviewCmds(cmd *cobra.Command, cf *clientFlags, asJSON *bool) {
	var server string
	pending := &cobra.Command{
		Use:   "pending",
		Short: "List tools of pinned servers waiting for review (new, changed or rejected definitions) with their diff",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cc, err := cf.dial()
			if err != nil {
				return err
			}
			defer cc.Close()
			cl := catalogv1.NewCatalogServiceClient(cc)
			var all []*catalogv1.PendingTool
			tok := ""
			for {
				r, err := cl.ListPendingTools(callCtx(c), &catalogv1.ListPendingToolsRequest{Server: server, PageToken: tok})
				if err != nil {
					return err
				}
				all = append(all, r.GetTools()...)
				if tok = r.GetNextPageToken(); tok == "" {
					break
				}
			}
			if *asJSON {
				return printJSON(c.OutOrStdout(), &catalogv1.ListPendingToolsResponse{Tools: all})
			}
			w := c.OutOrStdout()
			if len(all) == 0 {
				fmt.Fprintln(w, "no tools waiting for review")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSERVER\tSTATE\tDEFINITION HASH\tPINNED HASH\tCHANGES")
			for _, p := range all {
				t := p.GetTool()
				pinned := p.GetPinnedDefinitionHash()
				if pinned == "" {
					pinned = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", t.GetName(), t.GetServer(), strings.TrimPrefix(t.GetState().String(), "TOOL_STATE_"),
					t.GetDefinitionHash(), pinned, len(p.GetDiff()))
			}
			tw.Flush()
			for _, p := range all {
				fmt.Fprintf(w, "\n%s:\n", p.GetTool().GetName())
				for _, d := range p.GetDiff() {
					fmt.Fprintf(w, "  %s\n    - %s\n    + %s\n", d.GetPath(), jsonValueText(d.GetOldValue()), jsonValueText(d.GetNewValue()))
				}
			}
			fmt.Fprintln(w, "\napprove with: toolplane tools approve NAME --hash DEFINITION_HASH")
			return nil
		},
	}
	pending.Flags().StringVar(&server, "server", "", "only tools of this server")
	cmd.AddCommand(pending)
	for _, action := range []string{"approve", "reject"} {
		var hash string
		sub := &cobra.Command{
			Use:   action + " NAME --hash DEFINITION_HASH",
			Short: map[string]string{"approve": "Approve exactly the reviewed definition of a tool (it becomes callable)", "reject": "Reject exactly the reviewed definition of a tool"}[action],
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, a []string) error {
				if hash == "" {
					return fmt.Errorf("--hash: required (the DEFINITION HASH shown by `toolplane tools pending`)")
				}
				cc, err := cf.dial()
				if err != nil {
					return err
				}
				defer cc.Close()
				cl := catalogv1.NewCatalogServiceClient(cc)
				var tool *catalogv1.Tool
				var audit *catalogv1.ToolAuditRecord
				if action == "approve" {
					r, err := cl.ApproveTool(callCtx(c), &catalogv1.ApproveToolRequest{Name: a[0], DefinitionHash: hash})
					if err != nil {
						return err
					}
					tool, audit = r.GetTool(), r.GetAudit()
					if *asJSON {
						return printJSON(c.OutOrStdout(), r)
					}
				} else {
					r, err := cl.RejectTool(callCtx(c), &catalogv1.RejectToolRequest{Name: a[0], DefinitionHash: hash})
					if err != nil {
						return err
					}
					tool, audit = r.GetTool(), r.GetAudit()
					if *asJSON {
						return printJSON(c.OutOrStdout(), r)
					}
				}
				state := strings.TrimPrefix(tool.GetState().String(), "TOOL_STATE_")
				if audit == nil {
					fmt.Fprintf(c.OutOrStdout(), "%s: already %sd (state %s); nothing recorded\n", a[0], action, state)
					return nil
				}
				fmt.Fprintf(c.OutOrStdout(), "%s: %sd definition %s (previous %s), state %s, audit record %d\n",
					a[0], action, audit.GetDefinitionHash(), valueText(audit.GetPreviousHash() != "", audit.GetPreviousHash()), state, audit.GetId())
				return nil
			},
		}
		sub.Flags().StringVar(&hash, "hash", "", "the definition hash reviewed (required)")
		cmd.AddCommand(sub)
	}
}

// jsonValueText renders a diff value as compact JSON, cut at 200 bytes.
func jsonValueText(v *structpb.Value) string {
	if v == nil {
		return "(none)"
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		return "(unprintable)"
	}
	if len(b) > 200 {
		return string(b[:197]) + "..."
	}
	return string(b)
}

func valueText(ok bool, s string) string {
	if !ok {
		return "(none)"
	}
	return s
}

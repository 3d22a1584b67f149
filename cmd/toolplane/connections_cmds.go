package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// addConnectionCmds adds `servers connect|disconnect|connections` (OAuth
// connections, docs/architecture.md §10.6): a user connects a per_user
// server for themself, an admin connects a shared server.
func addConnectionCmds(cmd *cobra.Command, client func() (catalogv1.CatalogServiceClient, func(), error), asJSON *bool) {
	var discovery bool
	connect := &cobra.Command{
		Use: "connect NAME", Short: "Start the OAuth login of a server; prints the URL to open in a browser", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.ConnectServer(callCtx(c), &catalogv1.ConnectServerRequest{Name: a[0], Discovery: discovery})
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			fmt.Fprintf(c.OutOrStdout(), "Open this URL in a browser to connect %s (valid until %s):\n%s\n",
				a[0], r.GetExpiresAt().AsTime().Local().Format(time.Kitchen), r.GetAuthorizationUrl())
			return nil
		},
	}
	connect.Flags().BoolVar(&discovery, "discovery", false, "admin: authorise a per_user server's discovery connection (its tool list)")
	cmd.AddCommand(connect)
	var discoveryOff bool
	disconnect := &cobra.Command{
		Use: "disconnect NAME", Short: "Revoke and delete your OAuth tokens for a server (a shared server's: admin)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			if _, err := cl.DisconnectServer(callCtx(c), &catalogv1.DisconnectServerRequest{Name: a[0], Discovery: discoveryOff}); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "disconnected %s\n", a[0])
			return nil
		},
	}
	disconnect.Flags().BoolVar(&discoveryOff, "discovery", false, "admin: the discovery connection of a per_user server")
	cmd.AddCommand(disconnect)
	cmd.AddCommand(&cobra.Command{
		Use: "connections", Short: "List the servers that use OAuth and whether you are connected", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.ListConnections(callCtx(c), &catalogv1.ListConnectionsRequest{})
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SERVER\tSCOPE\tGRANT\tCONNECTED\tEXPIRES")
			for _, x := range r.GetConnections() {
				exp := ""
				if x.GetExpiresAt() != nil {
					exp = x.GetExpiresAt().AsTime().UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", x.GetServer(), shortScope(x.GetSessionScope()), x.GetGrantType(), x.GetConnected(), exp)
			}
			return tw.Flush()
		},
	})
}

func shortScope(s catalogv1.SessionScope) string {
	switch s {
	case catalogv1.SessionScope_SESSION_SCOPE_PER_USER:
		return "per_user"
	case catalogv1.SessionScope_SESSION_SCOPE_PER_THREAD:
		return "per_thread"
	}
	return "shared"
}

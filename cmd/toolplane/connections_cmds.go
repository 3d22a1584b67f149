package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// addConnectionCmds adds `servers connect|disconnect|connections` (OAuth
// connections, docs/architecture.md §10.6). By default they go through the
// runtime (ConnectMyServer, DisconnectMyServer, ListMyConnections: public, the
// caller's own per_user connections); --admin calls the catalog directly
// (an admin: a shared server's connection, or with --discovery a per_user
// server's discovery connection).
func addConnectionCmds(cmd *cobra.Command, cf *clientFlags, client func() (catalogv1.CatalogServiceClient, func(), error), asJSON *bool) {
	var discovery, admin bool
	connect := &cobra.Command{
		Use: "connect NAME", Short: "Start the OAuth login of a server; prints the URL to open in a browser", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			var url string
			var expires time.Time
			var out proto.Message
			if admin || discovery {
				cl, done, err := client()
				if err != nil {
					return err
				}
				defer done()
				r, err := cl.ConnectServer(callCtx(c), &catalogv1.ConnectServerRequest{Name: a[0], Discovery: discovery})
				if err != nil {
					return err
				}
				url, expires, out = r.GetAuthorizationUrl(), r.GetExpiresAt().AsTime(), r
			} else {
				cl, done, err := runtimeClient(cf)
				if err != nil {
					return err
				}
				defer done()
				r, err := cl.ConnectMyServer(callCtx(c), &runtimev1.ConnectMyServerRequest{Name: a[0]})
				if err != nil {
					return err
				}
				url, expires, out = r.GetAuthorizationUrl(), r.GetExpiresAt().AsTime(), r
			}
			if *asJSON {
				return printJSON(c.OutOrStdout(), out)
			}
			fmt.Fprintf(c.OutOrStdout(), "Open this URL in a browser to connect %s (valid until %s):\n%s\n",
				a[0], expires.UTC().Format(time.RFC3339), url)
			return nil
		},
	}
	connect.Flags().BoolVar(&admin, "admin", false, "admin: connect a shared server (calls the catalog directly)")
	connect.Flags().BoolVar(&discovery, "discovery", false, "admin: authorise a per_user server's discovery connection (its tool list)")
	cmd.AddCommand(connect)
	var discoveryOff, adminOff bool
	disconnect := &cobra.Command{
		Use: "disconnect NAME", Short: "Revoke and delete your OAuth tokens for a server (--admin: a shared server's)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			if adminOff || discoveryOff {
				cl, done, err := client()
				if err != nil {
					return err
				}
				defer done()
				if _, err := cl.DisconnectServer(callCtx(c), &catalogv1.DisconnectServerRequest{Name: a[0], Discovery: discoveryOff}); err != nil {
					return err
				}
			} else {
				cl, done, err := runtimeClient(cf)
				if err != nil {
					return err
				}
				defer done()
				if _, err := cl.DisconnectMyServer(callCtx(c), &runtimev1.DisconnectMyServerRequest{Name: a[0]}); err != nil {
					return err
				}
			}
			fmt.Fprintf(c.OutOrStdout(), "disconnected %s\n", a[0])
			return nil
		},
	}
	disconnect.Flags().BoolVar(&adminOff, "admin", false, "admin: a shared server's connection (calls the catalog directly)")
	disconnect.Flags().BoolVar(&discoveryOff, "discovery", false, "admin: the discovery connection of a per_user server")
	cmd.AddCommand(disconnect)
	var adminList bool
	list := &cobra.Command{
		Use: "connections", Short: "List the servers that use OAuth and whether you are connected", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var conns []*catalogv1.Connection
			var out proto.Message
			if adminList {
				cl, done, err := client()
				if err != nil {
					return err
				}
				defer done()
				r, err := cl.ListConnections(callCtx(c), &catalogv1.ListConnectionsRequest{})
				if err != nil {
					return err
				}
				conns, out = r.GetConnections(), r
			} else {
				cl, done, err := runtimeClient(cf)
				if err != nil {
					return err
				}
				defer done()
				r, err := cl.ListMyConnections(callCtx(c), &runtimev1.ListMyConnectionsRequest{})
				if err != nil {
					return err
				}
				conns, out = r.GetConnections(), r
			}
			if *asJSON {
				return printJSON(c.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SERVER\tSCOPE\tGRANT\tCONNECTED\tEXPIRES")
			for _, x := range conns {
				exp := ""
				if x.GetExpiresAt() != nil {
					exp = x.GetExpiresAt().AsTime().UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", x.GetServer(), shortScope(x.GetSessionScope()), x.GetGrantType(), x.GetConnected(), exp)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&adminList, "admin", false, "admin: ask the catalog directly (your own principal's view)")
	cmd.AddCommand(list)
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

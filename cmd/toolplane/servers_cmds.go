package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// printJSON writes m as indented JSON with the proto field names, as the
// REST mirror does. protojson deliberately varies its whitespace, so the
// output is re-indented with encoding/json for a stable form.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, out.String())
	return err
}

func shortState(s catalogv1.ServerState) string {
	return strings.TrimPrefix(s.String(), "SERVER_STATE_")
}

func printServers(w io.Writer, servers []*catalogv1.Server) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tSTATE\tTOOLS\tRESTARTS\tPROTOCOL\tLAST ERROR")
	for _, s := range servers {
		c := s.GetConfig()
		errText := s.GetLastError()
		if len(errText) > 80 {
			errText = errText[:77] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", c.GetName(), strings.TrimPrefix(c.GetType().String(), "SERVER_TYPE_"),
			shortState(s.GetState()), s.GetToolCount(), s.GetRestartCount(), s.GetProtocolVersion(), strings.ReplaceAll(errText, "\n", " "))
	}
	tw.Flush()
	// Keys of extensions_config.json that Toolplane does not act on.
	var warnings []string
	for _, s := range servers {
		warnings = append(warnings, s.GetConfigWarnings()...)
	}
	if len(warnings) > 0 {
		fmt.Fprintf(w, "\nconfig warnings:\n  %s\n", strings.Join(warnings, "\n  "))
	}
}

// newServersCmd returns `toolplane servers list|get|enable|disable|reload`,
// a client of a running suite's CatalogService (ListServers, GetServer,
// UpdateServer, ReloadServers). enable/disable/reload need an admin
// credential; list/get a service or admin credential (with auth off every
// local caller is admin).
func newServersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "servers", Short: "List, inspect, enable, disable and reload MCP servers of the catalog"}
	cf := addClientFlags(cmd)
	var asJSON bool
	addOutputFlags(cmd.PersistentFlags(), &asJSON)
	client := func() (catalogv1.CatalogServiceClient, func(), error) {
		cc, err := cf.dial()
		if err != nil {
			return nil, nil, err
		}
		return catalogv1.NewCatalogServiceClient(cc), func() { cc.Close() }, nil
	}
	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List servers in config-file order (secrets masked)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.ListServers(callCtx(c), &catalogv1.ListServersRequest{})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			printServers(c.OutOrStdout(), r.GetServers())
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "get NAME", Short: "Show one server with its configuration (secrets masked)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.GetServer(callCtx(c), &catalogv1.GetServerRequest{Name: a[0]})
			if err != nil {
				return err
			}
			return printJSON(c.OutOrStdout(), r.GetServer())
		},
	})
	for _, enable := range []bool{true, false} {
		use, short := "enable NAME", "Enable a server (persisted to extensions_config.json; admin)"
		if !enable {
			use, short = "disable NAME", "Disable a server (persisted to extensions_config.json; admin)"
		}
		cmd.AddCommand(&cobra.Command{
			Use: use, Short: short, Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, a []string) error {
				cl, done, err := client()
				if err != nil {
					return err
				}
				defer done()
				v := enable
				r, err := cl.UpdateServer(callCtx(c), &catalogv1.UpdateServerRequest{Name: a[0], Server: &catalogv1.ServerUpdate{Enabled: &v}})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(c.OutOrStdout(), r)
				}
				printServers(c.OutOrStdout(), []*catalogv1.Server{r.GetServer()})
				return nil
			},
		})
	}
	cmd.AddCommand(&cobra.Command{
		Use: "reload", Short: "Re-read extensions_config.json now (admin); unchanged servers keep their sessions", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.ReloadServers(callCtx(c), &catalogv1.ReloadServersRequest{})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			fmt.Fprintf(c.OutOrStdout(), "restarted: %s\nunchanged: %s\n", strings.Join(r.GetRestarted(), ", "), strings.Join(r.GetUnchanged(), ", "))
			printServers(c.OutOrStdout(), r.GetServers())
			return nil
		},
	})
	addConnectionCmds(cmd, cf, client, &asJSON)
	return cmd
}

package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimemcp"
)

func init() {
	extraCommands = append(extraCommands, newMCPCmd)
}

// newMCPCmd is `toolplane mcp`: the runtime's MCP front door over stdio, a
// thin client of a running suite (it never opens a data directory). The
// process is one MCP session and so one runtime thread, owned by the
// principal of --token / $TOOLPLANE_TOKEN.
func newMCPCmd() *cobra.Command {
	var runtimeAddr, agent string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the runtime's MCP front door over stdio (a client of a running suite)",
		Long: `Serve MCP over stdin/stdout for an MCP client (an IDE, the inspector):
tools/list shows what the runtime binds for this session's thread (tool_search,
the non-deferred and the promoted tools) and tools/call runs through the
runtime's tool-call chain. Logs go to stderr.

Example (Claude Desktop / any stdio MCP client):
  toolplane mcp --runtime-addr 127.0.0.1:7420 --token "$TOKEN" --agent coder`,
		Args: cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cf.noProgress = true // stderr is the MCP client's log, not a progress display
	cmd.Flags().StringVar(&runtimeAddr, "runtime-addr", "", "gRPC address of the runtime (HOST:PORT; overrides --grpc-addr)")
	cmd.Flags().StringVar(&agent, "agent", "", "agent profile of the session's thread (default: the runtime's default agent)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if runtimeAddr != "" {
			cf.addr = runtimeAddr
		}
		conn, err := cf.dial()
		if err != nil {
			return err
		}
		defer conn.Close()
		log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		ctx, stop := signal.NotifyContext(callCtx(cmd), os.Interrupt, syscall.SIGTERM)
		defer stop()
		s := runtimemcp.New(runtimev1.NewRuntimeServiceClient(conn), runtimemcp.Options{Agent: agent, Logger: log, Catalog: catalogv1.NewCatalogServiceClient(conn),
			Authz: authzv1.NewAuthzServiceClient(conn)})
		defer s.Close()
		return s.ServeStdio(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
	}
	return cmd
}

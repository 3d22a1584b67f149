package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/services/runtime/runtimechain"
)

func init() { extraCommands = append(extraCommands, newDebugCmd) }

// newDebugCmd is `toolplane debug`: read-only views of how this binary is
// put together, for operators.
func newDebugCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "debug", Short: "Show how this binary is put together (read-only)"}
	cmd.AddCommand(&cobra.Command{
		Use:   "chain",
		Short: "Print the runtime's tool-call chain in force, outer → inner, one step per line",
		Long: "Print the steps every tool call runs through (ExecuteToolCall, ExecuteToolCallStream, the agent loop and the MCP front door), " +
			"outermost first, each with a one-line description. The list is the one the runtime builds at start (runtimechain.Standard); " +
			"see docs/decisions/0010-tool-call-chain.md.",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), runtimechain.Standard(runtimechain.Deps{}).Describe())
			return err
		},
	})
	return cmd
}

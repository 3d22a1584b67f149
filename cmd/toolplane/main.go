// Command toolplane is the one Toolplane binary: `serve` runs any subset of
// the four services (all-in-one by default), `healthcheck` probes a running
// suite, and client sub-commands talk to a running suite over gRPC.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/version"
)

// exitError carries a process exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "toolplane",
		Short: "Toolplane — the capability plane for LLM agents (catalog, authz, skills, runtime)",
		Long: "Toolplane — the capability plane for LLM agents (catalog, authz, skills, runtime).\n\n" +
			"`toolplane serve` runs the suite; the client commands talk to a running suite and share\n" +
			"--grpc-addr, --token (default $TOOLPLANE_TOKEN), --tls, --tls-ca, --tls-server-name and\n" +
			"-o table|json (--json), written before or after the sub-command.",
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Cobra runs only the nearest PersistentPreRunE: a sub-command that
		// defines its own must call checkUnusedGlobals itself.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return checkUnusedGlobals(cmd) },
	}
	root.SetVersionTemplate("toolplane {{.Version}}\n") // same line as `toolplane version`
	// A usage error (unknown flag, bad flag value) is a configuration error: exit 2.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: 2, err: err}
	})
	addGlobalFlags(root)
	root.AddCommand(newServeCmd(), newHealthcheckCmd(), newVersionCmd())
	for _, c := range extraCommands {
		root.AddCommand(c())
	}
	strictGroups(root)
	return root
}

// strictGroups makes every command that only groups sub-commands (servers,
// tools, skills, ...) refuse an unknown sub-command like the root does:
// `toolplane servers lst` fails with exit 2 and "Did you mean this? list"
// instead of printing the help and exiting 0. Without arguments a group
// still prints its help.
func strictGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
	if c.Parent() == nil || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only for the root
		}
		if sugg := cmd.SuggestionsFor(args[0]); len(sugg) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(sugg, "\n\t")
		}
		msg += fmt.Sprintf("\n\nRun '%s --help' for the sub-commands.", cmd.CommandPath())
		return &exitError{code: 2, err: errors.New(msg)}
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// extraCommands are client sub-commands registered by other files of this
// package (servers, tools, policies, decisions, skills, eval, ...).
var extraCommands []func() *cobra.Command

// usageArgs wraps a cobra argument check so that a usage error exits 2.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &exitError{code: 2, err: err}
		}
		return nil
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "toolplane", version.String())
		},
	}
}

func main() {
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	code := 1
	var ee *exitError
	var ce *config.Error
	switch {
	case errors.As(err, &ee):
		code = ee.code
		err = ee.err
	case errors.As(err, &ce):
		code = 2
	case strings.HasPrefix(err.Error(), "unknown command"):
		code = 2 // a usage error, like an unknown flag
	}
	if st, ok := status.FromError(err); ok && st.Code() != 0 {
		fmt.Fprintf(os.Stderr, "toolplane: %s: %s\n", st.Code(), st.Message())
	} else {
		fmt.Fprintln(os.Stderr, "toolplane:", err)
	}
	os.Exit(code)
}

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
		Use:           "toolplane",
		Short:         "Toolplane — the capability plane for LLM agents (catalog, authz, skills, runtime)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A usage error (unknown flag, bad flag value) is a configuration error: exit 2.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: 2, err: err}
	})
	root.AddCommand(newServeCmd(), newHealthcheckCmd(), newVersionCmd())
	for _, c := range extraCommands {
		root.AddCommand(c())
	}
	return root
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

package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
)

func init() { extraCommands = append(extraCommands, newStorageCmd) }

func newStorageCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "storage", Short: "Move a deployment's state from sqlite to PostgreSQL"}
	var from, to string
	mig := &cobra.Command{
		Use:   "migrate --from DATA_DIR [--to DSN]",
		Short: "Copy a sqlite deployment into an empty PostgreSQL database, verified by row counts",
		Long: `Copy the state of a sqlite deployment — the <service>.db files of DATA_DIR and the
skill blobs of DATA_DIR/skills/blobs — into the PostgreSQL database of DSN, which must hold
no Toolplane data yet. The schemas are migrated first; everything is copied in one
transaction with the original ids, and committed only when every table's row count in
PostgreSQL equals the source's (printed per table). On failure nothing is written.

Stop the processes that use DATA_DIR first. --to defaults to TOOLPLANE_STORAGE_DSN, which
keeps the password out of the process list. Then start the processes with storage.dsn set.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if from == "" {
				return &exitError{code: 2, err: errors.New("--from: the data directory to copy is required")}
			}
			dsn := to
			if dsn == "" {
				dsn = os.Getenv("TOOLPLANE_STORAGE_DSN")
			}
			if dsn == "" {
				return &exitError{code: 2, err: errors.New("--to: the target DSN is required (or TOOLPLANE_STORAGE_DSN)")}
			}
			counts, err := app.CopyToPostgres(c.Context(), from, dsn)
			if err != nil {
				var ce *config.Error
				if errors.As(err, &ce) {
					return err
				}
				return &exitError{code: 1, err: fmt.Errorf("storage migrate: %w (nothing was written)", err)}
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TABLE\tSQLITE\tPOSTGRESQL")
			for _, n := range counts {
				fmt.Fprintf(tw, "%s\t%d\t%d\n", n.Table, n.Source, n.Target)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "copied %s into PostgreSQL; counts match\n", from)
			return nil
		},
	}
	mig.Flags().StringVar(&from, "from", "", "data directory of the sqlite deployment")
	mig.Flags().StringVar(&to, "to", "", "PostgreSQL DSN of the empty target database (default TOOLPLANE_STORAGE_DSN)")
	cmd.AddCommand(mig)
	return cmd
}

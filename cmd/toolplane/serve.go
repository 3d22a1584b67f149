package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/grpcx"
)

func newServeCmd() *cobra.Command {
	var (
		f                                          config.Flags
		ext, dataDir, grpcAddr, httpAddr, services string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the selected services (default: all four, all-in-one on sqlite)",
		Long: `Serve the selected services on one gRPC listener and one HTTP listener
(REST gateway, /healthz, /readyz, /metrics, /openapi.json).

Precedence: flags > environment (TOOLPLANE_<SECTION>_<KEY>) > --config file > defaults.
A configuration error exits 2 with one line naming the key or flag.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			if fl.Changed("data-dir") {
				f.DataDir = &dataDir
			}
			if fl.Changed("grpc-addr") {
				f.GRPCAddr = &grpcAddr
			}
			if fl.Changed("http-addr") {
				f.HTTPAddr = &httpAddr
			}
			if fl.Changed("services") {
				f.Services = &services
			}
			if fl.Changed("extensions-config") {
				f.Keys = append(f.Keys, app.ExtensionsConfigFlag(ext))
			}
			cfg, err := app.LoadConfig(f, os.Environ())
			if err != nil {
				return err
			}
			au, err := app.Prepare(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// storage.dsn: connect and migrate before listening (exit 2 on failure).
			pool, err := app.OpenStorage(ctx, cfg.Storage.DSN, cfg.Server.Services)
			if err != nil {
				return err
			}
			lis, err := app.Listen(cfg)
			if err != nil {
				if pool != nil {
					pool.Close()
				}
				return err
			}
			return app.Run(ctx, cfg, au, lis, serveOptions(app.Options{Postgres: pool}))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.ConfigFile, "config", "", "toolplane.yaml path")
	fl.StringVar(&ext, "extensions-config", "", "extensions_config.json path (MCP servers); sets catalog.extensions_config")
	fl.StringVar(&dataDir, "data-dir", "./data", "data directory (one sqlite file per service)")
	fl.StringVar(&grpcAddr, "grpc-addr", "127.0.0.1:7420", "gRPC listen address HOST:PORT")
	fl.StringVar(&httpAddr, "http-addr", "127.0.0.1:7421", "HTTP listen address HOST:PORT (REST, health, metrics)")
	fl.StringVar(&services, "services", "catalog,authz,skills,runtime", "services to run in this process")
	return cmd
}

func newHealthcheckCmd() *cobra.Command {
	var (
		addr, service, caFile, serverName string
		certFile, keyFile                 string
		useTLS                            bool
		timeout                           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the suite's gRPC health reports SERVING (for container HEALTHCHECKs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			creds := insecure.NewCredentials()
			if useTLS || caFile != "" || certFile != "" {
				tc, err := grpcx.ClientTLS(caFile, certFile, keyFile, serverName)
				if err != nil {
					return &exitError{code: 2, err: err}
				}
				creds = credentials.NewTLS(tc)
			}
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("health check of %s failed: %w", addr, err)}
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.GetStatus())
			if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return &exitError{code: 1, err: fmt.Errorf("%s is %s", addr, resp.GetStatus())}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "grpc-addr", "127.0.0.1:7420", "gRPC address of the suite")
	fl.StringVar(&service, "service", "", "fully-qualified service to check (empty = the whole process)")
	fl.BoolVar(&useTLS, "tls", false, "connect with TLS")
	fl.StringVar(&caFile, "tls-ca", "", "CA file to verify the server (implies --tls)")
	fl.StringVar(&serverName, "tls-server-name", "", "server name to verify")
	fl.StringVar(&certFile, "tls-cert", "", "client certificate for a server that requires mTLS (implies --tls)")
	fl.StringVar(&keyFile, "tls-key", "", "client key for --tls-cert")
	fl.DurationVar(&timeout, "timeout", 3*time.Second, "timeout")
	return cmd
}

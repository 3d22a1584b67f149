package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/toolplane/toolplane/internal/grpcx"
)

// clientFlags are the connection flags of every client sub-command.
type clientFlags struct {
	addr, token, caFile, serverName string
	useTLS                          bool
}

// addClientFlags adds --grpc-addr, --token (default $TOOLPLANE_TOKEN),
// --tls, --tls-ca and --tls-server-name to cmd and returns their values.
func addClientFlags(cmd *cobra.Command) *clientFlags {
	cf := &clientFlags{}
	fl := cmd.PersistentFlags()
	fl.StringVar(&cf.addr, "grpc-addr", "127.0.0.1:7420", "gRPC address of the suite")
	fl.StringVar(&cf.token, "token", "", "bearer token (default $TOOLPLANE_TOKEN)")
	fl.BoolVar(&cf.useTLS, "tls", false, "connect with TLS")
	fl.StringVar(&cf.caFile, "tls-ca", "", "CA file to verify the server (implies --tls)")
	fl.StringVar(&cf.serverName, "tls-server-name", "", "server name to verify")
	return cf
}

// dial connects to the suite with the flags' credentials.
func (cf *clientFlags) dial() (*grpc.ClientConn, error) {
	o := grpcx.DialOptions{Token: cf.token, MaxMessageBytes: 64 << 20}
	if o.Token == "" {
		o.Token = os.Getenv("TOOLPLANE_TOKEN")
	}
	if cf.useTLS || cf.caFile != "" {
		tc, err := grpcx.ClientTLS(cf.caFile, "", "", cf.serverName)
		if err != nil {
			return nil, err
		}
		o.TLS = tc
	}
	return grpcx.Dial(cf.addr, o)
}

// callCtx returns a context for one client call.
func callCtx(cmd *cobra.Command) context.Context {
	if cmd.Context() != nil {
		return cmd.Context()
	}
	return context.Background()
}

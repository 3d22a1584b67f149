package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolplane/toolplane/internal/grpcx"
)

// clientFlags are the connection flags of every client sub-command.
type clientFlags struct {
	addr, token, caFile, serverName string
	useTLS                          bool
	// noProgress turns the terminal progress line off (`toolplane mcp`,
	// whose stderr carries the MCP client's log).
	noProgress bool
}

// Connection and output flag names. The root command declares them too
// (addGlobalFlags), so they may be written before the sub-command.
var (
	clientFlagNames = []string{"grpc-addr", "token", "tls", "tls-ca", "tls-server-name"}
	outputFlagNames = []string{"output", "json"}
)

// addClientFlags adds --grpc-addr, --token (default $TOOLPLANE_TOKEN),
// --tls, --tls-ca and --tls-server-name to cmd and returns their values.
func addClientFlags(cmd *cobra.Command) *clientFlags {
	cf := &clientFlags{}
	defineClientFlags(cmd.PersistentFlags(), cf)
	return cf
}

func defineClientFlags(fl *pflag.FlagSet, cf *clientFlags) {
	fl.StringVar(&cf.addr, "grpc-addr", "127.0.0.1:7420", "gRPC address of the suite")
	fl.StringVar(&cf.token, "token", "", "bearer token (default $TOOLPLANE_TOKEN)")
	fl.BoolVar(&cf.useTLS, "tls", false, "connect with TLS")
	fl.StringVar(&cf.caFile, "tls-ca", "", "CA file to verify the server (implies --tls)")
	fl.StringVar(&cf.serverName, "tls-server-name", "", "server name to verify")
}

// outputValue is the value of -o/--output: table or json; it sets *json.
type outputValue struct{ json *bool }

func (o outputValue) String() string {
	if o.json != nil && *o.json {
		return "json"
	}
	return "table"
}

func (o outputValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "table":
		*o.json = false
	case "json":
		*o.json = true
	default:
		return fmt.Errorf("%q is not one of table, json", s)
	}
	return nil
}

func (outputValue) Type() string { return "table|json" }

// addOutputFlags adds -o/--output table|json and its alias --json to fl;
// both set *asJSON.
func addOutputFlags(fl *pflag.FlagSet, asJSON *bool) {
	fl.VarP(outputValue{asJSON}, "output", "o", "output format: table or json")
	fl.BoolVar(asJSON, "json", false, "print the raw response as JSON (same as -o json)")
}

// addGlobalFlags declares the client and output flags on the root command,
// so that `toolplane --token T -o json servers list` parses like
// `toolplane servers list --token T -o json`. A sub-command's own flags of
// the same name take the value (cobra parses with the executing command's
// flags, where they shadow the root's); a root declaration that receives a
// value therefore belongs to a command that has no such flag, which
// checkUnusedGlobals refuses instead of ignoring it.
func addGlobalFlags(root *cobra.Command) {
	var cf clientFlags
	var asJSON bool
	defineClientFlags(root.PersistentFlags(), &cf)
	addOutputFlags(root.PersistentFlags(), &asJSON)
	// Hidden: the help of each client command lists its own declarations;
	// `serve --help` or `config --help` must not offer flags they refuse.
	for _, n := range append(append([]string(nil), clientFlagNames...), outputFlagNames...) {
		root.PersistentFlags().Lookup(n).Hidden = true
	}
}

// checkUnusedGlobals fails with a usage error when a root-level client or
// output flag was given to a command that does not take it (e.g. `serve --token`).
func checkUnusedGlobals(cmd *cobra.Command) error {
	root := cmd.Root()
	for _, name := range append(append([]string(nil), clientFlagNames...), outputFlagNames...) {
		f := root.PersistentFlags().Lookup(name)
		if f != nil && f.Changed && cmd.Flags().Lookup(name) == f {
			return &exitError{code: 2, err: fmt.Errorf("--%s: not a flag of %q (it applies to client commands such as `toolplane servers list`)", name, cmd.CommandPath())}
		}
	}
	return nil
}

// dial connects to the suite with the flags' credentials. Calls report a
// missing or refused token naming --token and TOOLPLANE_TOKEN, and show
// progress on a terminal while a call takes long (progress.go).
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
	hint := authHint(o.Token != "")
	o.Extra = append(o.Extra,
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			stop := func() {}
			if !cf.noProgress {
				stop = startProgress(method)
			}
			err := invoker(ctx, method, req, reply, cc, opts...)
			stop()
			return hint(err)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, hint(err)
			}
			return hintStream{s, hint}, nil
		}),
	)
	return grpcx.Dial(cf.addr, o)
}

// authHint returns an error mapper that adds to an UNAUTHENTICATED status
// how to give a token (the token itself is never shown).
func authHint(haveToken bool) func(error) error {
	return func(err error) error {
		st, ok := status.FromError(err)
		if !ok || st.Code() != codes.Unauthenticated {
			return err
		}
		msg := st.Message() + "; no token was sent: pass --token TOKEN or set TOOLPLANE_TOKEN"
		if haveToken {
			msg = st.Message() + "; the token from --token / TOOLPLANE_TOKEN was refused"
		}
		p := st.Proto()
		p.Message = msg
		return status.FromProto(p).Err()
	}
}

type hintStream struct {
	grpc.ClientStream
	hint func(error) error
}

func (h hintStream) RecvMsg(m any) error { return h.hint(h.ClientStream.RecvMsg(m)) }

// callCtx returns a context for one client call.
func callCtx(cmd *cobra.Command) context.Context {
	if cmd.Context() != nil {
		return cmd.Context()
	}
	return context.Background()
}

package grpcx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // the client-side health checker of DialOptions.HealthService
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
)

// tracePropagator is the propagation of every upstream connection: W3C trace
// context and baggage, set here rather than taken from the global so that a
// process that never installed one still propagates.
var tracePropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// WithOutgoingRequestID returns ctx whose outgoing metadata carries the
// request id of ctx (the one the server chain took from x-request-id or made
// up), unless the caller already set one: an upstream call of a handler logs
// under the id of the request that caused it.
func WithOutgoingRequestID(ctx context.Context) context.Context {
	id := RequestID(ctx)
	if id == "" {
		return ctx
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(RequestIDHeader)) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, RequestIDHeader, id)
}

func unaryRequestID(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(WithOutgoingRequestID(ctx), method, req, reply, cc, opts...)
}

func streamRequestID(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(WithOutgoingRequestID(ctx), desc, cc, method, opts...)
}

// ServerTLS loads the TLS config of a listener: certificate and key, and when
// clientCA is set, required and verified client certificates (mTLS).
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientTLS builds a client TLS config: caFile verifies the server (system
// roots when empty), certFile/keyFile present a client certificate (mTLS).
func ClientTLS(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}

// bearer sends a bearer token on every RPC.
type bearer struct {
	token string
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return false }

// DialOptions configure a client connection to a Toolplane service.
type DialOptions struct {
	// TLS, when non-nil, secures the connection.
	TLS *tls.Config
	// Token, when non-empty, is sent as `authorization: Bearer <token>`.
	Token string
	// MaxMessageBytes bounds sent and received messages.
	MaxMessageBytes int
	// HealthService, when set, turns on client-side health checking: every
	// address of the target is watched through grpc.health.v1 Watch for
	// this service, and calls are balanced only over the addresses
	// reporting SERVING (a replica that was just restarted and is not
	// ready yet, e.g. a catalog whose MCP servers are still connecting
	// under catalog.ready_requires, gets no calls;
	// docs/decisions/0083-client-side-load-balancing.md).
	HealthService string
	// Extra options appended last.
	Extra []grpc.DialOption
}

// Dial creates a lazy client connection (it does not block; the first RPC
// or a health check connects). Every call carries the request id of its
// context (RequestIDHeader, see WithOutgoingRequestID) and the W3C trace
// context (traceparent, tracestate, baggage) through OpenTelemetry, so that
// one request keeps one id and one trace across services, in one process
// and split.
func Dial(target string, o DialOptions) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithPropagators(tracePropagator))),
		grpc.WithChainUnaryInterceptor(unaryRequestID),
		grpc.WithChainStreamInterceptor(streamRequestID),
		// Reconnect within seconds once a restarted upstream is back (the
		// default backoff grows to 120 s, so readiness would lag minutes).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(o.TLS)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: o.Token}))
	}
	if o.MaxMessageBytes > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.MaxMessageBytes), grpc.MaxCallSendMsgSize(o.MaxMessageBytes)))
	}
	// Client-side load balancing (docs/decisions/0083-client-side-load-balancing.md):
	// over every address the target resolves to — a `dns:///name` (a
	// Kubernetes headless Service: one address per pod, re-resolved when
	// connections fail) or a comma-separated list — round-robin, and calls
	// with a placement key on the replica owning it (placement.go,
	// docs/decisions/0086-session-placement.md). With HealthService set,
	// only replicas reporting it SERVING take calls
	// (docs/decisions/0170-health-checked-upstream-balancing.md).
	sc := `{"loadBalancingConfig":[{"` + PlacementPolicy + `":{}}]`
	if o.HealthService != "" {
		sc += fmt.Sprintf(`,"healthCheckConfig":{"serviceName":%q}`, o.HealthService)
	}
	opts = append(opts, grpc.WithDefaultServiceConfig(sc+`}`))
	if strings.Contains(target, ",") {
		r, authority, err := listResolver(target)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithResolvers(r), grpc.WithAuthority(authority))
		target = r.Scheme() + ":///list"
	}
	opts = append(opts, o.Extra...)
	return grpc.NewClient(target, opts...)
}

// listScheme numbers the resolvers of address lists (one per connection).
var listScheme atomic.Int64

// listResolver returns a resolver holding the addresses of a
// comma-separated list ("host:port,host:port"), and the authority of the
// connection (the first address's host: the TLS server name, so every
// address of a list must present a certificate for it).
func listResolver(target string) (*manual.Resolver, string, error) {
	var addrs []resolver.Address
	authority := ""
	for _, a := range strings.Split(target, ",") {
		a = strings.TrimSpace(a)
		host, _, err := net.SplitHostPort(a)
		if a == "" || err != nil || strings.Contains(a, "://") {
			return nil, "", fmt.Errorf("address list %q: %q is not host:port", target, a)
		}
		if authority == "" {
			authority = host
		}
		addrs = append(addrs, resolver.Address{Addr: a})
	}
	r := manual.NewBuilderWithScheme(fmt.Sprintf("toolplane-list-%d", listScheme.Add(1)))
	r.InitialState(resolver.State{Addresses: addrs})
	return r, authority, nil
}

// WithPrincipal adds the structured acting-for metadata naming p
// (auth.PrincipalHeader, the serialized Principal; docs/architecture.md §5).
func WithPrincipal(ctx context.Context, p *typev1.Principal) context.Context {
	return metadata.AppendToOutgoingContext(ctx, auth.PrincipalHeader, string(auth.EncodePrincipal(p)))
}

// WithActingFor adds the v0.1.x acting-for metadata (a value rendered by
// auth.FormatActingFor); WithPrincipal replaces it.
func WithActingFor(ctx context.Context, value string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, auth.ActingForHeader, value)
}

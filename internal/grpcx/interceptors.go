// Package grpcx holds the gRPC plumbing shared by every service: the one
// interceptor chain (recovery → request id + logging → metrics →
// authentication → RPC-class check → rate limit → validation → handler,
// docs/architecture.md §5),
// server and client construction with TLS and message limits, and the
// upstream dialer with per-RPC credentials.
package grpcx

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/observability"
)

// RequestIDHeader is the metadata key (and HTTP header) carrying the request id.
const RequestIDHeader = "x-request-id"

// Policy answers, per full method name, the RPC class and the request
// validation of the service that owns it.
type Policy interface {
	// Class returns the access class of a method; ClassUnknown fails closed.
	Class(fullMethod string) auth.Class
	// Validate checks a request; a non-nil error is returned to the caller as is.
	Validate(fullMethod string, req any) error
}

// ChainOptions configure the interceptor chain.
type ChainOptions struct {
	Logger        *slog.Logger
	Metrics       *grpcprom.ServerMetrics
	Authenticator *auth.Authenticator
	Policy        Policy
	// RateLimiter, when non-nil, limits decision and write RPCs per
	// principal after the class check (ratelimit.go).
	RateLimiter *RateLimiter
	// FailedLogins, when non-nil, records refused credentials (once per
	// window per source; auth.FailedLogins).
	FailedLogins *auth.FailedLogins
}

// RequestID returns the request id of ctx, or "".
func RequestID(ctx context.Context) string { return observability.RequestID(ctx) }

func withRequestID(ctx context.Context) (context.Context, string) {
	if id := RequestID(ctx); id != "" {
		return ctx, id // set by the recovery interceptor
	}
	// ValueFromIncomingContext reads one key without copying the whole
	// metadata map, as FromIncomingContext does on every call.
	id := ""
	if v := metadata.ValueFromIncomingContext(ctx, RequestIDHeader); len(v) > 0 && len(v[0]) <= 128 {
		id = v[0]
	}
	if id == "" {
		id = newRequestID()
	}
	return observability.WithRequestID(ctx, id), id
}

// exempt reports whether a method needs no credential: health and reflection.
func exempt(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.v1.ServerReflection/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.v1alpha.ServerReflection/")
}

// admit runs authentication and the class check, returning the context
// carrying the caller's Identity.
func admit(ctx context.Context, o ChainOptions, fullMethod string) (context.Context, error) {
	if exempt(fullMethod) {
		return ctx, nil
	}
	id, err := o.Authenticator.Authenticate(ctx)
	if err != nil {
		return ctx, err
	}
	ctx = auth.WithIdentity(ctx, id)
	switch class := o.Policy.Class(fullMethod); class {
	case auth.ClassPublic, auth.ClassNone:
	case auth.ClassService:
		if !id.Service() {
			return ctx, auth.Error(codes.PermissionDenied, auth.ReasonServiceRequired, fullMethod+" needs a service or admin credential")
		}
	case auth.ClassAdmin:
		if !id.Admin() {
			return ctx, auth.Error(codes.PermissionDenied, auth.ReasonAdminRequired, fullMethod+" needs the admin role")
		}
	case auth.ClassGlobalAdmin:
		if !id.Admin() || !id.GlobalAdmin {
			return ctx, auth.Error(codes.PermissionDenied, auth.ReasonAdminRequired, fullMethod+" changes a resource every tenant shares: it needs a global admin (the admin role in a tenant of auth.global_admin_tenants)")
		}
	default:
		return ctx, auth.Error(codes.PermissionDenied, auth.ReasonNoRPCClass, fullMethod+" has no access class (refused)")
	}
	if err := o.RateLimiter.Allow(ctx, fullMethod); err != nil {
		return ctx, err
	}
	return ctx, nil
}

func recovered(log *slog.Logger, ctx context.Context, method string, p any) error {
	log.ErrorContext(ctx, "panic in handler", "method", method, "panic", fmt.Sprint(p), "request_id", RequestID(ctx), "stack", string(debug.Stack()))
	return Status(codes.Internal, ErrorDomain(method), ReasonInternal, nil, internalMessage(RequestID(ctx))).Err()
}

func logDone(log *slog.Logger, ctx context.Context, method string, start time.Time, err error) {
	code := status.Code(err)
	lvl := slog.LevelDebug
	if code == codes.Internal || code == codes.Unknown || code == codes.DataLoss {
		lvl = slog.LevelError
	}
	if !log.Enabled(ctx, lvl) {
		return // the per-RPC line is debug level: build no attributes off it
	}
	attrs := []any{"method", method, "code", code.String(), "duration_ms", float64(time.Since(start).Microseconds()) / 1000, "request_id", RequestID(ctx)}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		attrs = append(attrs, "trace_id", sc.TraceID().String())
	}
	if err != nil {
		attrs = append(attrs, "error", status.Convert(err).Message())
	}
	log.Log(ctx, lvl, "rpc", attrs...)
}

// ServerOptions returns the server options carrying the whole chain.
func ServerOptions(o ChainOptions) []grpc.ServerOption {
	log := o.Logger
	unary := []grpc.UnaryServerInterceptor{
		// recovery
		func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			ctx, _ = withRequestID(ctx) // so that a panic's answer names the id
			defer func() {
				if p := recover(); p != nil {
					err = recovered(log, ctx, info.FullMethod, p)
				}
			}()
			return h(ctx, req)
		},
		// request id + logging
		func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, id := withRequestID(ctx)
			_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, id))
			start := time.Now()
			resp, err := h(ctx, req)
			if !exempt(info.FullMethod) {
				err = guard(log, ctx, info.FullMethod, err)
			}
			err = observability.Secrets.MaskError(err) // no secret leaves in an error text
			logDone(log, ctx, info.FullMethod, start, err)
			return resp, err
		},
		o.Metrics.UnaryServerInterceptor(),
		// authentication + class check
		func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := admit(ctx, o, info.FullMethod)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		},
		// validation
		func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if !exempt(info.FullMethod) {
				if err := o.Policy.Validate(info.FullMethod, req); err != nil {
					return nil, err
				}
			}
			return h(ctx, req)
		},
	}
	stream := []grpc.StreamServerInterceptor{
		func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			ctx, _ := withRequestID(ss.Context())
			defer func() {
				if p := recover(); p != nil {
					err = recovered(log, ctx, info.FullMethod, p)
				}
			}()
			return h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
		},
		func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, id := withRequestID(ss.Context())
			_ = ss.SetHeader(metadata.Pairs(RequestIDHeader, id))
			start := time.Now()
			err := h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
			if !exempt(info.FullMethod) {
				err = guard(log, ctx, info.FullMethod, err)
			}
			err = observability.Secrets.MaskError(err)
			logDone(log, ctx, info.FullMethod, start, err)
			return err
		},
		o.Metrics.StreamServerInterceptor(),
		func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := admit(ss.Context(), o, info.FullMethod)
			if err != nil {
				return err
			}
			return h(srv, &validatingStream{ServerStream: ss, ctx: ctx, method: info.FullMethod, policy: o.Policy})
		},
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...), grpc.InTapHandle(credentialTap(o)),
		grpc.NumStreamWorkers(streamWorkers())}
}

// streamWorkers is the number of goroutines kept to serve RPCs
// (grpc.NumStreamWorkers). Without them grpc-go starts a goroutine per RPC
// whose stack grows through the interceptor chain and the handler on every
// call (runtime.newstack/copystack were 8-10% of the process's CPU under
// the bench/e2e load, docs/performance.md); a kept worker keeps its grown
// stack. An RPC that finds every worker busy still gets its own goroutine,
// so the count bounds nothing.
func streamWorkers() uint32 { return uint32(max(16, 8*runtime.GOMAXPROCS(0))) }

// EndWatchesOn returns a server option that ends every running Watch*
// server stream (subscriptions without an end by contract: WatchCatalog,
// WatchPolicy) once stop is done, answering UNAVAILABLE so that clients
// reconnect elsewhere; a graceful stop would otherwise wait for them until
// its deadline. Other streams (CallToolStream, RunTurn, ...) drain normally.
func EndWatchesOn(stop context.Context) grpc.ServerOption {
	return grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		i := strings.LastIndexByte(info.FullMethod, '/')
		if i < 0 || !strings.HasPrefix(info.FullMethod[i+1:], "Watch") {
			return h(srv, ss)
		}
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		unregister := context.AfterFunc(stop, cancel)
		defer unregister()
		err := h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
		if stop.Err() != nil && ss.Context().Err() == nil {
			return status.Error(codes.Unavailable, "server shutting down: reconnect")
		}
		return err
	})
}

// credentialTap refuses, before the request message is read, a call that
// carries no valid credential: grpc-go decodes the request before any
// interceptor runs, so without it a malformed body would answer INTERNAL
// instead of UNAUTHENTICATED (docs/architecture.md §5, "also with a malformed body"). Only
// UNAUTHENTICATED is decided here; the interceptor chain authenticates
// again and does everything else (acting-for, class check), and also logs
// and counts the calls that pass this tap; a call refused here is logged at
// debug level but not counted in the per-RPC metrics.
func credentialTap(o ChainOptions) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !o.Authenticator.Enabled() || exempt(info.FullMethodName) {
			return ctx, nil
		}
		md := metadata.MD{}
		if v := info.Header.Get("authorization"); len(v) > 0 {
			md.Set("authorization", v...)
		}
		id, err := o.Authenticator.Credential(metadata.NewIncomingContext(ctx, md))
		if err == nil {
			// The interceptor chain reuses this identity instead of
			// verifying the same credential again.
			return auth.WithVerifiedCredential(ctx, id), nil
		}
		if status.Code(err) == codes.Unauthenticated {
			if len(md.Get("authorization")) > 0 {
				if source, ok := loginSource(ctx); ok {
					o.FailedLogins.Note("grpc", source, info.FullMethodName, status.Convert(err).Message())
				}
			}
			if o.Logger != nil {
				o.Logger.DebugContext(ctx, "rpc", "method", info.FullMethodName, "code", codes.Unauthenticated.String(), "error", status.Convert(err).Message(), "stage", "before decoding")
			}
			return ctx, err
		}
		return ctx, nil
	}
}

// loginSource names where a refused credential came from: the peer's host
// on the public listener (the port dropped: one client, one source). On the
// in-process listener ok is false: the REST gateway has already refused and
// recorded a bad credential itself (gateway.RequireCredential), and a
// forwarded-for header is never trusted for it.
func loginSource(ctx context.Context) (source string, ok bool) {
	p, found := peer.FromContext(ctx)
	if !found || p.Addr == nil {
		return "unknown", true
	}
	if p.Addr.Network() == "bufconn" {
		return "", false
	}
	source = p.Addr.String()
	if host, _, err := net.SplitHostPort(source); err == nil {
		source = host
	}
	return source, true
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// validatingStream validates every received message (server-streaming RPCs
// receive exactly one) before the handler sees it.
type validatingStream struct {
	grpc.ServerStream
	ctx    context.Context
	method string
	policy Policy
}

func (s *validatingStream) Context() context.Context { return s.ctx }

func (s *validatingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if exempt(s.method) {
		return nil
	}
	return s.policy.Validate(s.method, m)
}

package grpcx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/observability"
)

// openPolicy admits every method and validates nothing.
type openPolicy struct{}

func (openPolicy) Class(string) auth.Class    { return auth.ClassPublic }
func (openPolicy) Validate(string, any) error { return nil }

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log records written so far.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// testService answers UnaryCall and StreamingOutputCall with fn's error.
type testService struct {
	testpb.UnimplementedTestServiceServer
	fn func(ctx context.Context) error
}

func (s *testService) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if err := s.fn(ctx); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{}, nil
}

func (s *testService) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, ss grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	return s.fn(ss.Context())
}

// serve runs svc behind the whole interceptor chain (and the OTel server
// handler, as internal/app installs it) on a loopback listener, logging JSON
// at debug level into the returned buffer.
func serve(t *testing.T, svc testpb.TestServiceServer) (string, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	au, err := auth.NewAuthenticator(auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithPropagators(tracePropagator)))},
		ServerOptions(ChainOptions{Logger: log, Metrics: grpcprom.NewServerMetrics(), Authenticator: au, Policy: openPolicy{}})...)
	gs := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(gs, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String(), logs
}

func client(t *testing.T, addr string) testpb.TestServiceClient {
	t.Helper()
	cc, err := Dial(addr, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei
		}
	}
	return nil
}

func badRequest(st *status.Status) *errdetails.BadRequest {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			return br
		}
	}
	return nil
}

const driverText = "sqlite3: disk I/O error: open /var/lib/toolplane/runtime.db-wal: read-only file system"

// TestErrorSafetyNet: whatever a handler returns, the caller gets a status
// with an ErrorInfo and never the internal text, and the log keeps the
// cause under the request id (unary and server-streaming alike).
func TestErrorSafetyNet(t *testing.T) {
	var fn func(context.Context) error
	var mu sync.Mutex
	addr, logs := serve(t, &testService{fn: func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return fn(ctx)
	}})
	c := client(t, addr)
	cases := []struct {
		name       string
		err        error
		code       codes.Code
		reason     string
		msg        string // exact message; "" = do not check
		msgHas     string // substring of the message
		field      string // BadRequest field; "" = no BadRequest
		causeInLog bool
	}{
		{name: "plain error", err: errors.New(driverText), code: codes.Internal, reason: ReasonInternal, msgHas: "internal error (request id ", causeInLog: true},
		{name: "wrapped plain error", err: fmt.Errorf("runtime store: %w", errors.New(driverText)), code: codes.Internal, reason: ReasonInternal, msgHas: "internal error (request id ", causeInLog: true},
		{name: "INTERNAL without ErrorInfo", err: status.Errorf(codes.Internal, "workspace: %s", driverText), code: codes.Internal, reason: ReasonInternal, msgHas: "internal error (request id ", causeInLog: true},
		{name: "UNKNOWN status", err: status.Error(codes.Unknown, driverText), code: codes.Internal, reason: ReasonInternal, msgHas: "internal error (request id ", causeInLog: true},
		{name: "Internal() with cause", err: Internal("toolplane.dev", ReasonInternal, errors.New(driverText)), code: codes.Internal, reason: ReasonInternal, msgHas: "internal error (request id ", causeInLog: true},
		{name: "WithCause keeps its status", err: WithCause(Status(codes.Unavailable, "x.toolplane.dev", "ERROR_REASON_STORE_UNAVAILABLE", nil, "the store is unavailable"), errors.New(driverText)),
			code: codes.Unavailable, reason: "ERROR_REASON_STORE_UNAVAILABLE", msg: "the store is unavailable", causeInLog: true},
		{name: "wrapped WithCause", err: fmt.Errorf("list: %w", WithCause(Status(codes.Unavailable, "x.toolplane.dev", "ERROR_REASON_STORE_UNAVAILABLE", nil, "the store is unavailable"), errors.New(driverText))),
			code: codes.Unavailable, reason: "ERROR_REASON_STORE_UNAVAILABLE", msg: "list: the store is unavailable", causeInLog: true},
		{name: "status with ErrorInfo passes", err: Status(codes.NotFound, "x.toolplane.dev", "ERROR_REASON_THREAD_NOT_FOUND", nil, `thread "t1" not found`).Err(),
			code: codes.NotFound, reason: "ERROR_REASON_THREAD_NOT_FOUND", msg: `thread "t1" not found`},
		{name: "INVALID_ARGUMENT naming a field", err: status.Error(codes.InvalidArgument, "tool_call.name: longer than 256 characters"),
			code: codes.InvalidArgument, reason: ReasonInvalidRequest, msg: "tool_call.name: longer than 256 characters", field: "tool_call.name"},
		{name: "INVALID_ARGUMENT with ErrorInfo gets a BadRequest", err: Status(codes.InvalidArgument, "x.toolplane.dev", "ERROR_REASON_INVALID_QUERY", map[string]string{"field": "query"}, "query: regex too long").Err(),
			code: codes.InvalidArgument, reason: "ERROR_REASON_INVALID_QUERY", msg: "query: regex too long", field: "query"},
		{name: "INVALID_ARGUMENT naming no field", err: status.Error(codes.InvalidArgument, "nothing to do"), code: codes.InvalidArgument, reason: ReasonInvalidRequest, msg: "nothing to do"},
		{name: "Invalid", err: Invalid("x.toolplane.dev", "ERROR_REASON_INVALID_REQUEST", Violation{Field: "servers[2].name", Reason: ViolationRequired, Description: "required"}),
			code: codes.InvalidArgument, reason: "ERROR_REASON_INVALID_REQUEST", msg: "servers[2].name: required", field: "servers[2].name"},
		{name: "other code keeps code and message", err: status.Error(codes.FailedPrecondition, "a run is active"), code: codes.FailedPrecondition, reason: ReasonUnspecified, msg: "a run is active"},
		{name: "context cancelled", err: context.Canceled, code: codes.Canceled, reason: ReasonUnspecified},
		{name: "context deadline", err: fmt.Errorf("store: %w", context.DeadlineExceeded), code: codes.DeadlineExceeded, reason: ReasonUnspecified},
	}
	for i, tc := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				mu.Lock()
				fn = func(context.Context) error { return tc.err }
				mu.Unlock()
				id := fmt.Sprintf("req-%d-%v", i, stream)
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), RequestIDHeader, id), 10*time.Second)
				defer cancel()
				var err error
				if stream {
					var s grpc.ServerStreamingClient[testpb.StreamingOutputCallResponse]
					if s, err = c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{}); err == nil {
						_, err = s.Recv()
					}
				} else {
					_, err = c.UnaryCall(ctx, &testpb.SimpleRequest{})
				}
				st := status.Convert(err)
				if st.Code() != tc.code {
					t.Fatalf("code %v (%q), want %v", st.Code(), st.Message(), tc.code)
				}
				ei := errorInfo(st)
				if ei == nil || ei.GetReason() != tc.reason || ei.GetDomain() == "" {
					t.Fatalf("ErrorInfo %v, want reason %s", ei, tc.reason)
				}
				if tc.msg != "" && st.Message() != tc.msg {
					t.Errorf("message %q, want %q", st.Message(), tc.msg)
				}
				if tc.msgHas != "" && !strings.Contains(st.Message(), tc.msgHas+id+")") {
					t.Errorf("message %q, want it to carry %q", st.Message(), tc.msgHas+id+")")
				}
				if strings.Contains(st.Message(), "sqlite") || strings.Contains(st.Message(), "/var/lib") {
					t.Errorf("message leaks internal text: %q", st.Message())
				}
				br := badRequest(st)
				switch {
				case tc.field == "" && br != nil:
					t.Errorf("unexpected BadRequest %v", br)
				case tc.field != "" && (br == nil || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != tc.field || br.GetFieldViolations()[0].GetReason() == ""):
					t.Errorf("BadRequest %v, want one violation of %s with a reason", br, tc.field)
				}
				if !tc.causeInLog {
					return
				}
				found := false
				for _, l := range logs.lines(t) {
					if l["msg"] == "rpc error cause" && l["request_id"] == id && strings.Contains(fmt.Sprint(l["cause"]), driverText) {
						found = true
					}
				}
				if !found {
					t.Errorf("no log line with the cause under request id %s", id)
				}
			})
		}
	}
}

// TestPanicIsInternalWithErrorInfo: a handler panic answers INTERNAL with
// the request id and an ErrorInfo.
func TestPanicIsInternalWithErrorInfo(t *testing.T) {
	addr, _ := serve(t, &testService{fn: func(context.Context) error { panic("boom /etc/secret") }})
	ctx := metadata.AppendToOutgoingContext(context.Background(), RequestIDHeader, "panic-1")
	_, err := client(t, addr).UnaryCall(ctx, &testpb.SimpleRequest{})
	st := status.Convert(err)
	if st.Code() != codes.Internal || st.Message() != "internal error (request id panic-1)" || errorInfo(st).GetReason() != ReasonInternal {
		t.Fatalf("got %v %q %v", st.Code(), st.Message(), errorInfo(st))
	}
}

func TestErrorDomain(t *testing.T) {
	for in, want := range map[string]string{
		"/toolplane.catalog.v1.CatalogService/GetTool": "catalog.toolplane.dev",
		"/toolplane.runtime.v1.RuntimeService/X":       "runtime.toolplane.dev",
		"/grpc.testing.TestService/UnaryCall":          "toolplane.dev",
		"bogus":                                        "toolplane.dev",
	} {
		if got := ErrorDomain(in); got != want {
			t.Errorf("ErrorDomain(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSplitField(t *testing.T) {
	for _, tc := range []struct{ in, field, desc string }{
		{"tool_call.name: longer than 256", "tool_call.name", "longer than 256"},
		{`metadata["k"]: too long`, `metadata["k"]`, "too long"},
		{"servers[2].env.x: required", "servers[2].env.x", "required"},
		{"invalid SKILL.md frontmatter: name: bad", "", "invalid SKILL.md frontmatter: name: bad"},
		{"no field here", "", "no field here"},
		{"Upper: no", "", "Upper: no"},
	} {
		f, d := SplitField(tc.in)
		if f != tc.field || d != tc.desc {
			t.Errorf("SplitField(%q) = %q, %q; want %q, %q", tc.in, f, d, tc.field, tc.desc)
		}
	}
}

// TestUpstreamCarriesRequestIDAndTrace: a handler's call to an upstream
// through Dial carries the request id of the incoming call and its W3C
// trace context, unary and streaming; the upstream's log lines carry that id.
func TestUpstreamCarriesRequestIDAndTrace(t *testing.T) {
	type seen struct{ id, traceID string }
	got := make(chan seen, 4)
	upAddr, upLogs := serve(t, &testService{fn: func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		s := seen{traceID: trace.SpanContextFromContext(ctx).TraceID().String()}
		if v := md.Get(RequestIDHeader); len(v) == 1 {
			s.id = v[0]
		}
		if RequestID(ctx) != s.id {
			s.id = "chain saw " + RequestID(ctx)
		}
		got <- s
		return nil
	}})
	up := client(t, upAddr)
	frontAddr, _ := serve(t, &testService{fn: func(ctx context.Context) error {
		if _, err := up.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
			return err
		}
		s, err := up.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
		if err != nil {
			return err
		}
		if _, err := s.Recv(); !errors.Is(err, io.EOF) {
			return fmt.Errorf("upstream stream: %v, want EOF", err)
		}
		return nil
	}})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := metadata.AppendToOutgoingContext(context.Background(),
		RequestIDHeader, "req-upstream-1",
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := client(t, frontAddr).UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"unary", "stream"} {
		s := <-got
		if s.id != "req-upstream-1" {
			t.Errorf("%s upstream call: request id %q, want req-upstream-1", kind, s.id)
		}
		if s.traceID != traceID {
			t.Errorf("%s upstream call: trace id %q, want %s", kind, s.traceID, traceID)
		}
	}
	n := 0
	for _, l := range upLogs.lines(t) {
		if l["msg"] == "rpc" {
			n++
			if l["request_id"] != "req-upstream-1" || l["trace_id"] != traceID {
				t.Errorf("upstream log line %v lacks the request id or the trace id", l)
			}
		}
	}
	if n != 2 {
		t.Errorf("upstream logged %d rpc lines, want 2", n)
	}
}

// TestOutgoingRequestIDKeepsCallerChoice: an id the caller set on the
// outgoing context wins over the incoming one.
func TestOutgoingRequestIDKeepsCallerChoice(t *testing.T) {
	ctx := observability.WithRequestID(context.Background(), "incoming")
	md, _ := metadata.FromOutgoingContext(WithOutgoingRequestID(ctx))
	if v := md.Get(RequestIDHeader); len(v) != 1 || v[0] != "incoming" {
		t.Fatalf("got %v", v)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, RequestIDHeader, "explicit")
	md, _ = metadata.FromOutgoingContext(WithOutgoingRequestID(ctx))
	if v := md.Get(RequestIDHeader); len(v) != 1 || v[0] != "explicit" {
		t.Fatalf("got %v", v)
	}
	if md, ok := metadata.FromOutgoingContext(WithOutgoingRequestID(context.Background())); ok && len(md.Get(RequestIDHeader)) > 0 {
		t.Fatalf("an id appeared from nowhere: %v", md)
	}
}

//go:build e2e

// This file is compiled only with `-tags e2e` (the end-to-end tests build
// the binary that way, see internal/testkit). It adds a test-only gRPC
// service, toolplane.testonly.v1.SleepService, written by hand with
// well-known types only (no .proto file), so that the tests can hold a call
// in flight across SIGTERM and see which Principal reaches a handler.

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	gwruntime "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/svckit"
)

func init() {
	prev := serveOptions
	serveOptions = func(o app.Options) app.Options {
		o = prev(o)
		o.ExtraServices = append(o.ExtraServices, testOnlyService{})
		return o
	}
}

// Test-only service and method names.
const (
	testOnlyServiceName = "toolplane.testonly.v1.SleepService"
	testOnlySleep       = "/" + testOnlyServiceName + "/Sleep"
	testOnlyWhoAmI      = "/" + testOnlyServiceName + "/WhoAmI"
	testOnlyPanic       = "/" + testOnlyServiceName + "/Panic"
	// testOnlyWhoAmIRoute is the REST route of WhoAmI on the gateway mux.
	testOnlyWhoAmIRoute = "/v1/testonly/whoami"
	// testOnlyMaxSleep bounds Sleep's duration (validation).
	testOnlyMaxSleep = 30 * time.Second
)

// testOnlyService implements svckit.Service. Methods (all class public):
//   - Sleep(google.protobuf.Duration) → google.protobuf.Empty: writes the line
//     "testonly: sleep started" to stderr, then sleeps for the duration
//     (0 < d <= 30s, else INVALID_ARGUMENT naming "duration"), or returns the
//     context's error when the call is cancelled.
//   - WhoAmI(google.protobuf.Empty) → google.protobuf.Struct: the effective
//     principal ({subject, tenant, roles, attributes}) plus the caller's own
//     credential ({caller_subject, caller_kind}); also GET /v1/testonly/whoami.
//   - Panic(google.protobuf.Empty) → google.protobuf.Empty: panics (recovery).
type testOnlyService struct{}

var _ svckit.Service = testOnlyService{}

func (testOnlyService) Name() string     { return "testonly" }
func (testOnlyService) FullName() string { return testOnlyServiceName }

func (s testOnlyService) Register(r grpc.ServiceRegistrar) {
	r.RegisterService(&grpc.ServiceDesc{
		ServiceName: testOnlyServiceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Sleep", Handler: unaryHandler(testOnlySleep, func() any { return &durationpb.Duration{} }, sleep)},
			{MethodName: "WhoAmI", Handler: unaryHandler(testOnlyWhoAmI, func() any { return &emptypb.Empty{} }, whoAmI)},
			{MethodName: "Panic", Handler: unaryHandler(testOnlyPanic, func() any { return &emptypb.Empty{} }, func(context.Context, any) (any, error) {
				panic("testonly: deliberate panic")
			})},
		},
		Metadata: "testonly_e2e.go",
	}, s)
}

// unaryHandler adapts a plain function to grpc.MethodDesc's handler shape.
func unaryHandler(full string, newReq func() any, fn func(context.Context, any) (any, error)) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		in := newReq()
		if err := dec(in); err != nil {
			return nil, err
		}
		if ic == nil {
			return fn(ctx, in)
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: full}, func(ctx context.Context, req any) (any, error) {
			return fn(ctx, req)
		})
	}
}

func sleep(ctx context.Context, req any) (any, error) {
	d := req.(*durationpb.Duration).AsDuration()
	fmt.Fprintln(os.Stderr, "testonly: sleep started")
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return &emptypb.Empty{}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func whoAmI(ctx context.Context, _ any) (any, error) {
	p := auth.EffectivePrincipal(ctx)
	if p == nil {
		return nil, status.Error(codes.Internal, "testonly: no principal in context")
	}
	roles := make([]any, 0, len(p.GetRoles()))
	for _, r := range p.GetRoles() {
		roles = append(roles, r)
	}
	attrs := map[string]any{}
	for k, v := range p.GetAttributes() {
		attrs[k] = v
	}
	m := map[string]any{"subject": p.GetSubject(), "tenant": p.GetTenant(), "roles": roles, "attributes": attrs}
	if id, ok := auth.Caller(ctx); ok {
		m["caller_subject"] = id.Principal.GetSubject()
		m["caller_kind"] = string(id.Kind)
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "testonly: %v", err)
	}
	return st, nil
}

// RegisterGateway adds GET /v1/testonly/whoami, forwarded like a generated
// grpc-gateway handler (the mux's header matchers decide what becomes
// outgoing metadata, so the Authorization and acting-for headers travel as
// they do for every real route).
func (testOnlyService) RegisterGateway(_ context.Context, mux *gwruntime.ServeMux, conn *grpc.ClientConn) error {
	return mux.HandlePath(http.MethodGet, testOnlyWhoAmIRoute, func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		_, outbound := gwruntime.MarshalerForRequest(mux, r)
		ctx, err := gwruntime.AnnotateContext(r.Context(), mux, r, testOnlyWhoAmI, gwruntime.WithHTTPPathPattern(testOnlyWhoAmIRoute))
		if err != nil {
			gwruntime.HTTPError(r.Context(), mux, outbound, w, r, err)
			return
		}
		var (
			out structpb.Struct
			md  gwruntime.ServerMetadata
		)
		err = conn.Invoke(ctx, testOnlyWhoAmI, &emptypb.Empty{}, &out, grpc.Header(&md.HeaderMD), grpc.Trailer(&md.TrailerMD))
		ctx = gwruntime.NewServerMetadataContext(ctx, md)
		if err != nil {
			gwruntime.HTTPError(ctx, mux, outbound, w, r, err)
			return
		}
		gwruntime.ForwardResponseMessage(ctx, mux, outbound, w, r, &out)
	})
}

func (testOnlyService) Classes() map[string]auth.Class {
	return map[string]auth.Class{
		testOnlySleep:  auth.ClassPublic,
		testOnlyWhoAmI: auth.ClassPublic,
		testOnlyPanic:  auth.ClassPublic,
	}
}

func (testOnlyService) Validate(fullMethod string, req any) error {
	if fullMethod != testOnlySleep {
		return nil
	}
	d, ok := req.(*durationpb.Duration)
	if !ok {
		return status.Errorf(codes.InvalidArgument, "duration: want google.protobuf.Duration, got %T", req)
	}
	if err := d.CheckValid(); err != nil {
		return status.Errorf(codes.InvalidArgument, "duration: %v", err)
	}
	if v := d.AsDuration(); v <= 0 || v > testOnlyMaxSleep {
		return status.Errorf(codes.InvalidArgument, "duration: must be in (0, %s], got %s", testOnlyMaxSleep, v)
	}
	return nil
}

func (testOnlyService) Ready(context.Context) error { return nil }
func (testOnlyService) Close() error                { return nil }

package grpcx

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
)

func TestRateLimiter(t *testing.T) {
	l := NewRateLimiter([]RoleRate{
		{Role: "default", DecisionsPerSecond: 1, DecisionsBurst: 2, WritesPerSecond: 1, WritesBurst: 1},
		{Role: "admin", DecisionsPerSecond: 10, DecisionsBurst: 5, WritesPerSecond: 1, WritesBurst: 1},
	})
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	as := func(kind auth.Kind, subject string, roles ...string) context.Context {
		return auth.WithIdentity(context.Background(), auth.Identity{Kind: kind, Principal: &typev1.Principal{Subject: subject, Tenant: "t", Roles: roles}})
	}
	const exec = "/toolplane.runtime.v1.RuntimeService/ExecuteToolCall"
	alice := as(auth.KindUser, "alice", "user")
	for i := range 2 {
		if err := l.Allow(alice, exec); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	err := l.Allow(alice, exec)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third call: %v, want RESOURCE_EXHAUSTED", err)
	}
	ei, _ := ErrorDetails(err)
	var ri *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			ri = r
		}
	}
	if ei.GetReason() != ReasonRateLimited || ei.GetMetadata()["limit"] != "server.rate_limits[role=default].decisions_per_second" || ri == nil || ri.GetRetryDelay().AsDuration() <= 0 || ri.GetRetryDelay().AsDuration() > time.Second {
		t.Fatalf("details %v %v", ei, ri)
	}
	// A refused call takes no token: after the retry delay one call passes.
	now = now.Add(ri.GetRetryDelay().AsDuration())
	if err := l.Allow(alice, exec); err != nil {
		t.Fatalf("after the retry delay: %v", err)
	}
	// Buckets are per principal and per kind; reads, service credentials
	// and the most generous role are as documented.
	if err := l.Allow(as(auth.KindUser, "bob", "user"), exec); err != nil {
		t.Errorf("bob shares alice's bucket: %v", err)
	}
	if err := l.Allow(alice, "/toolplane.runtime.v1.RuntimeService/CreateThread"); err != nil {
		t.Errorf("writes share the decision bucket: %v", err)
	}
	for range 10 {
		if err := l.Allow(alice, "/toolplane.runtime.v1.RuntimeService/ListThreads"); err != nil {
			t.Fatalf("a read was limited: %v", err)
		}
		if err := l.Allow(as(auth.KindService, "svc", "service"), exec); err != nil {
			t.Fatalf("a service credential was limited: %v", err)
		}
	}
	root := as(auth.KindUser, "root", "user", "admin")
	for i := range 5 {
		if err := l.Allow(root, exec); err != nil {
			t.Fatalf("admin call %d: %v", i, err)
		}
	}
	if err := l.Allow(root, exec); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("admin past its burst: %v", err)
	}
	if NewRateLimiter(nil).Allow(alice, exec) != nil {
		t.Fatal("no limits configured but limited")
	}
}

// An upload stages bytes on disk: UploadThreadFile is a write RPC for the
// per-principal limiter (the stream interceptor's admit applies it).
func TestUploadThreadFileIsAWrite(t *testing.T) {
	if k := RateKindOf("/toolplane.runtime.v1.RuntimeService/UploadThreadFile"); k != RateWrite {
		t.Fatalf("UploadThreadFile rate kind %d, want RateWrite", k)
	}
}

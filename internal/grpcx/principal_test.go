package grpcx

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
)

type publicPolicy struct{}

func (publicPolicy) Class(string) auth.Class    { return auth.ClassPublic }
func (publicPolicy) Validate(string, any) error { return nil }

// echoPrincipal answers EmptyCall and records the effective principal the
// interceptor chain derived.
type echoPrincipal struct {
	testgrpc.UnimplementedTestServiceServer
	mu   sync.Mutex
	last *typev1.Principal
}

func (e *echoPrincipal) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	e.mu.Lock()
	e.last = auth.EffectivePrincipal(ctx)
	e.mu.Unlock()
	return &testgrpc.Empty{}, nil
}

func (e *echoPrincipal) take() *typev1.Principal {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.last
	e.last = nil
	return p
}

// principalServer serves the shared chain on 127.0.0.1 with a service
// token "svc" and a user token "user"; the clients dial with each.
func principalServer(t testing.TB) (svc, user testgrpc.TestServiceClient, rec *echoPrincipal) {
	t.Helper()
	a, err := auth.NewAuthenticator(auth.Options{Enabled: true, Tokens: []auth.TokenSpec{
		{Name: "svc", SHA256: auth.HashToken("svc"), Kind: auth.KindService, Principal: &typev1.Principal{Subject: "svc:runtime", Tenant: "default", Roles: []string{"service"}}},
		{Name: "user", SHA256: auth.HashToken("user"), Kind: auth.KindUser, Principal: &typev1.Principal{Subject: "bob", Tenant: "default", Roles: []string{"user"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(ServerOptions(ChainOptions{Logger: slog.New(slog.DiscardHandler), Metrics: grpcprom.NewServerMetrics(), Authenticator: a, Policy: publicPolicy{}})...)
	rec = &echoPrincipal{}
	testgrpc.RegisterTestServiceServer(gs, rec)
	go func() { _ = gs.Serve(lis) }()
	dial := func(tok string) testgrpc.TestServiceClient {
		conn, err := Dial(lis.Addr().String(), DialOptions{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return testgrpc.NewTestServiceClient(conn)
	}
	t.Cleanup(gs.Stop)
	return dial("svc"), dial("user"), rec
}

func wantTenant(p *typev1.Principal) *typev1.Principal {
	c := proto.Clone(p).(*typev1.Principal)
	if c.Tenant == "" {
		c.Tenant = "default"
	}
	return c
}

// FuzzPrincipalRoundTrip: any principal a credential can carry — subject,
// tenant, roles and attributes holding ; = , / newlines or non-ASCII —
// arrives at the service exactly as the runtime sent it, over a real gRPC
// connection (docs/architecture.md §5).
func FuzzPrincipalRoundTrip(f *testing.F) {
	svc, _, rec := principalServer(f)
	for _, s := range [][6]string{
		{"alice", "default", "user", "viewer", "agent", "coder"},
		{"alice;roles=admin", "acme", "user", "", "k", "v"},
		{"a/b", "t/1", "r,s", "x=y", "attr.k", "a=b;c=d"},
		{"ünïcødé 用户", "テナント", "rôle", "\n", "key\r\n", "val\x00ue"},
		{"x\ny", "", "admin;", "=", ";attr.admin=1", ","},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, subject, tenant, r1, r2, ak, av string) {
		for _, v := range []string{subject, tenant, r1, r2, ak, av} {
			if !utf8.ValidString(v) {
				t.Skip("protobuf strings are UTF-8")
			}
		}
		if subject == "" || len(subject) > 256 || len(tenant) > 256 {
			t.Skip("outside the accepted bounds (refused, tested elsewhere)")
		}
		p := &typev1.Principal{Subject: subject, Tenant: tenant, Roles: []string{r1, r2}, Attributes: map[string]string{ak: av}}
		if _, err := svc.EmptyCall(WithPrincipal(context.Background(), p), &testgrpc.Empty{}); err != nil {
			t.Fatalf("call: %v", err)
		}
		if got := rec.take(); !proto.Equal(got, wantTenant(p)) {
			t.Fatalf("principal changed in transit:\n sent %v\n got  %v", p, got)
		}
	})
}

// Hostile acting-for metadata: refused (PERMISSION_DENIED with its reason)
// before the handler runs, or, for the structured form, kept verbatim.
func TestActingForHostileCases(t *testing.T) {
	svc, user, rec := principalServer(t)
	bin := func(p *typev1.Principal) []string {
		return []string{auth.PrincipalHeader, string(auth.EncodePrincipal(p))}
	}
	cases := []struct {
		name   string
		client testgrpc.TestServiceClient
		md     []string
		reason string // "" = served
		want   *typev1.Principal
	}{
		{"structured principal with delimiters in every value", svc, bin(&typev1.Principal{Subject: "alice;roles=admin", Tenant: "a/b", Roles: []string{"user,admin"}, Attributes: map[string]string{"k": "a=b"}}), "",
			&typev1.Principal{Subject: "alice;roles=admin", Tenant: "a/b", Roles: []string{"user,admin"}, Attributes: map[string]string{"k": "a=b"}}},
		{"structured principal from a user credential", user, bin(&typev1.Principal{Subject: "root", Roles: []string{"admin"}}), auth.ReasonActingForForbidden, nil},
		{"legacy acting-for from a user credential", user, []string{auth.ActingForHeader, "default/root;roles=admin"}, auth.ReasonActingForForbidden, nil},
		{"structured principal that is not a Principal", svc, []string{auth.PrincipalHeader, "\xff\xff\xff"}, auth.ReasonActingForMalformed, nil},
		{"structured principal without subject", svc, bin(&typev1.Principal{Tenant: "x", Roles: []string{"admin"}}), auth.ReasonActingForMalformed, nil},
		{"structured principal over the size bound", svc, bin(&typev1.Principal{Subject: strings.Repeat("a", 300)}), auth.ReasonActingForMalformed, nil},
		{"both forms at once", svc, append(bin(&typev1.Principal{Subject: "alice"}), auth.ActingForHeader, "default/root;roles=admin"), auth.ReasonActingForMalformed, nil},
		{"two structured principals", svc, append(bin(&typev1.Principal{Subject: "alice"}), bin(&typev1.Principal{Subject: "root"})...), auth.ReasonActingForMalformed, nil},
		{"legacy: '=' inside an attribute value", svc, []string{auth.ActingForHeader, "default/alice;attr.k=a=b"}, auth.ReasonActingForMalformed, nil},
		{"legacy: '/' inside the subject", svc, []string{auth.ActingForHeader, "default/alice/admin"}, auth.ReasonActingForMalformed, nil},
		{"legacy: '=' inside the subject", svc, []string{auth.ActingForHeader, "default/a=b"}, auth.ReasonActingForMalformed, nil},
		{"legacy: roles given twice", svc, []string{auth.ActingForHeader, "default/alice;roles=user;roles=admin"}, auth.ReasonActingForMalformed, nil},
		{"legacy: plain value still accepted", svc, []string{auth.ActingForHeader, "acme/alice;roles=user,viewer;attr.dept=ops"}, "",
			&typev1.Principal{Subject: "alice", Tenant: "acme", Roles: []string{"user", "viewer"}, Attributes: map[string]string{"dept": "ops"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := metadata.AppendToOutgoingContext(context.Background(), tc.md...)
			_, err := tc.client.EmptyCall(ctx, &testgrpc.Empty{})
			got := rec.take()
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !proto.Equal(got, tc.want) {
					t.Fatalf("principal %v, want %v", got, tc.want)
				}
				return
			}
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("err %v, want PERMISSION_DENIED", err)
			}
			if ei, _ := ErrorDetails(err); ei.GetReason() != tc.reason {
				t.Errorf("reason %q, want %q", ei.GetReason(), tc.reason)
			}
			if got != nil {
				t.Errorf("the handler ran for %v", got)
			}
		})
	}
}

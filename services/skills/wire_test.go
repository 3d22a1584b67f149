package skills

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/svckit"
	sat "github.com/toolplane/toolplane/services/skills/skillsarchive/skillsarchivetest"
)

type policy struct{ s *Server }

func (p policy) Class(m string) auth.Class {
	if c, ok := p.s.Classes()[m]; ok {
		return c
	}
	return auth.ClassUnknown
}
func (p policy) Validate(m string, req any) error { return p.s.Validate(m, req) }

// startWire serves the skills service on 127.0.0.1 behind the real
// interceptor chain (authentication, class check, validation) and returns a
// dialer per token.
func startWire(t *testing.T) (*Server, func(token string) skillsv1.SkillsServiceClient) {
	t.Helper()
	return startWireWith(t, Config{})
}

// startWireWith is startWire with a configuration.
func startWireWith(t *testing.T, cfg Config) (*Server, func(token string) skillsv1.SkillsServiceClient) {
	t.Helper()
	s, err := New(context.Background(), cfg, svckit.Env{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.NewAuthenticator(auth.Options{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	authn.AddToken("alice", "alice-token", auth.KindUser, &typev1.Principal{Subject: "alice", Tenant: "default", Roles: []string{"user"}})
	authn.AddToken("bob", "bob-token", auth.KindUser, &typev1.Principal{Subject: "bob", Tenant: "default", Roles: []string{"user"}})
	authn.AddToken("admin", "admin-token", auth.KindUser, &typev1.Principal{Subject: "root", Tenant: "default", Roles: []string{"admin"}})
	authn.AddToken("runtime", "runtime-token", auth.KindService, &typev1.Principal{Subject: "runtime", Tenant: "default"})
	gs := grpc.NewServer(grpcx.ServerOptions(grpcx.ChainOptions{Logger: slog.New(slog.DiscardHandler),
		Metrics: grpcprom.NewServerMetrics(), Authenticator: authn, Policy: policy{s}})...)
	s.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(func() { gs.Stop(); s.Close() })
	return s, func(token string) skillsv1.SkillsServiceClient {
		cc, err := grpcx.Dial(lis.Addr().String(), grpcx.DialOptions{Token: token, MaxMessageBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return skillsv1.NewSkillsServiceClient(cc)
	}
}

func TestOverTheWire(t *testing.T) {
	_, dial := startWire(t)
	ctx := context.Background()
	alice, bob, runtime := dial("alice-token"), dial("bob-token"), dial("runtime-token")

	// Install as alice; the ErrorInfo of a refusal survives the wire.
	if _, err := alice.InstallSkill(ctx, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{Archive: sat.Good()}}); err != nil {
		t.Fatal(err)
	}
	_, err := alice.InstallSkill(ctx, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{Archive: sat.Hostile()[0].Data}})
	if ei := wantErr(t, err, codes.InvalidArgument, skillsv1.ErrorReason_ERROR_REASON_ARCHIVE_REFUSED); ei.Metadata["code"] != "archive.path_traversal" {
		t.Fatalf("meta %v", ei.Metadata)
	}
	// Bob does not see alice's custom skill.
	_, err = bob.GetSkill(ctx, &skillsv1.GetSkillRequest{Name: "demo-skill"})
	wantErr(t, err, codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_SKILL_NOT_FOUND)
	// Validation runs before the handler.
	_, err = alice.GetSkill(ctx, &skillsv1.GetSkillRequest{Name: "../etc"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "name:") {
		t.Fatalf("validation: %v", err)
	}
	// ResolveSkillPolicy is service class.
	req := &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: []*skillsv1.ActiveSkill{{Name: "demo-skill"}}, AlwaysAvailable: []string{"read_file"}}
	if _, err := alice.ResolveSkillPolicy(ctx, req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("user called a service RPC: %v", err)
	}
	// The runtime acting for alice resolves alice's skill; acting for bob, it fails closed.
	forAlice := grpcx.WithActingFor(ctx, auth.FormatActingFor(&typev1.Principal{Subject: "alice", Tenant: "default"}))
	r, err := runtime.ResolveSkillPolicy(forAlice, req)
	if err != nil || !r.GetPolicy().GetUnrestricted() {
		t.Fatalf("alice policy: %v %+v", err, r.GetPolicy())
	}
	forBob := grpcx.WithActingFor(ctx, auth.FormatActingFor(&typev1.Principal{Subject: "bob", Tenant: "default"}))
	r, err = runtime.ResolveSkillPolicy(forBob, req)
	if err != nil || r.GetPolicy().GetUnrestricted() || strings.Join(r.GetPolicy().GetAllowedTools(), ",") != "read_file" {
		t.Fatalf("bob policy: %v %+v", err, r.GetPolicy())
	}
	// A user credential cannot act for someone else.
	if _, err := alice.ListSkills(forBob, &skillsv1.ListSkillsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("acting-for from a user credential: %v", err)
	}
	// No credential.
	if _, err := dial("").ListSkills(ctx, &skillsv1.ListSkillsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("anonymous: %v", err)
	}
}

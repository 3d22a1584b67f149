package authz

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/svckit"
)

const (
	tokSvc   = "svc-token"
	tokUser  = "user-token"
	tokAdmin = "admin-token"
	tokBob   = "bob-token"
	tokVera  = "vera-token"
	tokAcme  = "acme-admin-token"
)

var (
	alice = &typev1.Principal{Subject: "alice", Tenant: "default", Roles: []string{"user"}, Attributes: map[string]string{"team": "web"}}
	bob   = &typev1.Principal{Subject: "bob", Tenant: "acme", Roles: []string{"user"}}
	vera  = &typev1.Principal{Subject: "vera", Tenant: "default", Roles: []string{"viewer"}}
)

type policyTable struct{ s *Server }

func (p policyTable) Class(m string) auth.Class {
	if c, ok := p.s.Classes()[m]; ok {
		return c
	}
	return auth.ClassUnknown
}
func (p policyTable) Validate(m string, req any) error { return p.s.Validate(m, req) }

type harness struct {
	t     *testing.T
	srv   *Server
	dir   string
	addr  string
	rest  string
	svc   authzv1.AuthzServiceClient
	user  authzv1.AuthzServiceClient
	admin authzv1.AuthzServiceClient
	bob   authzv1.AuthzServiceClient
	vera  authzv1.AuthzServiceClient // a user credential of role viewer
	acme  authzv1.AuthzServiceClient // an admin of tenant acme: a tenant admin
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// start runs the service on a real loopback gRPC listener with the shared
// interceptor chain (authentication, class check, validation) and the REST
// gateway on a loopback HTTP server.
func start(t *testing.T, mut func(*Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	return startIn(t, dir, mut)
}

func startIn(t *testing.T, dir string, mut func(*Config)) *harness {
	t.Helper()
	return startEnv(t, svckit.Env{DataDir: dir, Logger: quietLogger()}, mut)
}

// startEnv is startIn with a given environment (a PostgreSQL pool).
func startEnv(t *testing.T, env svckit.Env, mut func(*Config)) *harness {
	t.Helper()
	dir := env.DataDir
	cfg := Config{ReloadInterval: 50 * time.Millisecond}
	if mut != nil {
		mut(&cfg)
	}
	srv, err := New(context.Background(), cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := auth.NewAuthenticator(auth.Options{Enabled: true})
	a.AddToken("svc", tokSvc, auth.KindService, &typev1.Principal{Subject: "runtime", Tenant: "default", Roles: []string{"service"}})
	a.AddToken("user", tokUser, auth.KindUser, alice)
	a.AddToken("bob", tokBob, auth.KindUser, bob)
	a.AddToken("vera", tokVera, auth.KindUser, vera)
	a.AddToken("acme-admin", tokAcme, auth.KindUser, &typev1.Principal{Subject: "ann", Tenant: "acme", Roles: []string{"admin"}})
	a.AddToken("admin", tokAdmin, auth.KindUser, &typev1.Principal{Subject: "root", Tenant: "default", Roles: []string{"admin"}})
	opts := grpcx.ServerOptions(grpcx.ChainOptions{Logger: quietLogger(), Metrics: grpcprom.NewServerMetrics(), Authenticator: a, Policy: policyTable{srv}})
	gs := grpc.NewServer(opts...)
	srv.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	h := &harness{t: t, srv: srv, dir: dir, addr: lis.Addr().String()}
	dial := func(tok string) authzv1.AuthzServiceClient {
		cc, err := grpcx.Dial(h.addr, grpcx.DialOptions{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return authzv1.NewAuthzServiceClient(cc)
	}
	h.svc, h.user, h.admin, h.bob, h.vera = dial(tokSvc), dial(tokUser), dial(tokAdmin), dial(tokBob), dial(tokVera)
	h.acme = dial(tokAcme)
	// REST gateway forwarding to the gRPC listener (the caller's bearer token is forwarded).
	gwConn, err := grpcx.Dial(h.addr, grpcx.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mux := gateway.NewMux()
	if err := srv.RegisterGateway(context.Background(), mux, gwConn); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mux)
	h.rest = hs.URL
	t.Cleanup(func() {
		hs.Close()
		gwConn.Close()
		gs.Stop()
		srv.Close()
	})
	return h
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(interface{ GetReason() string }); ok {
			return ei.GetReason()
		}
	}
	return ""
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// restCall posts JSON to the REST mirror and returns the status and body.
func (h *harness) restCall(method, path, token string, body any) (int, map[string]any) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.rest+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (h *harness) authorize(c authzv1.AuthzServiceClient, req *authzv1.AuthorizeRequest) *authzv1.Decision {
	h.t.Helper()
	resp, err := c.Authorize(ctxT(h.t), req)
	if err != nil {
		h.t.Fatalf("Authorize: %v", err)
	}
	return resp.GetDecision()
}

func toolCall(p *typev1.Principal, target string) *authzv1.AuthorizeRequest {
	return &authzv1.AuthorizeRequest{Principal: p, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Action: authzv1.Action_ACTION_CALL, Target: target}
}

func codeOf(err error) codes.Code { return status.Code(err) }

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/internal/testkit"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// fixture is the path of the built tests/fixtures/mcp/tpfixture binary.
var fixture string

func TestMain(m *testing.M) {
	switch os.Getenv("TP_CATALOG_HELPER") {
	case "1":
		runCatalogHelper()
		return
	case "mem":
		runMemHelper()
		return
	}
	dir, err := os.MkdirTemp("", "tpfixture")
	if err != nil {
		panic(err)
	}
	fixture = filepath.Join(dir, "tpfixture")
	out, err := exec.Command("go", "build", "-o", fixture, "github.com/toolplane/toolplane/tests/fixtures/mcp/tpfixture").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build fixture: %v\n%s", err, out)
		os.Exit(1)
	}
	catalogmcp.BackoffInitial = 300 * time.Millisecond
	catalogmcp.AuthorizedPoll = 300 * time.Millisecond
	code := pgtest.Main(m) // m.Run, then stops the PostgreSQL cluster if a test started one
	os.RemoveAll(dir)
	os.Exit(code)
}

// moduleRoot finds the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("module root not found")
		}
		dir = parent
	}
}

// npmJS returns an installed npm MCP server's entry point; missing: fail
// under CI=true, skip otherwise.
func npmJS(t testing.TB, name string) string {
	t.Helper()
	return testkit.NPMServer(t, name)
}

const (
	tokSvc   = "svc-token"
	tokUser  = "user-token"
	tokAdmin = "admin-token"
	// tokAcmeAdmin and tokBetaAdmin are tenant admins (not in
	// auth.global_admin_tenants); tokAcmeUser a user of tenant acme.
	tokAcmeAdmin = "acme-admin-token"
	tokBetaAdmin = "beta-admin-token"
	tokAcmeUser  = "acme-user-token"
)

type policy struct{ s *Server }

func (p policy) Class(m string) auth.Class {
	if c, ok := p.s.Classes()[m]; ok {
		return c
	}
	return auth.ClassUnknown
}
func (p policy) Validate(m string, req any) error { return p.s.Validate(m, req) }

type harness struct {
	t     testing.TB
	srv   *Server
	path  string
	svc   catalogv1.CatalogServiceClient
	user  catalogv1.CatalogServiceClient
	admin catalogv1.CatalogServiceClient
	// acmeAdmin, betaAdmin: tenant admins; acmeUser: a user of tenant acme.
	acmeAdmin, betaAdmin, acmeUser catalogv1.CatalogServiceClient
	closed                         bool
	// gs serves the catalog at addr.
	gs   *grpc.Server
	addr string
}

// start runs the catalog over a real loopback gRPC server with the shared
// interceptor chain (authentication, class check, validation).
func start(t testing.TB, ext string, mut func(*Config, *svckit.Env)) *harness {
	t.Helper()
	return startDir(t, t.TempDir(), ext, mut)
}

// startDir is start with the data directory (and extensions_config.json)
// in dir, so a test can restart the catalog on the same catalog.db. An empty
// ext leaves the file as it is.
func startDir(t testing.TB, dir, ext string, mut func(*Config, *svckit.Env)) *harness {
	t.Helper()
	return startOn(t, nil, dir, ext, mut)
}

// startOn is startDir serving on lis (nil = a new loopback listener), for
// tests that need the address before the catalog starts.
func startOn(t testing.TB, lis net.Listener, dir, ext string, mut func(*Config, *svckit.Env)) *harness {
	t.Helper()
	path := filepath.Join(dir, "extensions_config.json")
	if ext != "" {
		if err := os.WriteFile(path, []byte(ext), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Fixture servers run by absolute path (and some by sh -c): the file's
	// command policy is off here; command_policy_test.go turns it on. The
	// sse/http fixtures listen on loopback, which the egress policy allows
	// only when configured (egress_test.go checks the default).
	cfg := Config{ExtensionsConfig: path, CloseGrace: 500 * time.Millisecond, ReloadInterval: 100 * time.Millisecond, FileCommandPolicy: "off",
		Egress: EgressConfig{Allow: []string{"127.0.0.0/8", "::1"}}}
	env := svckit.Env{DataDir: dir, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))}
	if mut != nil {
		mut(&cfg, &env)
	}
	srv, err := New(context.Background(), cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := auth.NewAuthenticator(auth.Options{Enabled: true})
	a.AddToken("svc", tokSvc, auth.KindService, &typev1.Principal{Subject: "runtime", Tenant: "default", Roles: []string{"service"}})
	a.AddToken("user", tokUser, auth.KindUser, &typev1.Principal{Subject: "alice", Tenant: "default", Roles: []string{"user"}})
	a.AddToken("admin", tokAdmin, auth.KindUser, &typev1.Principal{Subject: "root", Tenant: "default", Roles: []string{"admin"}})
	a.AddToken("acme-admin", tokAcmeAdmin, auth.KindUser, &typev1.Principal{Subject: "ann", Tenant: "acme", Roles: []string{"admin"}})
	a.AddToken("beta-admin", tokBetaAdmin, auth.KindUser, &typev1.Principal{Subject: "bob", Tenant: "beta", Roles: []string{"admin"}})
	a.AddToken("acme-user", tokAcmeUser, auth.KindUser, &typev1.Principal{Subject: "carl", Tenant: "acme", Roles: []string{"user"}})
	opts := grpcx.ServerOptions(grpcx.ChainOptions{Logger: env.Logger, Metrics: grpcprom.NewServerMetrics(), Authenticator: a, Policy: policy{srv}})
	opts = append(opts, grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20))
	gs := grpc.NewServer(opts...)
	srv.Register(gs)
	if lis == nil {
		if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	go gs.Serve(lis)
	h := &harness{t: t, srv: srv, path: path, gs: gs, addr: lis.Addr().String()}
	dial := func(tok string) catalogv1.CatalogServiceClient {
		cc, err := grpcx.Dial(lis.Addr().String(), grpcx.DialOptions{Token: tok, MaxMessageBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return catalogv1.NewCatalogServiceClient(cc)
	}
	h.svc, h.user, h.admin = dial(tokSvc), dial(tokUser), dial(tokAdmin)
	h.acmeAdmin, h.betaAdmin, h.acmeUser = dial(tokAcmeAdmin), dial(tokBetaAdmin), dial(tokAcmeUser)
	t.Cleanup(func() {
		gs.Stop()
		h.close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := srv.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) close() {
	if !h.closed {
		h.closed = true
		h.srv.Close()
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (h *harness) server(name string) *catalogv1.Server {
	h.t.Helper()
	r, err := h.svc.GetServer(ctxT(h.t), &catalogv1.GetServerRequest{Name: name})
	if err != nil {
		h.t.Fatalf("GetServer %s: %v", name, err)
	}
	return r.Server
}

// eventually polls cond every 20 ms up to d.
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

func args(t testing.TB, js string) *structpb.Struct {
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *harness) call(ctx context.Context, c catalogv1.CatalogServiceClient, name, js string) (*catalogv1.CallToolResponse, error) {
	return c.CallTool(ctx, &catalogv1.CallToolRequest{Name: name, Arguments: args(h.t, js)})
}

func textOf(r *catalogv1.CallToolResponse) string {
	var b strings.Builder
	for _, c := range r.GetContent() {
		b.WriteString(c.GetText())
	}
	return b.String()
}

func codeOf(err error) codes.Code { return status.Code(err) }

func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(interface{ GetReason() string }); ok {
			return ei.GetReason()
		}
	}
	return ""
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func killPid(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

func fixtureServer(name string, extra string) string {
	if extra != "" {
		extra = ", " + extra
	}
	return fmt.Sprintf(`%q: {"command": %q, "args": ["serve"]%s}`, name, fixture, extra)
}

func extJSON(servers ...string) string {
	return `{"mcpServers": {` + strings.Join(servers, ",\n") + `}, "skills": {"keep": true}}`
}

func netListen() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func dialOK(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }

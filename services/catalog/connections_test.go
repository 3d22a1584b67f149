package catalog

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
)

// TestConnectServerRPCs: the OAuth connection RPCs over real gRPC with the
// interceptor chain, the sealed token store and the callback route: an
// admin connects a shared server through the browser flow, per_user
// servers are per principal, machine grants and stdio servers have no
// login, a call to an unconnected server is FAILED_PRECONDITION
// ERROR_REASON_NEEDS_AUTH naming it, and Disconnect revokes.
func TestConnectServerRPCs(t *testing.T) {
	fx := oauthtest.New()
	t.Cleanup(fx.Close) // after the catalog's own cleanup (LIFO)
	var cb atomic.Pointer[http.Handler]
	cbSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*cb.Load()).ServeHTTP(w, r) }))
	t.Cleanup(cbSrv.Close)
	keyFile := filepath.Join(t.TempDir(), "oauth.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("1f", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TP_TEST_CC_SECRET", "machine-secret")
	ext := extJSON(
		fmt.Sprintf(`"docs": {"type": "http", "url": %q}`, fx.URL()),
		fmt.Sprintf(`"tracker": {"type": "http", "url": %q, "session_scope": "per_user"}`, fx.URL()),
		fmt.Sprintf(`"m2m": {"type": "http", "url": %q, "oauth": {"token_url": %q, "client_id": "machine", "client_secret": "${TP_TEST_CC_SECRET}"}}`, fx.URL(), fx.AS.URL+"/token"),
		fixtureServer("plain", ""))
	h := start(t, ext, func(c *Config, _ *svckit.Env) {
		c.OAuth = OAuthConfig{PublicURL: cbSrv.URL, KeyFile: keyFile}
	})
	route := h.srv.HTTPRoutes()["GET /oauth/callback"]
	cb.Store(&route)
	ctx := ctxT(t)

	for _, c := range []struct {
		name string
		code codes.Code
	}{{"plain", codes.FailedPrecondition}, {"m2m", codes.FailedPrecondition}, {"nope", codes.NotFound}} {
		if _, err := h.admin.ConnectServer(ctx, &catalogv1.ConnectServerRequest{Name: c.name}); codeOf(err) != c.code {
			t.Errorf("connect %s: %v, want %s", c.name, err, c.code)
		}
	}
	if _, err := h.user.ConnectServer(ctx, &catalogv1.ConnectServerRequest{Name: "docs"}); codeOf(err) != codes.PermissionDenied {
		t.Errorf("user connects a shared server: %v", err)
	}
	if _, err := h.svc.ConnectServer(ctx, &catalogv1.ConnectServerRequest{Name: "docs"}); codeOf(err) != codes.PermissionDenied {
		t.Errorf("service connects a shared server: %v", err)
	}
	// A relayed call (a service acting for a user) never reaches a shared
	// or discovery connection, even when the service's principal is an admin.
	relayed := auth.WithIdentity(ctx, auth.Identity{Kind: auth.KindService,
		Principal: &typev1.Principal{Subject: "runtime", Tenant: "default", Roles: []string{"admin"}},
		ActingFor: &typev1.Principal{Subject: "alice", Tenant: "default", Roles: []string{"admin"}}})
	for _, req := range []*catalogv1.ConnectServerRequest{{Name: "docs"}, {Name: "tracker", Discovery: true}} {
		if _, err := h.srv.ConnectServer(relayed, req); codeOf(err) != codes.PermissionDenied {
			t.Errorf("relayed connect %v: %v", req, err)
		}
	}
	if _, err := h.srv.DisconnectServer(relayed, &catalogv1.DisconnectServerRequest{Name: "docs"}); codeOf(err) != codes.PermissionDenied {
		t.Errorf("relayed disconnect of a shared server: %v", err)
	}
	if _, err := h.srv.ConnectServer(relayed, &catalogv1.ConnectServerRequest{Name: "tracker"}); err != nil {
		t.Errorf("relayed connect of the user's own per_user connection: %v", err)
	}
	// Before its first login docs has listed no tool (docs_whoami is
	// unknown); after a disconnect its tools stay listed (below).

	connect := func(cl catalogv1.CatalogServiceClient, name, user string) {
		t.Helper()
		r, err := cl.ConnectServer(ctx, &catalogv1.ConnectServerRequest{Name: name})
		if err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
		if st, body, err := oauthtest.Browse(ctx, r.GetAuthorizationUrl(), user); err != nil || st != 200 || !strings.Contains(body, name+" is connected") {
			t.Fatalf("browser for %s: %d %q %v", name, st, body, err)
		}
	}
	connect(h.admin, "docs", "root@example")
	eventually(t, 10*time.Second, "docs READY", func() bool { return h.server("docs").GetState() == catalogv1.ServerState_SERVER_STATE_READY })
	// READY is reported with the server's state; its tools reach the
	// snapshot with the rebuild that follows (moments later).
	eventually(t, 10*time.Second, "docs_whoami listed", func() bool {
		_, ok := h.srv.snap.Load().active.one["docs_whoami"]
		return ok
	})
	if r, err := h.call(ctx, h.svc, "docs_whoami", `{}`); err != nil || textOf(r) != "root@example" {
		t.Fatalf("docs after connecting: %v %v", r, err)
	}
	// per_user: the admin authorises the discovery connection (tools
	// listed), then their own connection.
	if _, err := h.user.ConnectServer(ctx, &catalogv1.ConnectServerRequest{Name: "tracker", Discovery: true}); codeOf(err) != codes.PermissionDenied {
		t.Errorf("user connects a discovery connection: %v", err)
	}
	r, err := h.admin.ConnectServer(ctx, &catalogv1.ConnectServerRequest{Name: "tracker", Discovery: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := oauthtest.Browse(ctx, r.GetAuthorizationUrl(), "discovery@example"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "tracker READY", func() bool { return h.server("tracker").GetState() == catalogv1.ServerState_SERVER_STATE_READY })
	if _, err := h.call(ctx, h.admin, "tracker_whoami", `{}`); reasonOf(err) != "ERROR_REASON_NEEDS_AUTH" {
		t.Fatalf("tracker for the admin before their own login (the discovery token must not be used): %v", err)
	}
	connect(h.admin, "tracker", "root@example")
	if r, err := h.call(ctx, h.admin, "tracker_whoami", `{}`); err != nil || textOf(r) != "root@example" {
		t.Fatalf("tracker for the admin: %v %v", r, err)
	}
	if _, err := h.call(ctx, h.svc, "tracker_whoami", `{}`); reasonOf(err) != "ERROR_REASON_NEEDS_AUTH" {
		t.Fatalf("tracker for another principal: %v", err)
	}
	conns := func(cl catalogv1.CatalogServiceClient) map[string]bool {
		r, err := cl.ListConnections(ctx, &catalogv1.ListConnectionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, c := range r.GetConnections() {
			m[c.GetServer()] = c.GetConnected()
		}
		return m
	}
	if got := conns(h.admin); len(got) != 3 || !got["docs"] || !got["tracker"] || !got["m2m"] {
		t.Fatalf("admin's connections: %v", got)
	}
	if got := conns(h.svc); !got["docs"] || got["tracker"] || !got["m2m"] {
		t.Fatalf("service's connections: %v", got)
	}
	if _, err := h.admin.DisconnectServer(ctx, &catalogv1.DisconnectServerRequest{Name: "docs"}); err != nil {
		t.Fatal(err)
	}
	if fx.Revocations.Load() == 0 {
		t.Fatal("disconnect revoked nothing")
	}
	_, err = h.call(ctx, h.svc, "docs_whoami", `{}`)
	if codeOf(err) != codes.FailedPrecondition || reasonOf(err) != "ERROR_REASON_NEEDS_AUTH" || !strings.Contains(err.Error(), "ask the user to connect docs") {
		t.Fatalf("docs after disconnecting: %v", err)
	}
}

// TestDeclaredToolsFromPath: a per_user OAuth server declaring its tools
// in a JSONL file (`path`) lists them while NEEDS_AUTH with no discovery
// connection, so they are searchable; a call is FAILED_PRECONDITION
// ERROR_REASON_NEEDS_AUTH naming the server, not UNAVAILABLE; once an
// admin authorises the discovery connection, the server's real list
// replaces the declared one.
func TestDeclaredToolsFromPath(t *testing.T) {
	fx := oauthtest.New()
	t.Cleanup(fx.Close)
	var cb atomic.Pointer[http.Handler]
	cbSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*cb.Load()).ServeHTTP(w, r) }))
	t.Cleanup(cbSrv.Close)
	jsonl := filepath.Join(t.TempDir(), "tracker.jsonl")
	rows := `{"name": "whoami", "description": "Tell which tracker account the token belongs to", "input_schema": {"type": "object"}}` + "\n" +
		`{"name": "declared_only", "description": "A tool the server does not have", "input_schema": {"type": "object"}}` + "\n"
	if err := os.WriteFile(jsonl, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, extJSON(fmt.Sprintf(`"tracker": {"type": "http", "url": %q, "session_scope": "per_user", "path": %q}`, fx.URL(), jsonl)),
		func(c *Config, _ *svckit.Env) { c.OAuth = OAuthConfig{PublicURL: cbSrv.URL} })
	route := h.srv.HTTPRoutes()["GET /oauth/callback"]
	cb.Store(&route)
	ctx := ctxT(t)
	if st := h.server("tracker").GetState(); st != catalogv1.ServerState_SERVER_STATE_NEEDS_AUTH {
		t.Fatalf("state %v", st)
	}
	sr, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "tracker account token"})
	if err != nil || len(sr.GetHits()) == 0 || sr.GetHits()[0].GetTool().GetName() != "tracker_whoami" {
		t.Fatalf("search before any login: %v %v", sr, err)
	}
	_, err = h.call(ctx, h.svc, "tracker_whoami", `{}`)
	if codeOf(err) != codes.FailedPrecondition || reasonOf(err) != "ERROR_REASON_NEEDS_AUTH" || !strings.Contains(err.Error(), "ask the user to connect tracker") {
		t.Fatalf("call before connecting: %v", err)
	}
	names := func() map[string]bool {
		lt, err := h.svc.ListTools(ctx, &catalogv1.ListToolsRequest{Server: "tracker", PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, x := range lt.GetTools() {
			m[x.GetName()] = true
		}
		return m
	}
	if got := names(); !got["tracker_declared_only"] || !got["tracker_whoami"] {
		t.Fatalf("declared list: %v", got)
	}
	r, err := h.admin.ConnectServer(ctx, &catalogv1.ConnectServerRequest{Name: "tracker", Discovery: true})
	if err != nil {
		t.Fatal(err)
	}
	if st, body, err := oauthtest.Browse(ctx, r.GetAuthorizationUrl(), "discovery@example"); err != nil || st != 200 {
		t.Fatalf("browser: %d %q %v", st, body, err)
	}
	eventually(t, 10*time.Second, "the real tool list replaces the declared one", func() bool {
		got := names()
		return got["tracker_whoami"] && !got["tracker_declared_only"]
	})
}

package runtime_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
)

// oauthSuite starts catalog + runtime (auth on, sealed token store) with a
// per_user and a shared server behind the local OAuth authorization server
// (oauthtest), the catalog's public_url pointing at the suite's HTTP
// listener (through a proxy started first, as the port is known only
// after Listen). extra adds servers' keys to the per_user server.
func oauthSuite(t *testing.T, extra map[string]any) (*suite, *oauthtest.Fixture) {
	t.Helper()
	fx := oauthtest.New()
	t.Cleanup(fx.Close) // after the suite's own cleanup (LIFO)
	var target atomic.Pointer[url.URL]
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httputil.NewSingleHostReverseProxy(target.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	dir := t.TempDir()
	tracker := map[string]any{"type": "http", "url": fx.URL(), "session_scope": "per_user"}
	for k, v := range extra {
		tracker[k] = v
	}
	ext := map[string]any{"mcpServers": map[string]any{
		"tracker": tracker,
		"docs":    map[string]any{"type": "http", "url": fx.URL()},
	}}
	t.Setenv("TP_TEST_OAUTH_KEYS", strings.Repeat("2e", 32))
	s := newSuiteWith(t, dir, ext, false, func(c *app.Config) {
		c.Catalog.Egress.Allow = []string{"127.0.0.0/8", "::1"}
		c.Catalog.OAuth.PublicURL = proxy.URL
		c.Catalog.OAuth.KeyEnv = "TP_TEST_OAUTH_KEYS"
	})
	u, _ := url.Parse("http://" + s.httpAddr)
	target.Store(u)
	return s, fx
}

// rest calls the suite's REST gateway with a bearer token.
func rest(t *testing.T, s *suite, token, method, path string, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.httpAddr+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func connected(t *testing.T, c runtimev1.RuntimeServiceClient) map[string]bool {
	t.Helper()
	r, err := c.ListMyConnections(context.Background(), &runtimev1.ListMyConnectionsRequest{})
	if err != nil {
		t.Fatalf("ListConnections: %v", err)
	}
	m := map[string]bool{}
	for _, x := range r.GetConnections() {
		m[x.GetServer()] = x.GetConnected()
	}
	return m
}

// TestConnectionsRelay: end users connect, list and disconnect their own
// OAuth connections through the runtime (gRPC and REST), two users never
// see or affect each other's, and a relayed call never reaches a shared
// server's or a discovery connection, even for an admin.
func TestConnectionsRelay(t *testing.T) {
	s, fx := oauthSuite(t, nil)
	ctx := context.Background()
	alice, bob, admin := s.rt(aliceToken), s.rt(bobToken), s.rt(adminToken)

	if got := connected(t, alice); len(got) != 2 || got["tracker"] || got["docs"] {
		t.Fatalf("alice before any login: %v", got)
	}
	// gRPC: alice connects through the browser flow.
	r, err := alice.ConnectMyServer(ctx, &runtimev1.ConnectMyServerRequest{Name: "tracker"})
	if err != nil {
		t.Fatalf("alice connect: %v", err)
	}
	if r.GetExpiresAt().AsTime().Before(time.Now().Add(5 * time.Minute)) {
		t.Errorf("expires_at %v", r.GetExpiresAt().AsTime())
	}
	if st, body, err := oauthtest.Browse(ctx, r.GetAuthorizationUrl(), "alice@example"); err != nil || st != 200 || !strings.Contains(body, "tracker is connected") {
		t.Fatalf("alice's browser: %d %q %v", st, body, err)
	}
	if got := connected(t, alice); !got["tracker"] {
		t.Fatalf("alice after login: %v", got)
	}
	if got := connected(t, bob); got["tracker"] {
		t.Fatalf("bob sees alice's connection: %v", got)
	}

	// REST: bob connects through the runtime's route.
	code, body := rest(t, s, bobToken, "POST", "/v1/me/connections/tracker:connect", `{}`)
	if code != 200 {
		t.Fatalf("REST connect: %d %s", code, body)
	}
	var cr runtimev1.ConnectMyServerResponse
	if err := protojson.Unmarshal(body, &cr); err != nil || !strings.Contains(cr.GetAuthorizationUrl(), "code_challenge_method=S256") {
		t.Fatalf("REST connect body %s: %v", body, err)
	}
	if st, page, err := oauthtest.Browse(ctx, cr.GetAuthorizationUrl(), "bob@example"); err != nil || st != 200 {
		t.Fatalf("bob's browser: %d %q %v", st, page, err)
	}
	code, body = rest(t, s, bobToken, "GET", "/v1/me/connections", "")
	var lr runtimev1.ListMyConnectionsResponse
	if err := protojson.Unmarshal(body, &lr); code != 200 || err != nil {
		t.Fatalf("REST list: %d %s %v", code, body, err)
	}
	for _, c := range lr.GetConnections() {
		if c.GetServer() == "tracker" && !c.GetConnected() {
			t.Fatalf("bob not connected after login: %s", body)
		}
	}
	if bytes.Contains(body, []byte("access")) || bytes.Contains(body, []byte("token\"")) {
		t.Fatalf("list leaks a token: %s", body)
	}

	// Alice disconnects over REST: her token is revoked, bob's stays.
	rev := fx.Revocations.Load()
	if code, body := rest(t, s, aliceToken, "POST", "/v1/me/connections/tracker:disconnect", `{}`); code != 200 {
		t.Fatalf("REST disconnect: %d %s", code, body)
	}
	if fx.Revocations.Load() == rev {
		t.Error("disconnect revoked nothing")
	}
	if got := connected(t, alice); got["tracker"] {
		t.Fatalf("alice after disconnect: %v", got)
	}
	if got := connected(t, bob); !got["tracker"] {
		t.Fatalf("alice's disconnect removed bob's connection: %v", got)
	}

	// A shared server is an admin's, and never through the relay.
	for who, c := range map[string]runtimev1.RuntimeServiceClient{"bob": bob, "admin": admin} {
		if _, err := c.ConnectMyServer(ctx, &runtimev1.ConnectMyServerRequest{Name: "docs"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s connects the shared server through the runtime: %v", who, err)
		}
		if _, err := c.DisconnectMyServer(ctx, &runtimev1.DisconnectMyServerRequest{Name: "docs"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s disconnects the shared server through the runtime: %v", who, err)
		}
	}
	unknown := func() error {
		_, err := bob.ConnectMyServer(ctx, &runtimev1.ConnectMyServerRequest{Name: "nope"})
		return err
	}()
	if status.Code(unknown) != codes.NotFound {
		t.Errorf("unknown server: %v", unknown)
	}
	// A server the user may not list is absent from the list and NOT_FOUND
	// exactly like an unknown one; its own token can still be deleted.
	s.az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_MCP_SERVER, "tracker")
	if got := connected(t, bob); len(got) != 1 || got["tracker"] {
		t.Fatalf("bob's list with tracker denied: %v", got)
	}
	_, err = bob.ConnectMyServer(ctx, &runtimev1.ConnectMyServerRequest{Name: "tracker"})
	if status.Code(err) != codes.NotFound || strings.Replace(status.Convert(err).Message(), "tracker", "nope", 1) != status.Convert(unknown).Message() {
		t.Errorf("denied server: %v (unknown: %v)", err, unknown)
	}
	if _, err := bob.DisconnectMyServer(ctx, &runtimev1.DisconnectMyServerRequest{Name: "tracker"}); err != nil {
		t.Errorf("disconnect of a denied server: %v", err)
	}
	s.az.SetDown(true)
	if _, err := bob.ListMyConnections(ctx, &runtimev1.ListMyConnectionsRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("list with authz down (fail closed): %v", err)
	}
	s.az.SetDown(false)
	if _, err := bob.ConnectMyServer(ctx, &runtimev1.ConnectMyServerRequest{}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "name") {
		t.Errorf("empty name: %v", err)
	}
	if code, body := rest(t, s, "", "GET", "/v1/me/connections", ""); code != 401 {
		t.Errorf("REST list without a credential: %d %s", code, body)
	}
}

// TestDeclaredToolsBeforeLogin: a per_user OAuth server whose config
// declares its tools (`tools` array) is searchable before anyone connects;
// until a user connects, a call is a clear "ask the user to connect
// tracker" result (reason tool.needs_auth), not a transport failure; after
// the user connects through the runtime, the same call runs with the
// user's own token, while another user still gets the connect answer.
func TestDeclaredToolsBeforeLogin(t *testing.T) {
	s, fx := oauthSuite(t, map[string]any{"tools": []any{
		map[string]any{"name": "whoami", "description": "Tell which tracker account the token belongs to", "inputSchema": map[string]any{"type": "object"}},
	}})
	ctx := context.Background()
	alice, bob := s.rt(aliceToken), s.rt(bobToken)
	th := newThread(t, alice, nil)
	sr := call(t, alice, th, "tool_search", map[string]any{"query": "tracker account token"})
	if !strings.Contains(text(sr), "tracker_whoami") {
		t.Fatalf("declared tool not found by tool_search before any login: %s", text(sr))
	}
	call(t, alice, th, "tool_search", map[string]any{"query": "select:tracker_whoami"})
	before := fx.MCPRequests.Load()
	r := call(t, alice, th, "tracker_whoami", map[string]any{})
	if r.GetReasonCode() != "tool.needs_auth" || r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_RUNTIME ||
		!strings.Contains(text(r), "Ask the user to connect tracker") || strings.Contains(text(r), "Unavailable") {
		t.Fatalf("call before connecting: %v %q", r.GetReasonCode(), text(r))
	}
	c, err := alice.ConnectMyServer(ctx, &runtimev1.ConnectMyServerRequest{Name: "tracker"})
	if err != nil {
		t.Fatal(err)
	}
	if st, body, err := oauthtest.Browse(ctx, c.GetAuthorizationUrl(), "alice@example"); err != nil || st != 200 {
		t.Fatalf("browser: %d %q %v", st, body, err)
	}
	r = call(t, alice, th, "tracker_whoami", map[string]any{})
	if r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || text(r) != "alice@example" {
		t.Fatalf("call after connecting: %v %q", r.GetReasonCode(), text(r))
	}
	if fx.MCPRequests.Load() == before {
		t.Fatal("no request reached the MCP server")
	}
	bth := newThread(t, bob, nil)
	call(t, bob, bth, "tool_search", map[string]any{"query": "select:tracker_whoami"})
	if r := call(t, bob, bth, "tracker_whoami", map[string]any{}); r.GetReasonCode() != "tool.needs_auth" {
		t.Fatalf("bob's call used alice's connection: %v %q", r.GetReasonCode(), text(r))
	}
}

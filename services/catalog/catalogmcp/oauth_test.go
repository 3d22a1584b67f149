package catalogmcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// oauthEnv is a Manager whose callback is served on loopback, and the
// fixture authorization server + MCP server.
type oauthEnv struct {
	fx       *oauthtest.Fixture
	m        *Manager
	callback *httptest.Server
}

func newOAuthEnv(t *testing.T, servers ...catalogconfig.Server) *oauthEnv {
	t.Helper()
	e := &oauthEnv{fx: oauthtest.New()}
	t.Cleanup(e.fx.Close)
	mux := http.NewServeMux()
	e.callback = httptest.NewServer(mux)
	t.Cleanup(e.callback.Close)
	e.m = NewManager(ManagerOptions{Options: Options{Version: "test", OAuth: &OAuthOptions{RedirectURI: e.callback.URL + "/oauth/callback"}},
		Lookup: func(k string) (string, bool) {
			if k == "CC_SECRET" {
				return "machine-secret", true
			}
			return "", false
		}})
	t.Cleanup(func() { _ = e.m.Close() })
	mux.HandleFunc("/oauth/callback", e.m.ServeOAuthCallback)
	for i := range servers {
		if servers[i].URL == "" {
			servers[i].URL = e.fx.URL()
		}
	}
	e.m.Apply(servers)
	return e
}

func (e *oauthEnv) waitState(t *testing.T, server string, want State) Status {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, st := range e.m.Statuses() {
			if st.Name == server && st.State == want {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s never reached %s: %+v", server, want, e.m.Statuses())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *oauthEnv) whoami(t *testing.T, server string, key ScopeKey) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := e.m.Call(ctx, server, "whoami", []byte(`{}`), key, nil)
	if err != nil {
		return "", err
	}
	var c struct{ Text string }
	_ = json.Unmarshal(res.Content[0], &c)
	return c.Text, nil
}

func (e *oauthEnv) login(t *testing.T, server, tenant, subject, user string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	authURL, err := e.m.StartLogin(ctx, server, tenant, subject)
	if err != nil {
		t.Fatal(err)
	}
	status, body, err := oauthtest.Browse(ctx, authURL, user)
	if err != nil || status != 200 || !strings.Contains(body, "is connected") {
		t.Fatalf("login through the callback: %d %q %v", status, body, err)
	}
}

// TestOAuthAuthorizationCodeEndToEnd: a server with no configuration but
// its URL answers 401; the catalog discovers the authorization server
// (RFC 9728, RFC 8414), settles in NEEDS_AUTH without retrying, registers a
// client (RFC 7591) when an admin connects it, the browser posts the
// consent form and lands on the catalog's callback (PKCE S256 and the
// resource indicator are enforced by the fixture), the server becomes
// READY and calls carry the token; an access token the server stops
// accepting is refreshed once (rotation), and a callback state is single use.
func TestOAuthAuthorizationCodeEndToEnd(t *testing.T) {
	e := newOAuthEnv(t, catalogconfig.Server{Name: "docs", Type: catalogconfig.TypeHTTP})
	st := e.waitState(t, "docs", StateNeedsAuth)
	if !strings.Contains(st.LastError, "authorise") {
		t.Fatalf("last error %q", st.LastError)
	}
	before := e.fx.MCPRequests.Load()
	time.Sleep(1200 * time.Millisecond) // FAILED would have retried twice by now
	if n := e.fx.MCPRequests.Load() - before; n != 0 {
		t.Fatalf("NEEDS_AUTH server was contacted %d times while waiting", n)
	}
	if _, err := e.whoami(t, "docs", ScopeKey{}); !errors.Is(err, catalogoauth.ErrNeedsAuth) {
		t.Fatalf("call before login: %v, want a NeedsAuthError", err)
	} else if !strings.Contains(err.Error(), "ask the user to connect docs") {
		t.Fatalf("call before login: %v", err)
	}

	ctx := context.Background()
	authURL, err := e.m.StartLogin(ctx, "docs", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"code_challenge_method=S256", "resource=" + strings.ReplaceAll(e.fx.URL(), ":", "%3A"), "scope=tools"} {
		if !strings.Contains(authURL, strings.ReplaceAll(p, "/", "%2F")) {
			t.Errorf("authorization URL %s lacks %s", authURL, p)
		}
	}
	status, body, err := oauthtest.Browse(ctx, authURL, "admin")
	if err != nil || status != 200 {
		t.Fatalf("browser: %d %s %v", status, body, err)
	}
	e.waitState(t, "docs", StateReady)
	if who, err := e.whoami(t, "docs", ScopeKey{}); err != nil || who != "admin" {
		t.Fatalf("whoami = %q, %v", who, err)
	}
	if n := e.fx.Registrations.Load(); n != 1 {
		t.Fatalf("registrations = %d, want 1", n)
	}

	// The same state again: refused.
	u := e.callback.URL + "/oauth/callback?" + strings.SplitN(authURL, "?", 2)[1]
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("replayed state: status %d", resp.StatusCode)
	}

	// Refresh on 401: the server stops accepting the access token.
	e.fx.ExpireAccessTokens()
	if who, err := e.whoami(t, "docs", ScopeKey{}); err != nil || who != "admin" {
		t.Fatalf("after expiry: whoami = %q, %v", who, err)
	}
	if n := e.fx.RefreshGrants.Load(); n != 1 {
		t.Fatalf("refresh grants = %d, want 1", n)
	}
}

// TestOAuthRevokedRefreshTokenNeedsAuth: when the authorization server
// revokes everything, the next call refreshes once, is refused, and the
// server settles in NEEDS_AUTH — no retry storm against either server.
func TestOAuthRevokedRefreshTokenNeedsAuth(t *testing.T) {
	e := newOAuthEnv(t, catalogconfig.Server{Name: "docs", Type: catalogconfig.TypeHTTP})
	e.waitState(t, "docs", StateNeedsAuth)
	e.login(t, "docs", "", "", "admin")
	e.waitState(t, "docs", StateReady)
	e.fx.RevokeAll()
	_, err := e.whoami(t, "docs", ScopeKey{})
	var na *NeedsAuthError
	if !errors.As(err, &na) || na.Server != "docs" {
		t.Fatalf("call after revocation: %v", err)
	}
	st := e.waitState(t, "docs", StateNeedsAuth)
	if !strings.Contains(st.LastError, "refresh") && !strings.Contains(st.LastError, "authorise") {
		t.Fatalf("last error %q", st.LastError)
	}
	tokens, mcpReqs := len(e.fx.TokenRequests()), e.fx.MCPRequests.Load()
	time.Sleep(1500 * time.Millisecond)
	if n := len(e.fx.TokenRequests()) - tokens; n != 0 {
		t.Fatalf("%d token requests while NEEDS_AUTH", n)
	}
	if n := e.fx.MCPRequests.Load() - mcpReqs; n != 0 {
		t.Fatalf("%d MCP requests while NEEDS_AUTH", n)
	}
	if n := e.fx.RefreshGrants.Load(); n != 0 {
		t.Fatalf("a revoked refresh token was accepted %d times", n)
	}
	refreshes := 0
	for _, g := range e.fx.TokenRequests() {
		if g == "refresh_token" {
			refreshes++
		}
	}
	if refreshes != 1 {
		t.Fatalf("refresh attempts = %d, want 1 (%v)", refreshes, e.fx.TokenRequests())
	}
	// A new login recovers it.
	e.login(t, "docs", "", "", "admin")
	e.waitState(t, "docs", StateReady)

	// Revoke (RFC 7009) through the catalog: the next call needs a login.
	if err := e.m.Revoke(context.Background(), "docs", "", ""); err != nil {
		t.Fatal(err)
	}
	if e.fx.Revocations.Load() == 0 {
		t.Fatal("no revocation request")
	}
	if _, err := e.whoami(t, "docs", ScopeKey{}); !errors.Is(err, catalogoauth.ErrNeedsAuth) {
		t.Fatalf("call after revoke: %v", err)
	}
}

// TestOAuthPerUserIsolation: a per_user server gives each user their own
// login; user A's token is never used for user B, who is asked to connect.
func TestOAuthPerUserIsolation(t *testing.T) {
	e := newOAuthEnv(t, catalogconfig.Server{Name: "tracker", Type: catalogconfig.TypeHTTP, SessionScope: catalogconfig.ScopePerUser})
	e.waitState(t, "tracker", StateNeedsAuth)
	a, b := ScopeKey{Tenant: "t1", Subject: "alice"}, ScopeKey{Tenant: "t1", Subject: "bob"}
	e.login(t, "tracker", a.Tenant, a.Subject, "alice@example")
	if who, err := e.whoami(t, "tracker", a); err != nil || who != "alice@example" {
		t.Fatalf("alice: whoami = %q, %v", who, err)
	}
	if who, err := e.whoami(t, "tracker", b); !errors.Is(err, catalogoauth.ErrNeedsAuth) {
		t.Fatalf("bob before connecting: whoami = %q, %v (alice's token leaked?)", who, err)
	}
	e.login(t, "tracker", b.Tenant, b.Subject, "bob@example")
	if who, err := e.whoami(t, "tracker", b); err != nil || who != "bob@example" {
		t.Fatalf("bob: whoami = %q, %v", who, err)
	}
	if who, err := e.whoami(t, "tracker", a); err != nil || who != "alice@example" {
		t.Fatalf("alice again: whoami = %q, %v", who, err)
	}
	// The shared (discovery) connection is still not authorised.
	if st := e.waitState(t, "tracker", StateNeedsAuth); st.Listed {
		t.Fatalf("shared connection listed tools without an admin login")
	}
}

// TestOAuthClientCredentialsDeerFlowBlock: DeerFlow's oauth block
// (client_credentials, a ${VAR} secret, a custom token field) gets a token
// from token_url before the first request and reuses it.
func TestOAuthClientCredentialsDeerFlowBlock(t *testing.T) {
	block := json.RawMessage(`{"enabled": true, "token_url": "TOKEN_URL", "grant_type": "client_credentials",
		"client_id": "machine", "client_secret": "${CC_SECRET}", "token_field": "jwt", "scope": "tools",
		"extra_token_params": {"tenant": "acme"}}`)
	e := &oauthEnv{}
	fx := oauthtest.New()
	defer fx.Close()
	fx.CCTokenField = "jwt"
	block = json.RawMessage(strings.Replace(string(block), "TOKEN_URL", fx.AS.URL+"/token", 1))
	e.fx = fx
	e.m = NewManager(ManagerOptions{Options: Options{Version: "test"}, Lookup: func(k string) (string, bool) {
		return "machine-secret", k == "CC_SECRET"
	}})
	defer e.m.Close()
	e.m.Apply([]catalogconfig.Server{{Name: "m2m", Type: catalogconfig.TypeHTTP, URL: fx.URL(), Extra: []catalogconfig.RawField{{Key: "oauth", Value: block}}}})
	e.waitState(t, "m2m", StateReady)
	for range 3 {
		if who, err := e.whoami(t, "m2m", ScopeKey{}); err != nil || who != "machine:machine" {
			t.Fatalf("whoami = %q, %v", who, err)
		}
	}
	if n := fx.CCGrants.Load(); n != 1 {
		t.Fatalf("client_credentials grants = %d, want 1", n)
	}
	if n := fx.MCPUnauthorized.Load(); n != 0 {
		t.Fatalf("%d requests went without the token", n)
	}
}

// TestOAuthClientCredentialsWrongSecret: a rejected client credential is
// NEEDS_AUTH, not FAILED-and-retried.
func TestOAuthClientCredentialsWrongSecret(t *testing.T) {
	fx := oauthtest.New()
	defer fx.Close()
	block := json.RawMessage(`{"token_url": "` + fx.AS.URL + `/token", "client_id": "machine", "client_secret": "${CC_SECRET}"}`)
	m := NewManager(ManagerOptions{Options: Options{Version: "test"}, Lookup: func(k string) (string, bool) { return "wrong", true }})
	defer m.Close()
	m.Apply([]catalogconfig.Server{{Name: "m2m", Type: catalogconfig.TypeHTTP, URL: fx.URL(), Extra: []catalogconfig.RawField{{Key: "oauth", Value: block}}}})
	e := &oauthEnv{fx: fx, m: m}
	st := e.waitState(t, "m2m", StateNeedsAuth)
	if !strings.Contains(st.LastError, "invalid_client") || strings.Contains(st.LastError, "wrong") {
		t.Fatalf("last error %q", st.LastError)
	}
	n := len(fx.TokenRequests())
	time.Sleep(1200 * time.Millisecond)
	if d := len(fx.TokenRequests()) - n; d != 0 {
		t.Fatalf("%d token requests while NEEDS_AUTH", d)
	}
}

// TestOAuthTokensSurviveRestart: with the catalog's sealed sqlite store, a
// login survives a restart of the manager: the new one is READY at once,
// without a new registration or login.
func TestOAuthTokensSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	keys, err := catalogstore.ParseKeyring(strings.Repeat("0f", 32))
	if err != nil {
		t.Fatal(err)
	}
	st, err := catalogstore.Open(filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fx := oauthtest.New()
	defer fx.Close()
	var cur atomic.Pointer[Manager]
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { cur.Load().ServeOAuthCallback(w, r) }))
	defer cb.Close()
	newManager := func() *Manager {
		m := NewManager(ManagerOptions{Options: Options{Version: "test", OAuth: &OAuthOptions{RedirectURI: cb.URL + "/oauth/callback",
			Store: st.OAuth(keys).For, LoginOwner: st.OAuth(keys).LoginOwner}}})
		cur.Store(m)
		m.Apply([]catalogconfig.Server{{Name: "docs", Type: catalogconfig.TypeHTTP, URL: fx.URL()}})
		return m
	}
	e := &oauthEnv{fx: fx, m: newManager()}
	e.waitState(t, "docs", StateNeedsAuth)
	e.login(t, "docs", "", "", "admin")
	e.waitState(t, "docs", StateReady)
	_ = e.m.Close()

	e.m = newManager()
	defer e.m.Close()
	e.waitState(t, "docs", StateReady)
	if who, err := e.whoami(t, "docs", ScopeKey{}); err != nil || who != "admin" {
		t.Fatalf("after restart: whoami = %q, %v", who, err)
	}
	if r, a := fx.Registrations.Load(), fx.Authorizations.Load(); r != 1 || a != 1 {
		t.Fatalf("registrations %d, authorizations %d: want 1 and 1", r, a)
	}
}

// TestOAuthWithoutPublicURL: a server that needs a login while the catalog
// has no public URL is NEEDS_AUTH saying what to set, not FAILED-retried.
func TestOAuthWithoutPublicURL(t *testing.T) {
	fx := oauthtest.New()
	defer fx.Close()
	m := NewManager(ManagerOptions{Options: Options{Version: "test"}})
	defer m.Close()
	m.Apply([]catalogconfig.Server{{Name: "docs", Type: catalogconfig.TypeHTTP, URL: fx.URL()}})
	e := &oauthEnv{fx: fx, m: m}
	st := e.waitState(t, "docs", StateNeedsAuth)
	if !strings.Contains(st.LastError, "catalog.oauth.public_url") {
		t.Fatalf("last error %q", st.LastError)
	}
	n := fx.MCPRequests.Load()
	time.Sleep(1200 * time.Millisecond)
	if d := fx.MCPRequests.Load() - n; d != 0 || st.Restarts != 0 {
		t.Fatalf("%d requests, %d restarts while NEEDS_AUTH", d, st.Restarts)
	}
}

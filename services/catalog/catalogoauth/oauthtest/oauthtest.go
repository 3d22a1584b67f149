// Package oauthtest is a local OAuth 2.1 authorization server in front of a
// real streamable-HTTP MCP server (mcp-go's), both on loopback, for the
// catalog's end-to-end OAuth tests (docs/architecture.md §10.6).
//
// The authorization server publishes RFC 8414 metadata, registers clients
// (RFC 7591), shows a consent form at /authorize (the test posts it as a
// browser would), enforces PKCE S256 and the RFC 8707 resource indicator,
// issues rotating refresh tokens, serves client_credentials (with a custom
// token field name, as DeerFlow's token_field allows), and revokes
// (RFC 7009). The MCP server answers 401 with an RFC 9728 challenge and
// serves protected-resource metadata; its tool `whoami` returns the user
// the token was issued to.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Fixture is the authorization server and the MCP server.
type Fixture struct {
	// AS and MCP are the two HTTP servers.
	AS, MCP *httptest.Server
	// TokenTTL is the access token lifetime (default 1 h).
	TokenTTL time.Duration
	// CCClientID, CCClientSecret are the client_credentials client; its
	// tokens are answered under CCTokenField (default "access_token").
	CCClientID, CCClientSecret, CCTokenField string

	// Counters.
	Registrations, Authorizations, CodeGrants, RefreshGrants, CCGrants, Revocations, MCPRequests, MCPUnauthorized atomic.Int64

	mu       sync.Mutex
	clients  map[string]client
	codes    map[string]code
	access   map[string]grant
	refresh  map[string]grant
	requests []string // token requests' grant types, in order
}

type client struct{ secret, redirect string }

type code struct {
	client, redirect, challenge, resource, scope, user string
}

type grant struct {
	client, resource, scope, user string
	expires                       time.Time
}

type userKey struct{}

// New starts the fixture; Close stops it.
func New() *Fixture {
	f := &Fixture{TokenTTL: time.Hour, CCClientID: "machine", CCClientSecret: "machine-secret",
		clients: map[string]client{}, codes: map[string]code{}, access: map[string]grant{}, refresh: map[string]grant{}}
	f.AS = httptest.NewServer(http.HandlerFunc(f.serveAS))
	s := server.NewMCPServer("oauth-fixture", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("whoami", mcp.WithDescription("the user the token was issued to")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u, _ := ctx.Value(userKey{}).(string)
			return mcp.NewToolResultText(u), nil
		})
	h := server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, userKey{}, r.Header.Get("X-Fixture-User"))
	}))
	f.MCP = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			writeJSON(w, 200, map[string]any{"resource": f.MCP.URL + "/mcp", "authorization_servers": []string{f.AS.URL},
				"scopes_supported": []string{"tools"}})
			return
		}
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		f.MCPRequests.Add(1)
		g, ok := f.checkBearer(r.Header.Get("Authorization"))
		if !ok {
			f.MCPUnauthorized.Add(1)
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="tools"`, f.MCP.URL))
			writeJSON(w, 401, map[string]string{"error": "invalid_token"})
			return
		}
		r.Header.Set("X-Fixture-User", g.user)
		h.ServeHTTP(w, r)
	}))
	return f
}

// Close stops both servers.
func (f *Fixture) Close() {
	f.MCP.Close()
	f.AS.Close()
}

// URL is the MCP endpoint.
func (f *Fixture) URL() string { return f.MCP.URL + "/mcp" }

// ExpireAccessTokens makes every access token invalid (refresh tokens stay).
func (f *Fixture) ExpireAccessTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.access = map[string]grant{}
}

// RevokeAll revokes every access and refresh token.
func (f *Fixture) RevokeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.access, f.refresh = map[string]grant{}, map[string]grant{}
}

// TokenRequests returns the grant types of the token requests so far.
func (f *Fixture) TokenRequests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func (f *Fixture) checkBearer(h string) (grant, bool) {
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return grant{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.access[tok]
	if !ok || time.Now().After(g.expires) || g.resource != f.URL() {
		return grant{}, false
	}
	return g, true
}

func (f *Fixture) serveAS(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		writeJSON(w, 200, map[string]any{"issuer": f.AS.URL, "authorization_endpoint": f.AS.URL + "/authorize",
			"token_endpoint": f.AS.URL + "/token", "registration_endpoint": f.AS.URL + "/register",
			"revocation_endpoint": f.AS.URL + "/revoke", "response_types_supported": []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token", "client_credentials"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"}})
	case "/register":
		var req struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.RedirectURIs) != 1 {
			writeJSON(w, 400, map[string]string{"error": "invalid_client_metadata"})
			return
		}
		f.Registrations.Add(1)
		id, secret := random(), random()
		f.mu.Lock()
		f.clients[id] = client{secret: secret, redirect: req.RedirectURIs[0]}
		f.mu.Unlock()
		writeJSON(w, 201, map[string]any{"client_id": id, "client_secret": secret, "token_endpoint_auth_method": "client_secret_basic",
			"redirect_uris": req.RedirectURIs})
	case "/authorize":
		f.authorize(w, r)
	case "/token":
		f.token(w, r)
	case "/revoke":
		_ = r.ParseForm()
		f.Revocations.Add(1)
		f.mu.Lock()
		delete(f.access, r.PostForm.Get("token"))
		delete(f.refresh, r.PostForm.Get("token"))
		f.mu.Unlock()
		w.WriteHeader(200)
	default:
		http.NotFound(w, r)
	}
}

// authorize: GET shows the consent form (a text field for the user name);
// POST with approve=yes redirects back with a code.
func (f *Fixture) authorize(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	q := r.Form
	f.mu.Lock()
	c, ok := f.clients[q.Get("client_id")]
	f.mu.Unlock()
	if !ok || q.Get("redirect_uri") != c.redirect {
		http.Error(w, "unknown client or redirect_uri", 400)
		return
	}
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") != f.URL() {
		back(w, r, c.redirect, url.Values{"error": {"invalid_request"}, "state": {q.Get("state")}})
		return
	}
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><form method="post" action="/authorize">`)
		for _, k := range []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "resource", "scope"} {
			fmt.Fprintf(w, `<input type="hidden" name="%s" value="%s">`, k, html.EscapeString(q.Get(k)))
		}
		fmt.Fprintf(w, `<input name="user" value=""><button name="approve" value="yes">Allow</button></form></body></html>`)
		return
	}
	if q.Get("approve") != "yes" || q.Get("user") == "" {
		back(w, r, c.redirect, url.Values{"error": {"access_denied"}, "state": {q.Get("state")}})
		return
	}
	f.Authorizations.Add(1)
	k := random()
	f.mu.Lock()
	f.codes[k] = code{client: q.Get("client_id"), redirect: c.redirect, challenge: q.Get("code_challenge"), resource: q.Get("resource"),
		scope: q.Get("scope"), user: q.Get("user")}
	f.mu.Unlock()
	back(w, r, c.redirect, url.Values{"code": {k}, "state": {q.Get("state")}})
}

func back(w http.ResponseWriter, r *http.Request, redirect string, v url.Values) {
	http.Redirect(w, r, redirect+"?"+v.Encode(), http.StatusFound)
}

func (f *Fixture) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	p := r.PostForm
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = p.Get("client_id"), p.Get("client_secret")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, p.Get("grant_type"))
	fail := func(status int, e string) { writeJSON(w, status, map[string]string{"error": e}) }
	switch p.Get("grant_type") {
	case "client_credentials":
		if id != f.CCClientID || secret != f.CCClientSecret {
			fail(401, "invalid_client")
			return
		}
		f.CCGrants.Add(1)
		res := p.Get("resource")
		if res == "" {
			res = f.URL()
		}
		tok := random()
		f.access[tok] = grant{client: id, resource: res, scope: p.Get("scope"), user: "machine:" + id, expires: time.Now().Add(f.TokenTTL)}
		field := f.CCTokenField
		if field == "" {
			field = "access_token"
		}
		writeJSON(w, 200, map[string]any{field: tok, "token_type": "Bearer", "expires_in": int(f.TokenTTL.Seconds())})
		return
	}
	c, ok := f.clients[id]
	if !ok || c.secret != secret {
		fail(401, "invalid_client")
		return
	}
	var g grant
	switch p.Get("grant_type") {
	case "authorization_code":
		cd, ok := f.codes[p.Get("code")]
		delete(f.codes, p.Get("code"))
		sum := sha256.Sum256([]byte(p.Get("code_verifier")))
		if !ok || cd.client != id || cd.redirect != p.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != cd.challenge || p.Get("resource") != cd.resource {
			fail(400, "invalid_grant")
			return
		}
		f.CodeGrants.Add(1)
		g = grant{client: id, resource: cd.resource, scope: cd.scope, user: cd.user}
	case "refresh_token":
		old, ok := f.refresh[p.Get("refresh_token")]
		delete(f.refresh, p.Get("refresh_token")) // rotation: single use
		if !ok || old.client != id || p.Get("resource") != old.resource {
			fail(400, "invalid_grant")
			return
		}
		f.RefreshGrants.Add(1)
		g = old
	default:
		fail(400, "unsupported_grant_type")
		return
	}
	g.expires = time.Now().Add(f.TokenTTL)
	at, rt := random(), random()
	f.access[at], f.refresh[rt] = g, g
	writeJSON(w, 200, map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer",
		"expires_in": int(f.TokenTTL.Seconds()), "scope": g.scope})
}

func random() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Browse plays the user's browser: it opens authURL, fills the consent form
// with user, submits it and follows the redirects, ending at the catalog's
// callback, whose answer it returns (body read and closed).
func Browse(ctx context.Context, authURL, user string) (status int, body string, err error) {
	return BrowseWith(ctx, &http.Client{Timeout: 10 * time.Second}, authURL, user)
}

// BrowseWith is Browse with the browser's HTTP client (its CheckRedirect
// may stop at the redirect back). When the page the redirect back answers
// is Toolplane's confirmation interstitial, the browser confirms it
// (Confirm), as the user would.
func BrowseWith(ctx context.Context, hc *http.Client, authURL, user string) (status int, body string, err error) {
	p, err := Consent(ctx, hc, authURL, user)
	if err != nil {
		return 0, "", err
	}
	if !p.NeedsConfirm() {
		return p.Status, p.Body, nil
	}
	return Confirm(ctx, hc, p)
}

// Page is the page the browser ended on after the consent: the answer of
// the redirect back (the callback), its URL and the cookies it set.
type Page struct {
	// Status and Body are the answer's.
	Status int
	Body   string
	// URL is the page's address; Cookies the ones it set.
	URL     *url.URL
	Cookies []*http.Cookie
}

// NeedsConfirm: the page is Toolplane's confirmation interstitial.
func (p *Page) NeedsConfirm() bool {
	return p.Status == 200 && strings.Contains(p.Body, `id="toolplane-confirm"`)
}

// Consent opens authURL, approves the consent page as user and follows the
// redirects; it returns the last page without confirming anything.
func Consent(ctx context.Context, hc *http.Client, authURL, user string) (*Page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	page, _ := readAll(resp)
	if resp.StatusCode != 200 {
		return &Page{Status: resp.StatusCode, Body: page}, fmt.Errorf("consent page: status %d: %s", resp.StatusCode, page)
	}
	form := url.Values{}
	for _, m := range inputRE.FindAllStringSubmatch(page, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	form.Set("user", user)
	form.Set("approve", "yes")
	action := resp.Request.URL.ResolveReference(&url.URL{Path: "/authorize"})
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, action.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = hc.Do(req)
	if err != nil {
		return nil, err
	}
	b, _ := readAll(resp)
	return &Page{Status: resp.StatusCode, Body: b, URL: resp.Request.URL, Cookies: resp.Cookies()}, nil
}

// Confirm submits the confirmation interstitial p as a browser does: its
// hidden fields posted to the form's action (relative to the page), with
// the page's cookies and a same-origin Origin.
func Confirm(ctx context.Context, hc *http.Client, p *Page) (status int, body string, err error) {
	if !p.NeedsConfirm() || p.URL == nil {
		return p.Status, p.Body, errors.New("confirm: the page is not a confirmation page")
	}
	form := url.Values{}
	for _, m := range inputRE.FindAllStringSubmatch(p.Body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	action := p.URL.ResolveReference(&url.URL{Path: "callback"})
	if m := actionRE.FindStringSubmatch(p.Body); m != nil {
		ref, err := url.Parse(html.UnescapeString(m[1]))
		if err != nil {
			return 0, "", err
		}
		action = p.URL.ResolveReference(ref)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, action.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", p.URL.Scheme+"://"+p.URL.Host)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for _, c := range p.Cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	b, _ := readAll(resp)
	return resp.StatusCode, b, nil
}

var actionRE = regexp.MustCompile(`<form method="post" action="([^"]*)" id="toolplane-confirm">`)

var inputRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

func readAll(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), err
}

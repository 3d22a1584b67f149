package catalogmcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
)

// OAuthOptions configure how the catalog authenticates to OAuth-protected
// MCP servers (docs/architecture.md §10.6).
type OAuthOptions struct {
	// RedirectURI receives authorization codes: server.public_url +
	// /oauth/callback. "" = no login is possible; a server that needs one
	// is NEEDS_AUTH saying so.
	RedirectURI string
	// ClientMetadataURL is the catalog's client ID metadata document URL
	// ("" = dynamic registration only).
	ClientMetadataURL string
	// Store returns the token and client store of one connection: subject
	// "" is the server's shared (admin-authorised) connection. nil = memory.
	Store func(server, tenant, subject string) catalogoauth.Store
	// HTTPClient talks to authorization servers (nil = 30 s timeout).
	HTTPClient *http.Client
	// LoginOwner finds the connection a callback's state belongs to when
	// pending logins are in a store shared by replicas (a Store whose
	// values implement catalogoauth.PendingStore needs it); nil = only
	// this process's in-memory logins.
	LoginOwner func(ctx context.Context, state string) (server, tenant, subject string, ok bool, err error)
	// ConfirmKey MACs the callback's confirmation tokens
	// (oauthconfirm.go); replicas sharing pending logins need the same
	// key. nil = a random key of this process.
	ConfirmKey []byte
}

// NeedsAuthError is returned for a call to a server (or a per-user
// connection) that needs an authorisation: the caller should ask the user
// to connect the server.
type NeedsAuthError struct {
	// Server is the server name; Reason says why.
	Server, Reason string
}

func (e *NeedsAuthError) Error() string {
	return fmt.Sprintf("server %s needs authorization (ask the user to connect %s): %s", e.Server, e.Server, e.Reason)
}

// Unwrap makes errors.Is(err, catalogoauth.ErrNeedsAuth) true.
func (e *NeedsAuthError) Unwrap() error { return catalogoauth.ErrNeedsAuth }

// usesOAuth: an sse/http server without a configured Authorization header
// authenticates with OAuth (configured `oauth` block, or discovered on 401).
func usesOAuth(cfg catalogconfig.Server, o *catalogconfig.OAuth) bool {
	if t := cfg.EffectiveType(); t != catalogconfig.TypeHTTP && t != catalogconfig.TypeSSE {
		return false
	}
	if o != nil && !o.IsEnabled() {
		return false
	}
	for k := range cfg.Headers {
		if strings.EqualFold(k, "Authorization") {
			return o != nil
		}
	}
	return true
}

// oauthState is a supervisor's OAuth clients: the shared connection's and,
// for per_user / per_thread servers using the authorization code grant, one
// per principal (never shared between users).
type oauthState struct {
	server string
	url    string               // expanded server URL
	cfg    *catalogconfig.OAuth // expanded; nil = discovered on 401
	opts   OAuthOptions

	// declared are the tools the config declares (`tools` array or
	// `path`): listed while no connection has listed the server's own, so
	// a per_user server's tools are searchable before anyone connects.
	declared []ToolDef

	mu      sync.Mutex
	clients map[[2]string]*catalogoauth.Client
	// authorized is signalled when a login of the shared connection
	// completed (the supervisor leaves NEEDS_AUTH).
	authorized chan struct{}
}

func newOAuthState(raw catalogconfig.Server, cfg catalogconfig.Server, lookup func(string) (string, bool), opts *OAuthOptions) (*oauthState, error) {
	o, err := raw.ParseOAuth()
	if err != nil {
		return nil, err
	}
	if !usesOAuth(cfg, o) {
		return nil, nil
	}
	st := &oauthState{server: raw.Name, url: cfg.URL, clients: map[[2]string]*catalogoauth.Client{}, authorized: make(chan struct{}, 1)}
	if opts != nil {
		st.opts = *opts
	}
	if o != nil {
		x, err := catalogconfig.ExpandOAuth(*o, raw.Name, lookup)
		if err != nil {
			return nil, err
		}
		st.cfg = &x
	}
	if _, err := st.client("", ""); err != nil {
		return nil, fmt.Errorf("mcpServers.%s.oauth: %w", raw.Name, err)
	}
	return st, nil
}

// AuthorizedPoll is how often a NEEDS_AUTH server whose tokens are in a
// store shared by replicas looks for a login completed on another replica
// (a variable for tests).
var AuthorizedPoll = 5 * time.Second

// waitAuthorized waits until the shared connection may have a token: a
// login completed here (authorized) or, with a shared store, a token
// stored by another replica that differs from the one held now (a stale
// expired token does not count, so there is no retry storm). false: ctx
// ended.
func (o *oauthState) waitAuthorized(ctx context.Context) bool {
	var poll <-chan time.Time
	var held bool
	var exp time.Time
	c, err := o.client("", "")
	if o.opts.LoginOwner != nil && err == nil {
		held, exp, _ = c.TokenInfo(ctx)
		t := time.NewTicker(AuthorizedPoll)
		defer t.Stop()
		poll = t.C
	}
	for {
		select {
		case <-o.authorized:
			return true
		case <-ctx.Done():
			return false
		case <-poll:
			h, e, err := c.TokenInfo(ctx)
			if err == nil && h && (!held || !e.Equal(exp)) {
				return true
			}
		}
	}
}

// perPrincipal: logins are per user for per_user / per_thread servers with
// the authorization code grant; machine grants, and per_tenant servers (one
// session shared by a tenant's users), use the server's credential.
func (o *oauthState) perPrincipal(cfg catalogconfig.Server) bool {
	if cfg.Scope() == catalogconfig.ScopeShared || cfg.Scope() == catalogconfig.ScopePerTenant {
		return false
	}
	return o.cfg == nil || o.cfg.EffectiveGrant() == catalogconfig.GrantAuthorizationCode
}

// client returns the OAuth client of (tenant, subject), "" "" being the
// shared connection's.
func (o *oauthState) client(tenant, subject string) (*catalogoauth.Client, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := [2]string{tenant, subject}
	if c := o.clients[k]; c != nil {
		return c, nil
	}
	cc := catalogoauth.Config{ServerURL: o.url, RedirectURI: o.opts.RedirectURI, ClientMetadataURL: o.opts.ClientMetadataURL,
		HTTPClient: o.opts.HTTPClient, ClientName: "Toolplane catalog"}
	if o.opts.Store != nil {
		cc.Store = o.opts.Store(o.server, tenant, subject)
	}
	if x := o.cfg; x != nil {
		cc.Grant, cc.TokenURL, cc.ClientID, cc.ClientSecret, cc.RefreshToken = x.EffectiveGrant(), x.TokenURL, x.ClientID, x.ClientSecret, x.RefreshToken
		cc.Scopes, cc.Audience, cc.ExtraTokenParams, cc.RefreshSkew = x.Scopes(), x.Audience, x.ExtraTokenParams, x.RefreshSkew()
		cc.Fields = catalogoauth.TokenFields{Token: x.TokenField, TokenType: x.TokenTypeField, ExpiresIn: x.ExpiresInField, DefaultTokenType: x.DefaultTokenType}
	}
	c, err := catalogoauth.New(cc)
	if err != nil {
		return nil, err
	}
	o.clients[k] = c
	return c, nil
}

// wrapHTTP returns opts with an HTTP client whose requests carry c's tokens
// (over opts.HTTPClient's transport and timeout).
func wrapHTTP(opts Options, c *catalogoauth.Client) Options {
	hc := &http.Client{Transport: &catalogoauth.Transport{Client: c}}
	if opts.HTTPClient != nil {
		hc.Transport.(*catalogoauth.Transport).Base = opts.HTTPClient.Transport
		hc.Timeout, hc.CheckRedirect, hc.Jar = opts.HTTPClient.Timeout, opts.HTTPClient.CheckRedirect, opts.HTTPClient.Jar
	}
	opts.HTTPClient = hc
	return opts
}

// clientFor returns the client of (tenant, subject)'s connection: its own
// on a per-principal server, else the shared one ("" "" is always the
// shared, discovery connection).
func (o *oauthState) clientFor(cfg catalogconfig.Server, tenant, subject string) (*catalogoauth.Client, error) {
	if !o.perPrincipal(cfg) {
		tenant, subject = "", ""
	}
	return o.client(tenant, subject)
}

// connectOptions returns the options for a session of (tenant, subject).
func (o *oauthState) connectOptions(opts Options, cfg catalogconfig.Server, tenant, subject string) (Options, *catalogoauth.Client, error) {
	c, err := o.clientFor(cfg, tenant, subject)
	if err != nil {
		return opts, nil, err
	}
	return wrapHTTP(opts, c), c, nil
}

// asNeedsAuth turns an error carrying catalogoauth.ErrNeedsAuth into a
// *NeedsAuthError for server (nil if err is not one).
func asNeedsAuth(server string, err error) *NeedsAuthError {
	if err == nil || !errors.Is(err, catalogoauth.ErrNeedsAuth) {
		return nil
	}
	var na *NeedsAuthError
	if errors.As(err, &na) {
		return na
	}
	reason := "a user must authorise the connection"
	var ce *catalogoauth.NeedsAuthError
	if errors.As(err, &ce) {
		reason = ce.Reason
	}
	return &NeedsAuthError{Server: server, Reason: reason}
}

// StartLogin begins the authorization of server's shared connection (an
// admin's login) or, for a per_user server, of the principal's own; it
// returns the URL to send the user's browser to.
func (s *Supervisor) StartLogin(ctx context.Context, tenant, subject string) (string, error) {
	if s.oauth == nil {
		return "", fmt.Errorf("server %s does not use OAuth", s.raw.Name)
	}
	c, err := s.oauth.clientFor(s.cfg, tenant, subject)
	if err != nil {
		return "", err
	}
	return c.StartLogin(ctx, nil)
}

// CompleteLogin finishes a login from the callback's query if one of this
// server's clients started it (ok false: the state is not this server's).
func (s *Supervisor) CompleteLogin(ctx context.Context, q url.Values) (ok bool, err error) {
	if s.oauth == nil {
		return false, nil
	}
	s.oauth.mu.Lock()
	var owner *catalogoauth.Client
	shared := false
	for k, c := range s.oauth.clients {
		if c.HasPendingLogin(q.Get("state")) {
			owner, shared = c, k == [2]string{}
		}
	}
	s.oauth.mu.Unlock()
	if owner == nil {
		return false, nil
	}
	if err := owner.CompleteLogin(ctx, q); err != nil {
		return true, err
	}
	if shared {
		select {
		case s.oauth.authorized <- struct{}{}:
		default:
		}
	}
	return true, nil
}

// completeFor finishes a login of (tenant, subject)'s connection found in
// the shared store (LoginOwner), possibly started by another replica.
func (s *Supervisor) completeFor(ctx context.Context, tenant, subject string, q url.Values) error {
	c, err := s.oauth.client(tenant, subject)
	if err != nil {
		return err
	}
	if err := c.CompleteLogin(ctx, q); err != nil {
		return err
	}
	if tenant == "" && subject == "" {
		select {
		case s.oauth.authorized <- struct{}{}:
		default:
		}
	}
	return nil
}

// Revoke revokes and deletes the tokens of (tenant, subject) ("" "" = the
// shared connection).
func (s *Supervisor) Revoke(ctx context.Context, tenant, subject string) error {
	if s.oauth == nil {
		return fmt.Errorf("server %s does not use OAuth", s.raw.Name)
	}
	c, err := s.oauth.clientFor(s.cfg, tenant, subject)
	if err != nil {
		return err
	}
	return c.Revoke(ctx)
}

// StartLogin begins the OAuth login of server for (tenant, subject) — ""
// "" for a shared server's admin-authorised connection — and returns the
// authorization URL.
func (m *Manager) StartLogin(ctx context.Context, server, tenant, subject string) (string, error) {
	sup, ok := m.Supervisor(server)
	if !ok {
		return "", fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	return sup.StartLogin(ctx, tenant, subject)
}

// CompleteLogin finishes the login whose state the callback's query
// carries; it returns the server it belonged to. An unknown, used or
// expired state is an error.
func (m *Manager) CompleteLogin(ctx context.Context, q url.Values) (string, error) {
	if o := m.opts.Options.OAuth; o != nil && o.LoginOwner != nil {
		server, tenant, subject, ok, err := o.LoginOwner(ctx, q.Get("state"))
		if err != nil {
			return "", err
		}
		if ok {
			sup, found := m.Supervisor(server)
			if !found || sup.oauth == nil {
				return "", fmt.Errorf("oauth callback: server %s is no longer configured for OAuth", server)
			}
			return server, sup.completeFor(ctx, tenant, subject, q)
		}
	}
	m.mu.RLock()
	sups := append([]*Supervisor(nil), m.order...)
	m.mu.RUnlock()
	for _, s := range sups {
		ok, err := s.CompleteLogin(ctx, q)
		if ok {
			return s.raw.Name, err
		}
	}
	return "", errors.New("oauth callback: unknown, used or expired state")
}

// Revoke revokes (tenant, subject)'s tokens for server at the
// authorization server and deletes them; the principal's next call needs a
// new login.
func (m *Manager) Revoke(ctx context.Context, server, tenant, subject string) error {
	sup, ok := m.Supervisor(server)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	return sup.Revoke(ctx, tenant, subject)
}

// Connection is the OAuth state of one server for a principal.
type Connection struct {
	// Server name, its session scope and grant type.
	Server, Scope, Grant string
	// PerPrincipal: the principal has a connection of its own (else the
	// server's shared one is reported).
	PerPrincipal bool
	// Connected: a token is held; Expires is its expiry (zero: none).
	Connected bool
	Expires   time.Time
}

// ErrNoOAuth: the server does not authenticate with OAuth.
var ErrNoOAuth = errors.New("the server does not authenticate with OAuth")

// OAuthServer reports how server authenticates: usesOAuth, and whether
// (tenant, subject) gets a connection of its own (per_user / per_thread
// with the authorization code grant) and the grant.
func (m *Manager) OAuthServer(server string) (perPrincipal bool, grant string, err error) {
	sup, ok := m.Supervisor(server)
	if !ok {
		return false, "", fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	if sup.oauth == nil {
		return false, "", ErrNoOAuth
	}
	c, err := sup.oauth.client("", "")
	if err != nil {
		return false, "", err
	}
	return sup.oauth.perPrincipal(sup.cfg), c.Grant(), nil
}

// Connections lists the servers using OAuth, in config order, with
// (tenant, subject)'s state (the shared connection's for shared servers).
func (m *Manager) Connections(ctx context.Context, tenant, subject string) ([]Connection, error) {
	m.mu.RLock()
	sups := append([]*Supervisor(nil), m.order...)
	m.mu.RUnlock()
	var out []Connection
	for _, s := range sups {
		if s.oauth == nil {
			continue
		}
		per := s.oauth.perPrincipal(s.cfg)
		t, sub := "", ""
		if per {
			t, sub = tenant, subject
		}
		c, err := s.oauth.client(t, sub)
		if err != nil {
			return nil, err
		}
		held, exp, err := c.TokenInfo(ctx)
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", s.raw.Name, err)
		}
		out = append(out, Connection{Server: s.raw.Name, Scope: s.cfg.Scope(), Grant: c.Grant(), PerPrincipal: per, Connected: held, Expires: exp})
	}
	return out, nil
}

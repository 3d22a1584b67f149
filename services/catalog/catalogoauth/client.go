package catalogoauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// Grants a Client can use.
const (
	// GrantAuthorizationCode is the MCP authorization flow (a user logs in).
	GrantAuthorizationCode = "authorization_code"
	// GrantClientCredentials is machine-to-machine (SEP-1046, DeerFlow).
	GrantClientCredentials = "client_credentials"
	// GrantRefreshToken is DeerFlow's grant: a configured refresh token is
	// exchanged for access tokens.
	GrantRefreshToken = "refresh_token"
)

// ErrNeedsAuth: the server needs a user (or an admin) to authorise the
// catalog; no token is usable and none can be had without a login. A
// connection failing with it is NEEDS_AUTH, not FAILED, and is not retried.
var ErrNeedsAuth = errors.New("authorization required")

// NeedsAuthError is an ErrNeedsAuth with the reason.
type NeedsAuthError struct {
	// Reason says why (no token, refresh rejected, ...); never a credential.
	Reason string
}

func (e *NeedsAuthError) Error() string { return "authorization required: " + e.Reason }

// Unwrap makes errors.Is(err, ErrNeedsAuth) true.
func (e *NeedsAuthError) Unwrap() error { return ErrNeedsAuth }

// MaxStateBytes bounds the state of a callback looked up in a store (ours
// are 43 bytes; anything longer is no login of ours).
const MaxStateBytes = 128

// MaxPendingLogins bounds the pending logins a store keeps per connection
// (a new one drops the oldest), so repeated ConnectServer calls cannot
// grow the store.
const MaxPendingLogins = 8

// ErrNoClient is returned by Store.GetClient when no client is registered.
var ErrNoClient = errors.New("no registered client")

// Registration is an OAuth client registered with one authorization server.
type Registration struct {
	// ClientID and ClientSecret ("" for a public client).
	ClientID, ClientSecret string
	// AuthMethod is the token_endpoint_auth_method.
	AuthMethod string
	// RedirectURI is the redirect URI registered.
	RedirectURI string
}

// Store keeps one connection's token and its registered clients. It extends
// mcp-go's TokenStore (GetToken returns transport.ErrNoToken when empty).
type Store interface {
	transport.TokenStore
	// DeleteToken removes the token (revocation, a rejected refresh).
	DeleteToken(ctx context.Context) error
	// GetClient returns the client registered with issuer, or ErrNoClient.
	GetClient(ctx context.Context, issuer string) (*Registration, error)
	// SaveClient records the client registered with issuer.
	SaveClient(ctx context.Context, issuer string, r *Registration) error
}

// PendingLogin is a login started by StartLogin and not completed yet.
// Verifier is the PKCE code verifier: a store keeps it sealed.
type PendingLogin struct {
	// Verifier is the PKCE code verifier; Redirect the redirect URI sent.
	Verifier, Redirect string
	// Resource is the RFC 8707 resource indicator sent; ResourceMetadata
	// the protected-resource metadata URL discovered (a replica that did
	// not start the login discovers from it).
	Resource, ResourceMetadata string
	// Reg is the client the login was started with.
	Reg Registration
	// Scopes asked for.
	Scopes []string
	// Expires bounds the login (single use before then).
	Expires time.Time
}

// PendingStore is implemented by a Store whose pending logins are shared by
// every catalog replica (the database), so that the authorization server's
// redirect may land on any of them (docs/architecture.md §10.6). Without
// it, pending logins stay in the Client's memory.
type PendingStore interface {
	// SavePending records the pending login of state for this connection.
	SavePending(ctx context.Context, state string, p *PendingLogin) error
	// TakePending returns and deletes the pending login of state if it is
	// this connection's (nil, nil when there is none: unknown, already
	// used, or another connection's). Expiry is the caller's check.
	TakePending(ctx context.Context, state string) (*PendingLogin, error)
}

// Locker is implemented by a Store shared by several catalog replicas: it
// serialises the renewals of one connection across all of them (a
// database lock), so that two replicas never both send a rotating refresh
// token — the second, once the lock is its, finds the renewed token
// stored. Within one process the Client's own mutex serialises them.
type Locker interface {
	// LockToken runs fn holding the connection's lock; fn's error is
	// returned as it is.
	LockToken(ctx context.Context, fn func(ctx context.Context) error) error
}

// Authorizer performs the browser step: it takes the user to authURL and
// returns the redirect URI the authorization server sent the browser back
// to (with code and state). Nil in the catalog, where the user is asked to
// connect instead (ErrNeedsAuth).
type Authorizer func(ctx context.Context, authURL string) (*url.URL, error)

// Config configures a Client for one MCP server connection.
type Config struct {
	// ServerURL is the MCP endpoint (the protected resource).
	ServerURL string
	// Grant is authorization_code (default), client_credentials or
	// refresh_token.
	Grant string
	// ClientID and ClientSecret of a pre-registered client ("" = register
	// dynamically, or use ClientMetadataURL).
	ClientID, ClientSecret string
	// AuthMethod forces the token_endpoint_auth_method ("" = chosen from
	// the registration and the server's metadata).
	AuthMethod string
	// ClientMetadataURL is the https URL of the catalog's client ID
	// metadata document, used as client_id where the authorization server
	// supports it ("" = not used).
	ClientMetadataURL string
	// ClientName is sent in dynamic registration (default "Toolplane").
	ClientName string
	// RedirectURI receives the authorization code (server.public_url +
	// /oauth/callback in the catalog).
	RedirectURI string
	// Scopes, when set, replace the scopes chosen from the challenge and
	// the metadata.
	Scopes []string
	// PrivateKeyPEM and SigningAlg: authenticate with private_key_jwt
	// (RFC 7523) instead of a secret.
	PrivateKeyPEM []byte
	SigningAlg    string
	// TokenURL skips discovery: the token endpoint of a machine-to-machine
	// grant (DeerFlow's token_url).
	TokenURL string
	// RefreshToken seeds the refresh_token grant.
	RefreshToken string
	// Audience is sent as `audience` on machine-to-machine token requests.
	Audience string
	// ExtraTokenParams are added to every token request.
	ExtraTokenParams map[string]string
	// Fields names the members of the token response.
	Fields TokenFields
	// RefreshSkew: refresh this long before expiry (default 60 s).
	RefreshSkew time.Duration
	// HTTPClient talks to the authorization server (default: 30 s timeout).
	HTTPClient *http.Client
	// Store keeps tokens and clients (default: in memory).
	Store Store
	// Authorize is the browser step (nil: ErrNeedsAuth instead).
	Authorize Authorizer
	// LoginTTL bounds a pending login (default 10 min).
	LoginTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Client obtains, refreshes and applies tokens for one connection. Safe for
// concurrent use; refreshes and logins are serialised.
type Client struct {
	cfg Config
	key any

	mu        sync.Mutex // guards the fields below
	disc      *Discovery
	requested []string // scopes asked for by the last login
	pending   map[string]*PendingLogin

	tokenMu sync.Mutex // serialises refreshes and grants
}

// New returns a Client; the configuration is checked here.
func New(cfg Config) (*Client, error) {
	if cfg.Grant == "" {
		cfg.Grant = GrantAuthorizationCode
	}
	switch cfg.Grant {
	case GrantAuthorizationCode, GrantClientCredentials, GrantRefreshToken:
	default:
		return nil, fmt.Errorf("grant_type %q: want authorization_code, client_credentials or refresh_token", cfg.Grant)
	}
	if cfg.Grant == GrantRefreshToken && cfg.RefreshToken == "" {
		return nil, errors.New("refresh_token: required for grant_type refresh_token")
	}
	if cfg.Grant != GrantAuthorizationCode && cfg.ClientID == "" && cfg.Grant == GrantClientCredentials {
		return nil, errors.New("client_id: required for grant_type client_credentials")
	}
	if cfg.TokenURL != "" {
		if u, err := url.Parse(cfg.TokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("token_url %q: not an http(s) URL", cfg.TokenURL)
		}
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "Toolplane"
	}
	if cfg.RefreshSkew <= 0 {
		cfg.RefreshSkew = 60 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Store == nil {
		cfg.Store = NewMemoryStore()
	}
	if cfg.LoginTTL <= 0 {
		cfg.LoginTTL = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Client{cfg: cfg, pending: map[string]*PendingLogin{}}
	if len(cfg.PrivateKeyPEM) > 0 {
		if cfg.SigningAlg == "" {
			cfg.SigningAlg = "ES256"
			c.cfg.SigningAlg = "ES256"
		}
		k, err := parseSigningKey(cfg.PrivateKeyPEM, cfg.SigningAlg)
		if err != nil {
			return nil, fmt.Errorf("private key: %w", err)
		}
		c.key = k
	}
	return c, nil
}

// Discovery returns what was discovered so far (nil before the first 401).
func (c *Client) Discovery() *Discovery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.disc
}

// discover runs Discover once per challenge that names new metadata.
func (c *Client) discover(ctx context.Context, ch *Challenge) (*Discovery, error) {
	c.mu.Lock()
	d := c.disc
	c.mu.Unlock()
	if d != nil && (ch == nil || ch.ResourceMetadata() == "" || ch.ResourceMetadata() == d.ResourceMetadataURL) {
		return d, nil
	}
	d, err := Discover(ctx, c.cfg.HTTPClient, c.cfg.ServerURL, ch)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.disc = d
	c.mu.Unlock()
	return d, nil
}

// Token returns a usable token, refreshing one that expires within the skew
// and running a machine-to-machine grant when there is none. nil, nil: no
// token (the authorization flow needs a login first).
func (c *Client) Token(ctx context.Context) (*transport.Token, error) {
	tok, err := c.stored(ctx)
	if err != nil {
		return nil, err
	}
	if tok != nil && !c.expiring(tok) {
		return tok, nil
	}
	if tok == nil && c.cfg.Grant == GrantAuthorizationCode {
		return nil, nil
	}
	if tok == nil && c.cfg.TokenURL == "" && c.Discovery() == nil {
		// Machine-to-machine with discovery: wait for the first 401.
		return nil, nil
	}
	return c.renew(ctx, tok)
}

func (c *Client) stored(ctx context.Context) (*transport.Token, error) {
	tok, err := c.cfg.Store.GetToken(ctx)
	if errors.Is(err, transport.ErrNoToken) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	return tok, nil
}

func (c *Client) expiring(t *transport.Token) bool {
	return !t.ExpiresAt.IsZero() && !c.cfg.Now().Add(c.cfg.RefreshSkew).Before(t.ExpiresAt)
}

// renew replaces old (nil or expiring or rejected by the server): a refresh
// when it has a refresh token, else the configured machine grant. Only one
// renewal runs at a time; a caller that waited gets the token the other got.
func (c *Client) renew(ctx context.Context, old *transport.Token) (*transport.Token, error) {
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	l, ok := c.cfg.Store.(Locker)
	if !ok {
		return c.renewLocked(ctx, old)
	}
	var tok *transport.Token
	err := l.LockToken(ctx, func(ctx context.Context) error {
		var err error
		tok, err = c.renewLocked(ctx, old)
		return err
	})
	return tok, err
}

// renewLocked is renew with the connection's lock held.
func (c *Client) renewLocked(ctx context.Context, old *transport.Token) (*transport.Token, error) {
	cur, err := c.stored(ctx)
	if err != nil {
		return nil, err
	}
	if cur != nil && (old == nil || cur.AccessToken != old.AccessToken) && !c.expiring(cur) {
		return cur, nil // renewed meanwhile
	}
	if cur != nil && cur.RefreshToken != "" {
		tok, err := c.refresh(ctx, cur)
		if err == nil {
			return tok, nil
		}
		var te *TokenError
		if !errors.As(err, &te) || te.Status >= 500 {
			if !cur.IsExpired() {
				return cur, nil // keep the still-valid token; retry next time
			}
			return nil, err
		}
		// The refresh token was rejected (revoked, expired, rotated away):
		// it is never sent again.
		_ = c.cfg.Store.DeleteToken(ctx)
		if c.cfg.Grant == GrantAuthorizationCode {
			return nil, &NeedsAuthError{Reason: "the authorization server rejected the refresh token (" + te.Code + ")"}
		}
	}
	switch c.cfg.Grant {
	case GrantClientCredentials:
		return c.clientCredentials(ctx)
	case GrantRefreshToken:
		if cur == nil || cur.RefreshToken == "" {
			tok, err := c.refresh(ctx, &transport.Token{RefreshToken: c.cfg.RefreshToken})
			var te *TokenError
			if errors.As(err, &te) && te.Status < 500 {
				return nil, &NeedsAuthError{Reason: "the authorization server rejected the configured refresh token (" + te.Code + ")"}
			}
			return tok, err
		}
		return nil, &NeedsAuthError{Reason: "the refresh token was rejected"}
	}
	if cur == nil {
		return nil, nil
	}
	if cur.IsExpired() {
		return nil, &NeedsAuthError{Reason: "the access token expired and there is no refresh token"}
	}
	return cur, nil
}

// endpoint returns the token endpoint and the issuer (for assertions).
func (c *Client) endpoint(ctx context.Context) (token, issuer string, md *ServerMetadata, err error) {
	if c.cfg.TokenURL != "" {
		return c.cfg.TokenURL, c.cfg.TokenURL, nil, nil
	}
	d, err := c.discover(ctx, nil)
	if err != nil {
		return "", "", nil, err
	}
	return d.Metadata.TokenEndpoint, d.Metadata.Issuer, &d.Metadata, nil
}

func (c *Client) resource() string {
	if d := c.Discovery(); d != nil {
		return d.Resource
	}
	return ""
}

// auth picks the client authentication for reg against md.
func (c *Client) auth(reg Registration, md *ServerMetadata, issuer string) clientAuth {
	ca := clientAuth{id: reg.ClientID, secret: reg.ClientSecret, method: reg.AuthMethod, aud: issuer}
	if c.key != nil {
		ca.key, ca.alg = c.key, c.cfg.SigningAlg
		if ca.method == "" {
			ca.method = AuthPrivateKeyJWT
		}
	}
	if ca.method == "" && c.cfg.AuthMethod != "" {
		ca.method = c.cfg.AuthMethod
	}
	if ca.method == "" {
		switch {
		case reg.ClientSecret == "":
			ca.method = AuthNone
		case md == nil:
			ca.method = AuthClientSecretBasic
		default:
			sup := md.TokenEndpointAuthMethodsSupported
			if slices.Contains(sup, AuthClientSecretBasic) || len(sup) == 0 {
				ca.method = AuthClientSecretBasic
			} else {
				ca.method = AuthClientSecretPost
			}
		}
	}
	return ca
}

func (c *Client) commonParams(form url.Values) {
	if r := c.resource(); r != "" {
		form.Set("resource", r)
	}
	if c.cfg.Audience != "" {
		form.Set("audience", c.cfg.Audience)
	}
	for k, v := range c.cfg.ExtraTokenParams {
		if form.Get(k) == "" {
			form.Set(k, v)
		}
	}
}

func (c *Client) refresh(ctx context.Context, old *transport.Token) (*transport.Token, error) {
	ep, issuer, md, err := c.endpoint(ctx)
	if err != nil {
		return nil, err
	}
	reg, err := c.registration(ctx, issuer, md, false)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {old.RefreshToken}}
	if c.cfg.Grant != GrantAuthorizationCode && len(c.cfg.Scopes) > 0 {
		form.Set("scope", strings.Join(c.cfg.Scopes, " "))
	}
	c.commonParams(form)
	tok, err := tokenRequest(ctx, c.cfg.HTTPClient, ep, form, c.auth(*reg, md, issuer), c.cfg.Fields, c.cfg.Now())
	if err != nil {
		return nil, err
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = old.RefreshToken // RFC 6749 §6: the old one stays valid
	}
	if tok.Scope == "" {
		tok.Scope = old.Scope
	}
	if err := c.cfg.Store.SaveToken(ctx, tok); err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	return tok, nil
}

func (c *Client) clientCredentials(ctx context.Context) (*transport.Token, error) {
	ep, issuer, md, err := c.endpoint(ctx)
	if err != nil {
		return nil, err
	}
	reg := Registration{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, AuthMethod: c.cfg.AuthMethod}
	form := url.Values{"grant_type": {"client_credentials"}}
	if s := c.scopes(nil); len(s) > 0 {
		form.Set("scope", strings.Join(s, " "))
	}
	c.commonParams(form)
	tok, err := tokenRequest(ctx, c.cfg.HTTPClient, ep, form, c.auth(reg, md, issuer), c.cfg.Fields, c.cfg.Now())
	if err != nil {
		var te *TokenError
		if errors.As(err, &te) && (te.Code == "invalid_client" || te.Code == "unauthorized_client") {
			// A wrong credential does not get better by retrying.
			return nil, &NeedsAuthError{Reason: "the authorization server rejected the client credentials (" + te.Code + ")"}
		}
		return nil, err
	}
	if err := c.cfg.Store.SaveToken(ctx, tok); err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	return tok, nil
}

// scopes chooses the scopes to ask for (MCP 2025-11-25 §"Scope Selection
// Strategy"): the configured ones; else the challenge's scope; else the
// protected resource's scopes_supported; else none (the parameter is
// omitted). offline_access is added for the authorization code grant when
// the authorization server lists it (SEP-2207), so a refresh token is issued.
func (c *Client) scopes(ch *Challenge) []string {
	var s []string
	d := c.Discovery()
	switch {
	case len(c.cfg.Scopes) > 0:
		s = append(s, c.cfg.Scopes...)
	case ch != nil && len(ch.Scope()) > 0:
		s = ch.Scope()
	case d != nil && d.PRM != nil && len(d.PRM.ScopesSupported) > 0:
		s = append(s, d.PRM.ScopesSupported...)
	}
	if c.cfg.Grant == GrantAuthorizationCode && len(s) > 0 && d != nil &&
		slices.Contains(d.Metadata.ScopesSupported, "offline_access") && !slices.Contains(s, "offline_access") {
		s = append(s, "offline_access")
	}
	return s
}

// registration returns the client to use with issuer: the configured one,
// else one registered before, else (register true) a client ID metadata
// document URL or a dynamic registration (RFC 7591).
func (c *Client) registration(ctx context.Context, issuer string, md *ServerMetadata, register bool) (*Registration, error) {
	if c.cfg.ClientID != "" {
		return &Registration{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, AuthMethod: c.cfg.AuthMethod, RedirectURI: c.cfg.RedirectURI}, nil
	}
	reg, err := c.cfg.Store.GetClient(ctx, issuer)
	if err == nil && (reg.RedirectURI == "" || reg.RedirectURI == c.cfg.RedirectURI) {
		return reg, nil
	}
	if err != nil && !errors.Is(err, ErrNoClient) {
		return nil, fmt.Errorf("client store: %w", err)
	}
	if !register {
		return nil, &NeedsAuthError{Reason: "no client is registered with " + issuer}
	}
	if md != nil && md.ClientIDMetadataDocumentSupported && c.cfg.ClientMetadataURL != "" {
		return &Registration{ClientID: c.cfg.ClientMetadataURL, AuthMethod: AuthNone, RedirectURI: c.cfg.RedirectURI}, nil
	}
	if md == nil || md.RegistrationEndpoint == "" {
		return nil, fmt.Errorf("authorization server %s supports neither dynamic client registration nor client ID metadata documents: configure oauth.client_id", issuer)
	}
	reg, err = c.register(ctx, md)
	if err != nil {
		return nil, err
	}
	if err := c.cfg.Store.SaveClient(ctx, issuer, reg); err != nil {
		return nil, fmt.Errorf("client store: %w", err)
	}
	return reg, nil
}

// register performs RFC 7591 dynamic client registration.
func (c *Client) register(ctx context.Context, md *ServerMetadata) (*Registration, error) {
	method := AuthNone
	if sup := md.TokenEndpointAuthMethodsSupported; len(sup) > 0 && !slices.Contains(sup, AuthNone) {
		if slices.Contains(sup, AuthClientSecretBasic) {
			method = AuthClientSecretBasic
		} else if slices.Contains(sup, AuthClientSecretPost) {
			method = AuthClientSecretPost
		}
	}
	body := map[string]any{
		"client_name":                c.cfg.ClientName,
		"redirect_uris":              []string{c.cfg.RedirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": method,
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, md.RegistrationEndpoint, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("registration endpoint: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("dynamic client registration: %w", redactURLError(err))
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
			Desc  string `json:"error_description"`
		}
		_ = json.Unmarshal(rb, &e)
		return nil, fmt.Errorf("dynamic client registration: status %d %s %s", resp.StatusCode, e.Error, cut(e.Desc, 200))
	}
	var r struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(rb, &r); err != nil || r.ClientID == "" {
		return nil, errors.New("dynamic client registration: the answer has no client_id")
	}
	if r.AuthMethod == "" {
		r.AuthMethod = method
		if r.ClientSecret != "" && method == AuthNone {
			r.AuthMethod = AuthClientSecretBasic
		}
	}
	return &Registration{ClientID: r.ClientID, ClientSecret: r.ClientSecret, AuthMethod: r.AuthMethod, RedirectURI: c.cfg.RedirectURI}, nil
}

// StartLogin begins the authorization code flow (PKCE S256, RFC 8707
// resource) for the scopes the challenge asks for (plus those asked for
// before: step-up never drops a scope) and returns the URL to send the user
// to. The pending login is single use and expires after LoginTTL.
func (c *Client) StartLogin(ctx context.Context, ch *Challenge) (string, error) {
	if c.cfg.Grant != GrantAuthorizationCode {
		return "", fmt.Errorf("grant_type %s has no login", c.cfg.Grant)
	}
	if c.cfg.RedirectURI == "" {
		return "", errors.New("no redirect URI: set catalog.oauth.public_url")
	}
	d, err := c.discover(ctx, ch)
	if err != nil {
		return "", err
	}
	md := &d.Metadata
	if md.AuthorizationEndpoint == "" {
		return "", fmt.Errorf("authorization server %s has no authorization_endpoint", d.Issuer)
	}
	// MCP 2025-11-25 §"Authorization Code Protection": without S256 in the
	// metadata the server does not do PKCE, and the client must not go on.
	if !d.Fallback && !slices.Contains(md.CodeChallengeMethodsSupported, "S256") {
		return "", fmt.Errorf("authorization server %s does not support PKCE S256", d.Issuer)
	}
	reg, err := c.registration(ctx, md.Issuer, md, true)
	if err != nil {
		return "", err
	}
	scopes := c.scopes(ch)
	c.mu.Lock()
	for _, s := range c.requested {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	c.requested = scopes
	c.mu.Unlock()
	verifier, err := transport.GenerateCodeVerifier()
	if err != nil {
		return "", err
	}
	state, err := transport.GenerateState()
	if err != nil {
		return "", err
	}
	q := url.Values{"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {c.cfg.RedirectURI},
		"state": {state}, "code_challenge": {transport.GenerateCodeChallenge(verifier)}, "code_challenge_method": {"S256"}}
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	if d.Resource != "" {
		q.Set("resource", d.Resource)
	}
	now := c.cfg.Now()
	pl := &PendingLogin{Verifier: verifier, Redirect: c.cfg.RedirectURI, Resource: d.Resource, ResourceMetadata: d.ResourceMetadataURL,
		Reg: *reg, Scopes: scopes, Expires: now.Add(c.cfg.LoginTTL)}
	if ps, ok := c.cfg.Store.(PendingStore); ok {
		if err := ps.SavePending(ctx, state, pl); err != nil {
			return "", fmt.Errorf("token store: %w", err)
		}
	} else {
		c.mu.Lock()
		for k, p := range c.pending {
			if now.After(p.Expires) {
				delete(c.pending, k)
			}
		}
		c.pending[state] = pl
		c.mu.Unlock()
	}
	sep := "?"
	if strings.Contains(md.AuthorizationEndpoint, "?") {
		sep = "&"
	}
	return md.AuthorizationEndpoint + sep + q.Encode(), nil
}

// Grant is the client's grant type.
func (c *Client) Grant() string { return c.cfg.Grant }

// TokenInfo reports whether a token is held and when it expires (zero: no
// expiry). It never returns the token.
func (c *Client) TokenInfo(ctx context.Context) (held bool, expires time.Time, err error) {
	t, err := c.stored(ctx)
	if err != nil || t == nil {
		return false, time.Time{}, err
	}
	return true, t.ExpiresAt, nil
}

// LoginTTL is how long a pending login stays valid.
func (c *Client) LoginTTL() time.Duration { return c.cfg.LoginTTL }

// HasPendingLogin reports whether state is a pending, unexpired login of c.
func (c *Client) HasPendingLogin(state string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[state]
	return state != "" && p != nil && !c.cfg.Now().After(p.Expires)
}

// CompleteLogin finishes a login from the query of the redirect back
// (code and state, or error): the state must be a pending login's, once,
// before it expires; the code is exchanged with the PKCE verifier and the
// resource indicator, and the token stored.
func (c *Client) CompleteLogin(ctx context.Context, q url.Values) error {
	state := q.Get("state")
	var p *PendingLogin
	if ps, ok := c.cfg.Store.(PendingStore); ok && state != "" && len(state) <= MaxStateBytes {
		var err error
		if p, err = ps.TakePending(ctx, state); err != nil {
			return fmt.Errorf("oauth callback: token store: %w", err)
		}
	} else if !ok {
		c.mu.Lock()
		p = c.pending[state]
		delete(c.pending, state)
		c.mu.Unlock()
	}
	if state == "" || p == nil {
		return errors.New("oauth callback: unknown or already used state")
	}
	if c.cfg.Now().After(p.Expires) {
		return errors.New("oauth callback: the login expired; start it again")
	}
	if e := q.Get("error"); e != "" {
		return fmt.Errorf("oauth callback: the authorization server answered %s: %s", e, cut(q.Get("error_description"), 200))
	}
	code := q.Get("code")
	if code == "" {
		return errors.New("oauth callback: no code")
	}
	d := c.Discovery()
	if d == nil {
		// The login was started by another replica: discover from the
		// metadata URL it found.
		var ch *Challenge
		if p.ResourceMetadata != "" {
			ch = &Challenge{Scheme: "bearer", Params: map[string]string{"resource_metadata": p.ResourceMetadata}}
		}
		var err error
		if d, err = c.discover(ctx, ch); err != nil {
			return fmt.Errorf("oauth callback: discovery: %w", err)
		}
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {p.Redirect}, "code_verifier": {p.Verifier}}
	if p.Resource != "" {
		form.Set("resource", p.Resource)
	}
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	tok, err := tokenRequest(ctx, c.cfg.HTTPClient, d.Metadata.TokenEndpoint, form, c.auth(p.Reg, &d.Metadata, d.Metadata.Issuer), c.cfg.Fields, c.cfg.Now())
	if err != nil {
		return err
	}
	if tok.Scope == "" {
		tok.Scope = strings.Join(p.Scopes, " ")
	}
	if err := c.cfg.Store.SaveToken(ctx, tok); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	return nil
}

// Login runs the whole authorization code flow with the Authorizer.
func (c *Client) Login(ctx context.Context, ch *Challenge) error {
	if c.cfg.Authorize == nil && c.cfg.RedirectURI == "" {
		if _, err := c.discover(ctx, ch); err != nil {
			return err
		}
		return &NeedsAuthError{Reason: "a login is required but none is possible: set catalog.oauth.public_url"}
	}
	authURL, err := c.StartLogin(ctx, ch)
	if err != nil {
		return err
	}
	if c.cfg.Authorize == nil {
		return &NeedsAuthError{Reason: "not authorised yet: connect the server (an admin for a shared server, each user for a per_user one)"}
	}
	back, err := c.cfg.Authorize(ctx, authURL)
	if err != nil {
		return fmt.Errorf("authorization: %w", err)
	}
	return c.CompleteLogin(ctx, back.Query())
}

// Revoke revokes the stored tokens at the authorization server (RFC 7009,
// when it has a revocation_endpoint) and deletes them.
func (c *Client) Revoke(ctx context.Context) error {
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	if l, ok := c.cfg.Store.(Locker); ok {
		return l.LockToken(ctx, c.revokeLocked)
	}
	return c.revokeLocked(ctx)
}

// revokeLocked is Revoke with the connection's lock held.
func (c *Client) revokeLocked(ctx context.Context) error {
	tok, err := c.stored(ctx)
	if err != nil || tok == nil {
		return err
	}
	var rerr error
	if d := c.Discovery(); d != nil && d.Metadata.RevocationEndpoint != "" {
		reg, err := c.registration(ctx, d.Metadata.Issuer, &d.Metadata, false)
		if err == nil {
			for _, t := range []struct{ v, hint string }{{tok.RefreshToken, "refresh_token"}, {tok.AccessToken, "access_token"}} {
				if t.v == "" {
					continue
				}
				if e := revoke(ctx, c.cfg.HTTPClient, d.Metadata.RevocationEndpoint, t.v, t.hint, c.auth(*reg, &d.Metadata, d.Metadata.Issuer)); e != nil && rerr == nil {
					rerr = e
				}
			}
		}
	}
	if err := c.cfg.Store.DeleteToken(ctx); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	return rerr
}

func revoke(ctx context.Context, hc *http.Client, endpoint, token, hint string, ca clientAuth) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	switch ca.method {
	case AuthClientSecretPost:
		form.Set("client_id", ca.id)
		form.Set("client_secret", ca.secret)
	case AuthClientSecretBasic:
	default:
		form.Set("client_id", ca.id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if ca.method == AuthClientSecretBasic {
		req.SetBasicAuth(url.QueryEscape(ca.id), url.QueryEscape(ca.secret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("revocation: %w", redactURLError(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocBytes))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revocation: status %d", resp.StatusCode)
	}
	return nil
}

// MemoryStore is a Store in memory (tests, the conformance client).
type MemoryStore struct {
	mu      sync.Mutex
	token   *transport.Token
	clients map[string]Registration
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{clients: map[string]Registration{}} }

// GetToken implements transport.TokenStore.
func (m *MemoryStore) GetToken(ctx context.Context) (*transport.Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.token == nil {
		return nil, transport.ErrNoToken
	}
	t := *m.token
	return &t, nil
}

// SaveToken implements transport.TokenStore.
func (m *MemoryStore) SaveToken(ctx context.Context, t *transport.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cp := *t
	m.token = &cp
	return nil
}

// DeleteToken implements Store.
func (m *MemoryStore) DeleteToken(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.token = nil
	return nil
}

// GetClient implements Store.
func (m *MemoryStore) GetClient(ctx context.Context, issuer string) (*Registration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.clients[issuer]
	if !ok {
		return nil, ErrNoClient
	}
	return &r, nil
}

// SaveClient implements Store.
func (m *MemoryStore) SaveClient(ctx context.Context, issuer string, r *Registration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clients[issuer] = *r
	return nil
}

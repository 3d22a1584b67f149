package catalogconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
)

// OAuth grant types of a server's `oauth` block.
const (
	// GrantAuthorizationCode is the MCP authorization flow: a user (shared
	// servers: an admin) logs in; the catalog discovers the authorization
	// server from the MCP server's 401 (docs/architecture.md §10.6).
	GrantAuthorizationCode = "authorization_code"
	// GrantClientCredentials is DeerFlow's machine-to-machine grant.
	GrantClientCredentials = "client_credentials"
	// GrantRefreshToken is DeerFlow's configured-refresh-token grant.
	GrantRefreshToken = "refresh_token"
)

// OAuth is a server's `oauth` block: DeerFlow's fields (docs/deerflow.md
// §5.9) plus `grant_type: authorization_code` for the MCP authorization
// flow. It stays in Server.Extra (written back byte for byte, masked
// wholesale); ParseOAuth reads it.
type OAuth struct {
	// Enabled defaults to true when the block is present.
	Enabled *bool `json:"enabled,omitempty"`
	// TokenURL is the token endpoint (required for client_credentials and
	// refresh_token; with authorization_code it is discovered).
	TokenURL string `json:"token_url,omitempty"`
	// GrantType is client_credentials | refresh_token | authorization_code
	// (default client_credentials with a token_url, authorization_code
	// without).
	GrantType string `json:"grant_type,omitempty"`
	// ClientID and ClientSecret of a registered client (secret: a ${VAR}
	// reference).
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	// RefreshToken seeds the refresh_token grant (a ${VAR} reference).
	RefreshToken string `json:"refresh_token,omitempty"`
	// Scope is space-separated; Audience is sent as `audience`.
	Scope    string `json:"scope,omitempty"`
	Audience string `json:"audience,omitempty"`
	// TokenField, TokenTypeField and ExpiresInField name the members of the
	// token response (defaults access_token, token_type, expires_in);
	// DefaultTokenType is used when it has no type (default Bearer).
	TokenField       string `json:"token_field,omitempty"`
	TokenTypeField   string `json:"token_type_field,omitempty"`
	ExpiresInField   string `json:"expires_in_field,omitempty"`
	DefaultTokenType string `json:"default_token_type,omitempty"`
	// RefreshSkewSeconds: refresh this long before expiry (default 60).
	RefreshSkewSeconds *float64 `json:"refresh_skew_seconds,omitempty"`
	// ExtraTokenParams are added to every token request; the reserved
	// fields override them.
	ExtraTokenParams map[string]string `json:"extra_token_params,omitempty"`
}

// IsEnabled reports `enabled` (default true).
func (o *OAuth) IsEnabled() bool { return o.Enabled == nil || *o.Enabled }

// EffectiveGrant is the grant type with its default.
func (o *OAuth) EffectiveGrant() string {
	switch {
	case o.GrantType != "":
		return o.GrantType
	case o.TokenURL != "":
		return GrantClientCredentials
	}
	return GrantAuthorizationCode
}

// RefreshSkew is refresh_skew_seconds as a duration (default 60 s).
func (o *OAuth) RefreshSkew() time.Duration {
	if o.RefreshSkewSeconds == nil {
		return 60 * time.Second
	}
	return time.Duration(*o.RefreshSkewSeconds * float64(time.Second))
}

// Scopes is Scope split on spaces.
func (o *OAuth) Scopes() []string { return strings.Fields(o.Scope) }

var wholeVarRef = regexp.MustCompile(`^\$\{?[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}?$`)

// isVarRef: the whole value is one $VAR or ${VAR} reference.
func isVarRef(v string) bool {
	if !wholeVarRef.MatchString(v) {
		return false
	}
	return strings.HasPrefix(v, "${") == strings.HasSuffix(v, "}")
}

// ParseOAuth reads and validates s's `oauth` block (nil, nil when there is
// none). Errors name the field: `mcpServers.NAME.oauth.FIELD: reason`.
// Secrets (client_secret, refresh_token, and extra_token_params values
// under a secret-like key) must be ${VAR} references: the catalog writes
// the file back, and a literal secret would be copied around with it.
func (s *Server) ParseOAuth() (*OAuth, error) {
	var raw json.RawMessage
	for _, f := range s.Extra {
		if f.Key == "oauth" {
			raw = f.Value
		}
	}
	if raw == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	field := func(f string, format string, a ...any) error {
		return fmt.Errorf("mcpServers.%s.oauth%s: %s", s.Name, f, fmt.Sprintf(format, a...))
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	var o OAuth
	if err := d.Decode(&o); err != nil {
		msg := err.Error()
		if strings.HasPrefix(msg, "json: unknown field ") {
			return nil, field("."+strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`), "unknown key")
		}
		var te *json.UnmarshalTypeError
		if ok := asTypeError(err, &te); ok && te.Field != "" {
			return nil, field("."+te.Field, "want %s, got JSON %s", te.Type, te.Value)
		}
		return nil, field("", "not an object: %v", err)
	}
	if !o.IsEnabled() {
		return &o, nil
	}
	if t := s.EffectiveType(); t != TypeHTTP && t != TypeSSE {
		return nil, field("", "only sse and http servers authenticate with OAuth (type is %s)", t)
	}
	switch o.EffectiveGrant() {
	case GrantClientCredentials:
		if o.ClientID == "" {
			return nil, field(".client_id", "required for grant_type client_credentials")
		}
		if o.ClientSecret == "" {
			return nil, field(".client_secret", "required for grant_type client_credentials")
		}
	case GrantRefreshToken:
		if o.RefreshToken == "" {
			return nil, field(".refresh_token", "required for grant_type refresh_token")
		}
	case GrantAuthorizationCode:
	default:
		return nil, field(".grant_type", "%q: want client_credentials, refresh_token or authorization_code", o.GrantType)
	}
	if o.EffectiveGrant() != GrantAuthorizationCode && o.TokenURL == "" {
		return nil, field(".token_url", "required for grant_type %s", o.EffectiveGrant())
	}
	if o.TokenURL != "" && !strings.Contains(o.TokenURL, "$") {
		if u, err := url.Parse(o.TokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, field(".token_url", "%q is not an http(s) URL", o.TokenURL)
		}
	}
	for name, v := range map[string]string{"client_secret": o.ClientSecret, "refresh_token": o.RefreshToken} {
		if v != "" && !isVarRef(v) {
			return nil, field("."+name, "must be a ${VAR} reference to an environment variable, not the secret itself")
		}
	}
	keys := make([]string, 0, len(o.ExtraTokenParams))
	for k := range o.ExtraTokenParams {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if IsSecretKey(k) && !isVarRef(o.ExtraTokenParams[k]) {
			return nil, field(".extra_token_params."+k, "must be a ${VAR} reference to an environment variable, not the secret itself")
		}
	}
	if o.RefreshSkewSeconds != nil && (*o.RefreshSkewSeconds < 0 || math.IsNaN(*o.RefreshSkewSeconds) || *o.RefreshSkewSeconds > 86400) {
		return nil, field(".refresh_skew_seconds", "want 0..86400, got %v", *o.RefreshSkewSeconds)
	}
	return &o, nil
}

func asTypeError(err error, target **json.UnmarshalTypeError) bool {
	te, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*target = te
	}
	return ok
}

// ExpandOAuth returns o with $VAR references expanded in every string that
// reaches the authorization server (see Expand); an unset variable is a
// *MissingVarError naming the field.
func ExpandOAuth(o OAuth, server string, lookup func(string) (string, bool)) (OAuth, error) {
	var err error
	ex := func(field, v string) string {
		if err != nil {
			return v
		}
		r, e := ExpandString(v, lookup)
		switch x := e.(type) {
		case nil:
		case *MissingVarError:
			c := *x
			c.Server, c.Field = server, "oauth."+field
			err = &c
		case *SyntaxError:
			// e.g. `${X:=y}`: an error naming the field, never a panic.
			c := *x
			c.Server, c.Field = server, "oauth."+field
			err = &c
		default:
			err = fmt.Errorf("mcpServers.%s.oauth.%s: %w", server, field, e)
		}
		return r
	}
	o.TokenURL = ex("token_url", o.TokenURL)
	o.ClientID = ex("client_id", o.ClientID)
	o.ClientSecret = ex("client_secret", o.ClientSecret)
	o.RefreshToken = ex("refresh_token", o.RefreshToken)
	o.Scope = ex("scope", o.Scope)
	o.Audience = ex("audience", o.Audience)
	if len(o.ExtraTokenParams) > 0 {
		m := make(map[string]string, len(o.ExtraTokenParams))
		for k, v := range o.ExtraTokenParams {
			m[k] = ex("extra_token_params."+k, v)
		}
		o.ExtraTokenParams = m
	}
	return o, err
}

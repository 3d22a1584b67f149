package catalogoauth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mark3labs/mcp-go/client/transport"
)

// Client authentication methods at the token endpoint (RFC 6749 §2.3.1,
// RFC 7591 §2, RFC 7523 §2.2).
const (
	AuthNone              = "none"
	AuthClientSecretBasic = "client_secret_basic"
	AuthClientSecretPost  = "client_secret_post"
	AuthPrivateKeyJWT     = "private_key_jwt"
)

// TokenError is an error answer of a token endpoint (RFC 6749 §5.2). Its
// text never carries a credential.
type TokenError struct {
	// Status is the HTTP status.
	Status int
	// Code is the error code (invalid_grant, invalid_client, ...), "" when
	// the body was not an OAuth error.
	Code string
	// Description is error_description, cut to 200 bytes.
	Description string
}

func (e *TokenError) Error() string {
	s := fmt.Sprintf("token endpoint answered %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}

// TokenFields names the members of a token response (DeerFlow's
// token_field, token_type_field, expires_in_field, default_token_type;
// docs/deerflow.md §5.1). Zero values are the RFC 6749 names and "Bearer".
type TokenFields struct {
	Token, TokenType, ExpiresIn, DefaultTokenType string
}

func (f TokenFields) withDefaults() TokenFields {
	if f.Token == "" {
		f.Token = "access_token"
	}
	if f.TokenType == "" {
		f.TokenType = "token_type"
	}
	if f.ExpiresIn == "" {
		f.ExpiresIn = "expires_in"
	}
	if f.DefaultTokenType == "" {
		f.DefaultTokenType = "Bearer"
	}
	return f
}

// clientAuth is how a token request authenticates the client.
type clientAuth struct {
	id, secret, method string
	// key signs private_key_jwt assertions; aud is their audience (the
	// authorization server's issuer).
	key    any
	alg    string
	aud    string
	header map[string]string
}

// tokenRequest posts form to endpoint with the client's authentication and
// parses the answer with fields. now stamps ExpiresAt.
func tokenRequest(ctx context.Context, hc *http.Client, endpoint string, form url.Values, ca clientAuth, fields TokenFields, now time.Time) (*transport.Token, error) {
	form = cloneValues(form)
	var basic bool
	switch ca.method {
	case AuthClientSecretBasic:
		basic = true
	case AuthClientSecretPost:
		form.Set("client_id", ca.id)
		form.Set("client_secret", ca.secret)
	case AuthPrivateKeyJWT:
		a, err := clientAssertion(ca, now)
		if err != nil {
			return nil, err
		}
		form.Set("client_id", ca.id)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", a)
	default:
		if ca.id != "" {
			form.Set("client_id", ca.id)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("token endpoint %q: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		// RFC 6749 §2.3.1: form-encode the id and secret before Basic.
		req.SetBasicAuth(url.QueryEscape(ca.id), url.QueryEscape(ca.secret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token endpoint: %w", redactURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return nil, fmt.Errorf("token endpoint: %w", err)
	}
	if len(body) > maxDocBytes {
		return nil, fmt.Errorf("token endpoint: answer larger than %d bytes", maxDocBytes)
	}
	var m map[string]any
	jerr := json.Unmarshal(body, &m)
	if resp.StatusCode < 200 || resp.StatusCode >= 300 || (jerr == nil && m["error"] != nil) {
		te := &TokenError{Status: resp.StatusCode}
		if jerr == nil {
			te.Code, _ = m["error"].(string)
			d, _ := m["error_description"].(string)
			te.Description = cut(d, 200)
		}
		return nil, te
	}
	if jerr != nil {
		return nil, fmt.Errorf("token endpoint: answer is not a JSON object")
	}
	f := fields.withDefaults()
	tok := &transport.Token{}
	tok.AccessToken, _ = lookupField(m, f.Token).(string)
	if tok.AccessToken == "" {
		return nil, fmt.Errorf("token endpoint: answer has no %q", f.Token)
	}
	tok.TokenType, _ = lookupField(m, f.TokenType).(string)
	if tok.TokenType == "" {
		tok.TokenType = f.DefaultTokenType
	}
	switch v := lookupField(m, f.ExpiresIn).(type) {
	case float64:
		tok.ExpiresIn = int64(v)
	case string:
		tok.ExpiresIn, _ = strconv.ParseInt(v, 10, 64)
	}
	if tok.ExpiresIn > 0 {
		tok.ExpiresAt = now.Add(time.Duration(tok.ExpiresIn) * time.Second)
	}
	tok.RefreshToken, _ = m["refresh_token"].(string)
	tok.Scope, _ = m["scope"].(string)
	return tok, nil
}

// lookupField reads a member by name, or by a dotted path into nested
// objects ("data.access_token") when there is no member of that name.
func lookupField(m map[string]any, name string) any {
	if v, ok := m[name]; ok {
		return v
	}
	var cur any = m
	for _, part := range strings.Split(name, ".") {
		o, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = o[part]
	}
	return cur
}

// clientAssertion signs an RFC 7523 §3 client assertion: iss and sub the
// client id, aud the authorization server, five minutes' validity.
func clientAssertion(ca clientAuth, now time.Time) (string, error) {
	var jti [16]byte
	_, _ = rand.Read(jti[:])
	claims := jwt.MapClaims{"iss": ca.id, "sub": ca.id, "aud": ca.aud, "iat": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(), "jti": hex.EncodeToString(jti[:])}
	m := jwt.GetSigningMethod(ca.alg)
	if m == nil {
		return "", fmt.Errorf("private_key_jwt: unsupported signing algorithm %q", ca.alg)
	}
	s, err := jwt.NewWithClaims(m, claims).SignedString(ca.key)
	if err != nil {
		return "", fmt.Errorf("private_key_jwt: signing: %w", err)
	}
	return s, nil
}

// parseSigningKey reads a PEM private key for alg (ES256/384/512, RS256/...,
// PS256/..., EdDSA).
func parseSigningKey(pem []byte, alg string) (any, error) {
	switch {
	case strings.HasPrefix(alg, "ES"):
		return jwt.ParseECPrivateKeyFromPEM(pem)
	case strings.HasPrefix(alg, "RS"), strings.HasPrefix(alg, "PS"):
		return jwt.ParseRSAPrivateKeyFromPEM(pem)
	case alg == "EdDSA":
		return jwt.ParseEdPrivateKeyFromPEM(pem)
	}
	return nil, fmt.Errorf("unsupported signing algorithm %q", alg)
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// redactURLError drops the URL from a *url.Error (a token endpoint URL may
// carry a query the operator considers secret).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Package catalogoauth is the catalog's OAuth 2.1 client for upstream MCP
// servers (docs/architecture.md §10.6): the MCP authorization flow of spec
// 2025-06-18 / 2025-11-25 (protected-resource metadata RFC 9728,
// authorization-server metadata RFC 8414 / OpenID discovery, dynamic client
// registration RFC 7591 or a client ID metadata document, authorization code
// with PKCE S256 and the RFC 8707 resource indicator, step-up on
// insufficient_scope, refresh before expiry and on 401), the 2025-03-26
// fallbacks, and the machine-to-machine grants (client_credentials with a
// client secret or private_key_jwt, and DeerFlow's refresh_token grant,
// docs/deerflow.md §5.1).
//
// It builds on mcp-go's OAuth types (transport.Token, transport.TokenStore,
// transport.AuthServerMetadata, the PKCE helpers); the orchestration — which
// token, when to refresh, when to ask for a login — is here, applied as an
// http.RoundTripper under mcp-go's SSE and streamable-HTTP transports.
package catalogoauth

import (
	"strings"
)

// Challenge is one WWW-Authenticate challenge (RFC 9110 §11.6.1).
type Challenge struct {
	// Scheme is the auth-scheme, lower-cased ("bearer").
	Scheme string
	// Params are the auth-params, names lower-cased.
	Params map[string]string
}

// ResourceMetadata is the RFC 9728 §5.1 resource_metadata parameter.
func (c Challenge) ResourceMetadata() string { return c.Params["resource_metadata"] }

// Scope is the scope parameter (RFC 6750 §3), split on spaces.
func (c Challenge) Scope() []string { return strings.Fields(c.Params["scope"]) }

// Error is the error parameter (RFC 6750 §3.1): invalid_token,
// insufficient_scope, ...
func (c Challenge) Error() string { return c.Params["error"] }

// BearerChallenge returns the first Bearer challenge among the values of
// WWW-Authenticate headers (ok false if there is none).
func BearerChallenge(values []string) (Challenge, bool) {
	for _, v := range values {
		for _, c := range ParseChallenges(v) {
			if c.Scheme == "bearer" {
				return c, true
			}
		}
	}
	return Challenge{}, false
}

// ParseChallenges parses one WWW-Authenticate header value, which may hold
// several comma-separated challenges. Malformed parts are skipped; a token68
// credential is ignored.
func ParseChallenges(v string) []Challenge {
	var out []Challenge
	p := &parser{s: v}
	for {
		p.skipSpaceComma()
		if p.done() {
			return out
		}
		scheme := p.token()
		if scheme == "" {
			p.i++ // not a token character: skip it
			continue
		}
		c := Challenge{Scheme: strings.ToLower(scheme), Params: map[string]string{}}
		// auth-params: name=value pairs separated by commas, until the next
		// token that is not followed by '='.
		for {
			p.skipSpace()
			save := p.i
			name := p.token()
			if name == "" {
				break
			}
			p.skipSpace()
			if p.done() || p.s[p.i] != '=' {
				p.i = save // the next challenge's scheme (or a token68)
				break
			}
			p.i++
			p.skipSpace()
			var val string
			if !p.done() && p.s[p.i] == '"' {
				val = p.quoted()
			} else {
				val = p.token68()
			}
			if _, dup := c.Params[strings.ToLower(name)]; !dup {
				c.Params[strings.ToLower(name)] = val
			}
			p.skipSpace()
			if !p.done() && p.s[p.i] == ',' {
				p.i++
				continue
			}
			break
		}
		out = append(out, c)
	}
}

type parser struct {
	s string
	i int
}

func (p *parser) done() bool { return p.i >= len(p.s) }

func (p *parser) skipSpace() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *parser) skipSpaceComma() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == ',') {
		p.i++
	}
}

func isTChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (p *parser) token() string {
	start := p.i
	for !p.done() && isTChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// token68 also accepts '/' and '=' (RFC 9110 §11.2), which unquoted
// parameter values in the wild use.
func (p *parser) token68() string {
	start := p.i
	for !p.done() && (isTChar(p.s[p.i]) || p.s[p.i] == '/' || p.s[p.i] == '=' || p.s[p.i] == ':') {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *parser) quoted() string {
	p.i++ // opening quote
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch c {
		case '\\':
			if !p.done() {
				b.WriteByte(p.s[p.i])
				p.i++
			}
		case '"':
			return b.String()
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

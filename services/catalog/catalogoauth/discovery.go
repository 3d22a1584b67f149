package catalogoauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/mark3labs/mcp-go/client/transport"
)

// maxDocBytes bounds every metadata, registration and token response read.
const maxDocBytes = 1 << 20

// ProtectedResource is RFC 9728 protected-resource metadata.
type ProtectedResource struct {
	// Resource is the protected resource's identifier.
	Resource string `json:"resource"`
	// AuthorizationServers are issuer URLs.
	AuthorizationServers []string `json:"authorization_servers"`
	// ScopesSupported are the scopes the resource understands.
	ScopesSupported []string `json:"scopes_supported,omitempty"`
}

// ServerMetadata is RFC 8414 authorization-server metadata (or OpenID
// provider metadata) with the client ID metadata document flag of MCP
// 2025-11-25.
type ServerMetadata struct {
	transport.AuthServerMetadata
	// ClientIDMetadataDocumentSupported: the server accepts an https URL as
	// client_id (draft-ietf-oauth-client-id-metadata-document).
	ClientIDMetadataDocumentSupported bool `json:"client_id_metadata_document_supported,omitempty"`
}

// Discovery is what the catalog learnt about an MCP server's authorization.
type Discovery struct {
	// ServerURL is the MCP endpoint addressed.
	ServerURL string
	// Resource is the RFC 8707 resource indicator to send: the protected
	// resource metadata's resource, or the canonical server URL.
	Resource string
	// ResourceMetadataURL is where the protected-resource metadata came from
	// ("" in the 2025-03-26 fallback).
	ResourceMetadataURL string
	// PRM is the protected-resource metadata (nil in the 2025-03-26 fallback).
	PRM *ProtectedResource
	// Issuer is the authorization server chosen.
	Issuer string
	// Metadata is its metadata (the default endpoints when it publishes none).
	Metadata ServerMetadata
	// Fallback: neither kind of metadata was found and Metadata holds the
	// 2025-03-26 default endpoints.
	Fallback bool
}

// ErrResourceMismatch: the protected-resource metadata names a resource that
// is not the server addressed (RFC 9728 §3.3); the client must not proceed.
var ErrResourceMismatch = errors.New("protected resource metadata names another resource")

// CanonicalResource is the RFC 8707 / MCP canonical URI of an MCP server URL:
// lower-case scheme and host, no fragment, no trailing slash on a bare path.
func CanonicalResource(serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("server url %q is not an absolute URL", serverURL)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	u.Fragment, u.RawFragment = "", ""
	if u.Path == "/" {
		u.Path, u.RawPath = "", ""
	}
	return u.String(), nil
}

// Discover finds the authorization server of the MCP server at serverURL
// (MCP authorization 2025-11-25 §"Authorization Server Discovery"):
// the resource_metadata URL of the challenge if any, else the path-based and
// then the root well-known protected-resource metadata URL; then the
// authorization server's metadata (RFC 8414 with path insertion, then OpenID
// discovery). Without protected-resource metadata it falls back to 2025-03-26:
// metadata at the server's origin, else /authorize, /token and /register
// there.
func Discover(ctx context.Context, hc *http.Client, serverURL string, ch *Challenge) (*Discovery, error) {
	canon, err := CanonicalResource(serverURL)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(canon)
	origin := u.Scheme + "://" + u.Host
	var candidates []string
	if ch != nil && ch.ResourceMetadata() != "" {
		candidates = append(candidates, ch.ResourceMetadata())
	}
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		candidates = append(candidates, origin+"/.well-known/oauth-protected-resource"+p)
	}
	candidates = append(candidates, origin+"/.well-known/oauth-protected-resource")
	d := &Discovery{ServerURL: serverURL, Resource: canon}
	for _, c := range candidates {
		var prm ProtectedResource
		found, err := getJSON(ctx, hc, c, &prm)
		if err != nil {
			return nil, fmt.Errorf("protected resource metadata %s: %w", c, err)
		}
		if !found {
			continue
		}
		if prm.Resource != "" {
			if !resourceBinds(prm.Resource, canon) {
				return nil, fmt.Errorf("%w: %s declares %q, not %q", ErrResourceMismatch, c, prm.Resource, canon)
			}
			d.Resource = prm.Resource
		}
		d.PRM, d.ResourceMetadataURL = &prm, c
		break
	}
	if d.PRM != nil && len(d.PRM.AuthorizationServers) > 0 {
		d.Issuer = d.PRM.AuthorizationServers[0]
	} else {
		d.Issuer = origin
	}
	// Without protected-resource metadata (2025-03-26) the issuer is not
	// known beforehand, so the metadata's own issuer is not checked.
	md, err := discoverServerMetadata(ctx, hc, d.Issuer, d.PRM != nil && len(d.PRM.AuthorizationServers) > 0)
	if err != nil {
		return nil, err
	}
	if md == nil {
		if d.PRM != nil && len(d.PRM.AuthorizationServers) > 0 {
			return nil, fmt.Errorf("authorization server %s publishes no metadata", d.Issuer)
		}
		// 2025-03-26 §"Fallbacks for Servers without Metadata Discovery".
		md = &ServerMetadata{AuthServerMetadata: transport.AuthServerMetadata{Issuer: origin,
			AuthorizationEndpoint: origin + "/authorize", TokenEndpoint: origin + "/token", RegistrationEndpoint: origin + "/register"}}
		d.Fallback = true
	}
	d.Metadata = *md
	return d, nil
}

// DiscoverIssuer fetches the metadata of the authorization server issuer
// (used when a token endpoint is known only by its issuer).
func DiscoverIssuer(ctx context.Context, hc *http.Client, issuer string) (*ServerMetadata, error) {
	md, err := discoverServerMetadata(ctx, hc, issuer, true)
	if err == nil && md == nil {
		err = fmt.Errorf("authorization server %s publishes no metadata", issuer)
	}
	return md, err
}

// discoverServerMetadata tries the RFC 8414 §3.1 and OpenID Connect
// Discovery URLs of issuer in the order MCP 2025-11-25 gives. nil, nil: none
// answered.
func discoverServerMetadata(ctx context.Context, hc *http.Client, issuer string, checkIssuer bool) (*ServerMetadata, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("authorization server %q is not an absolute URL", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.Trim(u.EscapedPath(), "/")
	var urls []string
	if p == "" {
		urls = []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	} else {
		urls = []string{origin + "/.well-known/oauth-authorization-server/" + p,
			origin + "/.well-known/openid-configuration/" + p,
			origin + "/" + p + "/.well-known/openid-configuration"}
	}
	for _, mu := range urls {
		var md ServerMetadata
		found, err := getJSON(ctx, hc, mu, &md)
		if err != nil {
			return nil, fmt.Errorf("authorization server metadata %s: %w", mu, err)
		}
		if !found {
			continue
		}
		// RFC 8414 §3.3: the issuer must be the one the URL was built from.
		if checkIssuer && strings.TrimSuffix(md.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return nil, fmt.Errorf("authorization server metadata %s declares issuer %q, not %q", mu, md.Issuer, issuer)
		}
		if md.AuthorizationEndpoint == "" && md.TokenEndpoint == "" {
			return nil, fmt.Errorf("authorization server metadata %s has no authorization_endpoint or token_endpoint", mu)
		}
		for name, v := range map[string]string{"authorization_endpoint": md.AuthorizationEndpoint, "token_endpoint": md.TokenEndpoint,
			"registration_endpoint": md.RegistrationEndpoint, "revocation_endpoint": md.RevocationEndpoint} {
			if v == "" {
				continue
			}
			if e, err := url.Parse(v); err != nil || (e.Scheme != "https" && e.Scheme != "http") || e.Host == "" {
				return nil, fmt.Errorf("authorization server metadata %s: %s %q is not an http(s) URL", mu, name, v)
			}
		}
		return &md, nil
	}
	return nil, nil
}

// resourceBinds: the declared resource is the addressed URL, or an ancestor
// of it at a path-segment boundary, on the same scheme and host (a server at
// https://h/mcp may declare https://h).
func resourceBinds(declared, addressed string) bool {
	a, err1 := url.Parse(declared)
	b, err2 := url.Parse(addressed)
	if err1 != nil || err2 != nil {
		return declared == addressed
	}
	if !strings.EqualFold(a.Scheme, b.Scheme) || !strings.EqualFold(a.Host, b.Host) || a.RawQuery != b.RawQuery || a.Fragment != "" {
		return false
	}
	dp, ap := strings.TrimSuffix(a.EscapedPath(), "/"), strings.TrimSuffix(b.EscapedPath(), "/")
	return dp == ap || strings.HasPrefix(ap, dp+"/")
}

// getJSON GETs a metadata document. found is false for 404 (and the other
// 4xx answers a server without the document gives); a 5xx or a malformed
// body is an error.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocBytes))
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return false, err
	}
	if len(body) > maxDocBytes {
		return false, fmt.Errorf("document larger than %d bytes", maxDocBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return false, fmt.Errorf("not a JSON object: %w", err)
	}
	return true, nil
}

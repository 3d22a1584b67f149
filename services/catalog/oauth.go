package catalog

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
	"github.com/toolplane/toolplane/services/catalog/catalogpg"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// OAuthConfig is `catalog.oauth`: how the catalog authenticates to
// OAuth-protected MCP servers (docs/architecture.md §10.6).
type OAuthConfig struct {
	// PublicURL is the catalog's HTTP listener as users' browsers reach it
	// (scheme://host[:port][/prefix]); authorization servers redirect to
	// PublicURL + /oauth/callback. "" = no login is possible (servers that
	// need one stay NEEDS_AUTH). Default "".
	PublicURL string `yaml:"public_url"`
	// KeyFile is a file of AES-256 keys (one per line, base64 or hex; the
	// first seals, all open) sealing tokens and client secrets in
	// DataDir/catalog.db. Default "".
	KeyFile string `yaml:"key_file"`
	// KeyEnv names an environment variable holding the keys instead
	// (comma-separated). Neither set = tokens are kept in memory only and a
	// restart needs new logins. Default "".
	KeyEnv string `yaml:"key_env"`
	// ClientMetadataURL is the https URL of the catalog's OAuth client ID
	// metadata document, used as client_id where the authorization server
	// supports it. Default "" (dynamic registration).
	ClientMetadataURL string `yaml:"client_metadata_url"`
}

// validate checks the section; p is its key path.
func (o *OAuthConfig) validate(p string) error {
	if o.PublicURL != "" {
		u, err := url.Parse(o.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("%s.public_url: must be an absolute http(s) URL without query, got %q", p, o.PublicURL)
		}
	}
	if o.KeyFile != "" && o.KeyEnv != "" {
		return fmt.Errorf("%s.key_file: give key_file or key_env, not both", p)
	}
	if o.KeyEnv != "" && !envName.MatchString(o.KeyEnv) {
		return fmt.Errorf("%s.key_env: %q is not an environment variable name", p, o.KeyEnv)
	}
	if o.ClientMetadataURL != "" {
		if u, err := url.Parse(o.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" {
			return fmt.Errorf("%s.client_metadata_url: must be an https URL with a path, got %q", p, o.ClientMetadataURL)
		}
	}
	return nil
}

// oauthOptions opens the sealed token store (when keys are configured,
// re-sealing rows under the first key) and returns the manager's OAuth
// options and a closer. hc (the catalog's egress policy) carries every
// request to authorization servers: metadata URLs come from MCP servers'
// answers and must not reach addresses the policy refuses.
//
// With storage.dsn (store is the catalog's *catalogpg.Store) the OAuth
// tables are the database's, shared by every replica: pending logins
// complete on any replica and renewals are serialised across replicas
// (catalogpg/oauth.go). Otherwise they are in DataDir/catalog.db.
func oauthOptions(cfg OAuthConfig, dataDir string, hc *http.Client, store any) (*catalogmcp.OAuthOptions, func() error, error) {
	o := &catalogmcp.OAuthOptions{ClientMetadataURL: cfg.ClientMetadataURL, HTTPClient: hc}
	if cfg.PublicURL != "" {
		o.RedirectURI = strings.TrimSuffix(cfg.PublicURL, "/") + "/oauth/callback"
	}
	if cfg.KeyFile == "" && cfg.KeyEnv == "" {
		return o, func() error { return nil }, nil
	}
	keys, err := catalogstore.LoadKeyring(cfg.KeyFile, cfg.KeyEnv)
	if err != nil {
		return nil, nil, fmt.Errorf("catalog.oauth.%w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if pg, ok := store.(*catalogpg.Store); ok {
		ost := pg.OAuth(keys)
		if _, err := ost.Reseal(ctx); err != nil {
			return nil, nil, fmt.Errorf("catalog.oauth: %w", err)
		}
		o.Store, o.LoginOwner = ost.For, ost.LoginOwner
		o.ConfirmKey = keys.Derive("toolplane oauth callback confirmation")
		return o, func() error { return nil }, nil
	}
	if dataDir == "" {
		return nil, nil, fmt.Errorf("catalog.oauth: a data directory is required (tokens are kept in DataDir/catalog.db)")
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("catalog.oauth: data directory: %w", err)
	}
	st, err := catalogstore.Open(filepath.Join(dataDir, "catalog.db"))
	if err != nil {
		return nil, nil, fmt.Errorf("catalog.oauth: %w", err)
	}
	ost := st.OAuth(keys)
	if _, err := ost.Reseal(ctx); err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("catalog.oauth: %w", err)
	}
	o.Store, o.LoginOwner = ost.For, ost.LoginOwner
	o.ConfirmKey = keys.Derive("toolplane oauth callback confirmation")
	return o, st.Close, nil
}

// HTTPRoutes are the catalog's routes on the HTTP listener outside the REST
// gateway: the OAuth callback (no Toolplane credential: the browser comes
// from the authorization server; the single-use state authenticates it).
// The GET answers a confirmation page naming the Toolplane user; only its
// POST attaches the token (catalogmcp/oauthconfirm.go, decision 0127).
func (s *Server) HTTPRoutes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /oauth/callback":  http.HandlerFunc(s.mgr.ServeOAuthCallback),
		"POST /oauth/callback": http.HandlerFunc(s.mgr.ServeOAuthCallback),
	}
}

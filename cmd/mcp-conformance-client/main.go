// Command mcp-conformance-client is the client under test for the official
// MCP conformance suite (npm @modelcontextprotocol/conformance, client mode;
// scripts/conformance-client.sh). It is built on the catalog's MCP client
// layer (services/catalog/catalogmcp), so the suite exercises exactly the
// code the catalog uses to talk to MCP servers.
//
// The suite runs `mcp-conformance-client [flags] URL` with the scenario name
// in $MCP_CONFORMANCE_SCENARIO. The client connects over streamable HTTP
// (or SSE with --sse), initialises, lists the tools and calls each of them
// with arguments derived from its input schema (numbers 1, 2, ...; strings
// "test"; booleans true), printing the results. It exits non-zero on the
// first protocol error.
//
// Every connection goes through the catalog's OAuth client
// (services/catalog/catalogoauth). The suite's auth scenarios play the
// authorization server; the browser step is done here by requesting the
// authorization URL and taking the redirect back to the client's redirect
// URI, as a browser would. $MCP_CONFORMANCE_CONTEXT carries pre-registered
// credentials (client_id, client_secret, private_key_pem), which select the
// pre-registered client or, for the client-credentials scenarios, the
// client_credentials grant.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
)

// redirectURI is where the authorization server sends the browser back; the
// client never listens there, it reads the redirect.
const redirectURI = "http://localhost:33418/oauth/callback"

// clientMetadataURL is the client ID metadata document URL the suite expects
// (auth/basic-cimd).
const clientMetadataURL = "https://conformance-test.local/client-metadata.json"

// conformanceContext is $MCP_CONFORMANCE_CONTEXT.
type conformanceContext struct {
	ClientID      string `json:"client_id"`
	ClientSecret  string `json:"client_secret"`
	PrivateKeyPEM string `json:"private_key_pem"`
	SigningAlg    string `json:"signing_algorithm"`
}

// oauthHTTPClient returns the HTTP client for scenario: every request through
// catalogoauth.Transport.
func oauthHTTPClient(scenario, serverURL string) (*http.Client, error) {
	var cc conformanceContext
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &cc); err != nil {
			return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	hc := &http.Client{Timeout: 20 * time.Second}
	cfg := catalogoauth.Config{ServerURL: serverURL, ClientID: cc.ClientID, ClientSecret: cc.ClientSecret,
		ClientMetadataURL: clientMetadataURL, ClientName: "toolplane-conformance", RedirectURI: redirectURI,
		HTTPClient: hc, Authorize: browser}
	if strings.HasPrefix(scenario, "auth/client-credentials") {
		cfg.Grant = catalogoauth.GrantClientCredentials
		cfg.PrivateKeyPEM, cfg.SigningAlg = []byte(cc.PrivateKeyPEM), cc.SigningAlg
	}
	oc, err := catalogoauth.New(cfg)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &catalogoauth.Transport{Client: oc}}, nil
}

// browser follows the authorization URL's redirects until one goes to the
// redirect URI, and returns that URL.
func browser(ctx context.Context, authURL string) (*url.URL, error) {
	var back *url.URL
	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirectURI) {
			back = req.URL
			return http.ErrUseLastResponse
		}
		if len(via) > 10 {
			return errors.New("too many redirects")
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if back == nil {
		return nil, fmt.Errorf("the authorization endpoint answered %d without redirecting back", resp.StatusCode)
	}
	return back, nil
}

func main() {
	sse := flag.Bool("sse", false, "use the legacy HTTP+SSE transport")
	modern := flag.Bool("probe-modern", false, "probe server/discover (protocol 2026-07-28) before initialize")
	timeout := flag.Duration("timeout", 25*time.Second, "overall timeout")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: mcp-conformance-client [--sse] URL")
		os.Exit(2)
	}
	if err := run(flag.Arg(flag.NArg()-1), *sse, !*modern, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(url string, sse, legacy bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	typ := catalogconfig.TypeHTTP
	if sse {
		typ = catalogconfig.TypeSSE
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	hc, err := oauthHTTPClient(scenario, url)
	if err != nil {
		return err
	}
	s, err := catalogmcp.Connect(ctx, catalogconfig.Server{Name: "conformance", Type: typ, URL: url},
		catalogmcp.Options{Version: "0.1.0", LegacyOnly: legacy, HTTPClient: hc}, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer s.Close(2 * time.Second)
	fmt.Printf("scenario %q: connected to %s %s, protocol %s\n", scenario, s.ServerInfo.Name, s.ServerInfo.Version, s.ProtocolVersion)
	if scenario == "initialize" {
		return nil
	}
	tools, err := s.ListTools(ctx)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	for _, t := range tools {
		args := argsFor(t.InputSchema)
		res, err := s.CallTool(ctx, t.Name, args, func(n catalogmcp.Notification) {
			fmt.Printf("  notification %s %s\n", n.Method, n.Params)
		})
		if err != nil {
			return fmt.Errorf("tools/call %s: %w", t.Name, err)
		}
		fmt.Printf("tool %s(%s): isError=%v content=%d\n", t.Name, args, res.IsError, len(res.Content))
		for _, c := range res.Content {
			fmt.Printf("  %s\n", c)
		}
	}
	return nil
}

// argsFor builds arguments for every property of a JSON Schema object:
// numbers 1, 2, 3, ...; integers likewise; strings "test"; booleans true;
// arrays []; objects {}.
func argsFor(schema json.RawMessage) json.RawMessage {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]any{}
	n := 0
	for _, name := range names {
		t, _ := s.Properties[name].Type.(string)
		switch t {
		case "number", "integer":
			n++
			out[name] = n
		case "boolean":
			out[name] = true
		case "array":
			out[name] = []any{}
		case "object":
			out[name] = map[string]any{}
		default:
			out[name] = "test"
		}
	}
	b, _ := json.Marshal(out)
	return b
}

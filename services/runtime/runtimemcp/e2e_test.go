package runtimemcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimemcp"
)

const (
	editorToken = "e2e-editor-token"
	viewerToken = "e2e-viewer-token"
	adminToken  = "e2e-admin-token"
	// serviceToken is a service credential (acting for users in the
	// resources and prompts tests, features_e2e_test.go).
	serviceToken = "e2e-service-token"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// everythingJS is the installed server-everything entry point; the test is
// skipped outside CI when it (or node) is missing.
func everythingJS(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("module root not found")
		}
		dir = parent
	}
	p := filepath.Join(dir, ".tools", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err == nil {
		if _, err := exec.LookPath("node"); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("npm server-everything not installed (scripts/install-npm.sh)")
	}
	t.Skip("npm server-everything not installed (scripts/install-npm.sh)")
	return ""
}

// startSuite runs the real binary's composition (all four services, auth
// on, a two-role policy) with server-everything behind the catalog, and
// returns the front door URL.
func startSuite(t *testing.T) (string, string) { return startSuiteScope(t, "") }

// startSuiteScope is startSuite with server-everything's session_scope
// ("" = shared). The policy lets a viewer read resources except the
// dynamic ones (features_e2e_test.go).
func startSuiteScope(t *testing.T, scope string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	srv := map[string]any{"command": "node", "args": []string{everythingJS(t), "stdio"}}
	if scope != "" {
		srv["session_scope"] = scope
	}
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"everything": srv}})
	extPath := filepath.Join(dir, "extensions_config.json")
	policy := filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(extPath, ext, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policy, []byte("p, editor, *, *, *, *, allow\n"+
		"p, viewer, *, *, *, *, allow\n"+
		"p, viewer, *, tool, everything_get-sum, call, deny\n"+
		"p, viewer, *, resource, *, *, allow\n"+
		"p, viewer, *, resource, \"toolplane+mcp://everything/demo://resource/dynamic/*\", *, deny\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := app.DefaultConfig()
	cfg.Server.DataDir = filepath.Join(dir, "data")
	cfg.Server.GRPCAddr, cfg.Server.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Server.DrainPeriod = time.Millisecond
	cfg.Server.ShutdownTimeout = 5 * time.Second
	cfg.Catalog.ExtensionsConfig = extPath
	cfg.Authz.PolicyFile = policy
	cfg.Auth.Enabled = true
	cfg.Auth.Tokens = []config.Token{
		{Name: "editor", SHA256: sha(editorToken), Kind: "user", Subject: "eddie", Tenant: "default", Roles: []string{"editor"}},
		{Name: "viewer", SHA256: sha(viewerToken), Kind: "user", Subject: "vera", Tenant: "default", Roles: []string{"viewer"}},
		{Name: "admin", SHA256: sha(adminToken), Kind: "user", Subject: "root", Tenant: "default", Roles: []string{"admin"}},
		{Name: "service", SHA256: sha(serviceToken), Kind: "service", Subject: "svc:e2e", Tenant: "default", Roles: []string{"service"}},
	}
	if err := os.MkdirAll(cfg.Server.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	au, err := app.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := app.Listen(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	grpcAddr, httpAddr := lis.GRPC.Addr().String(), lis.HTTP.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done, ready := make(chan error, 1), make(chan struct{})
	var once sync.Once
	go func() {
		done <- app.Run(ctx, &cfg, au, lis, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnReady: func(string, string) { once.Do(func() { close(ready) }) }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("suite did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("suite stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("suite not ready")
	}
	conn, err := grpcx.Dial(grpcAddr, grpcx.DialOptions{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cat := catalogv1.NewCatalogServiceClient(conn)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := cat.ListServers(context.Background(), &catalogv1.ListServersRequest{})
		if err == nil && len(res.GetServers()) == 1 && res.GetServers()[0].GetState() == catalogv1.ServerState_SERVER_STATE_READY {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything not ready: %v %v", res, err)
		}
	}
	return "http://" + httpAddr + runtimemcp.Path, grpcAddr
}

func mcpClient(t *testing.T, url, token string) (*client.Client, *mcp.InitializeResult, func() []string) {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithLegacyProtocolOnly())
	var mu sync.Mutex
	var methods []string
	c.OnNotification(func(n mcp.JSONRPCNotification) { mu.Lock(); methods = append(methods, n.Method); mu.Unlock() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ir, err := c.Initialize(ctx, mcp.InitializeRequest{})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, ir, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(methods) }
}

func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := mcp.AsTextContent(ct); ok {
			b.WriteString(tc.Text)
		}
	}
	return res.IsError, b.String()
}

// End to end through the real runtime, catalog, authz and skills with a
// real npm MCP server: the walk-through of issue 9 from an MCP client.
func TestEndToEndFrontDoor(t *testing.T) {
	url, _ := startSuite(t)
	// Auth is on: no token is a 401 with a Bearer challenge.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	c, ir, notes := mcpClient(t, url, editorToken)
	if !strings.Contains(ir.Instructions, "everything_get-sum") {
		t.Errorf("instructions lack the deferred names: %q", ir.Instructions)
	}
	names := toolNames(t, c)
	if !slices.Contains(names, "tool_search") || slices.Contains(names, "everything_get-sum") {
		t.Fatalf("first tools/list = %v: want tool_search bound and everything_get-sum deferred", names)
	}
	isErr, txt := callTool(t, c, "everything_get-sum", map[string]any{"a": 2, "b": 3})
	if !isErr || !strings.Contains(txt, "tool_search") {
		t.Fatalf("deferred call: isError=%v text=%q", isErr, txt)
	}
	isErr, txt = callTool(t, c, "tool_search", map[string]any{"query": "select:everything_get-sum"})
	if isErr {
		t.Fatalf("tool_search: %q", txt)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(notes(), "notifications/tools/list_changed") {
		if time.Now().After(deadline) {
			t.Fatalf("no list_changed after tool_search; notifications %v", notes())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if names := toolNames(t, c); !slices.Contains(names, "everything_get-sum") {
		t.Fatalf("tools/list after tool_search = %v", names)
	}
	isErr, txt = callTool(t, c, "everything_get-sum", map[string]any{"a": 2, "b": 3})
	if isErr || !strings.Contains(txt, "5") {
		t.Fatalf("promoted call: isError=%v text=%q", isErr, txt)
	}

	// The viewer's identical walk ends in an authz denial with its reason.
	v, _, _ := mcpClient(t, url, viewerToken)
	if _, txt := callTool(t, v, "tool_search", map[string]any{"query": "select:everything_get-sum"}); txt == "" {
		t.Fatal("viewer tool_search returned nothing")
	}
	isErr, txt = callTool(t, v, "everything_get-sum", map[string]any{"a": 2, "b": 3})
	if !isErr || strings.Contains(txt, "The sum") {
		t.Fatalf("viewer call of a denied tool: isError=%v text=%q", isErr, txt)
	}
	t.Logf("viewer denial: %s", txt)
}

// Through the real suite (the front door watching the runtime's catalog
// upstream with the suite's service credential): an operator disabling the
// MCP server behind a session's tools sends notifications/tools/list_changed
// to a 2026-07-28 client on its subscriptions/listen stream (mcp-go's
// client) and to a session-based session that listed its tools, and their
// next tools/list no longer has the server's tools.
func TestEndToEndUpstreamListChanged(t *testing.T) {
	url, grpcAddr := startSuite(t)
	auth := map[string]string{"Authorization": "Bearer " + editorToken}

	// 2026-07-28, sessionless, subscribed to tool changes.
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(auth))
	if err != nil {
		t.Fatal(err)
	}
	modern := client.NewClient(tr)
	var mu sync.Mutex
	got := map[string]int{}
	modern.OnNotification(func(n mcp.JSONRPCNotification) { mu.Lock(); got["modern "+n.Method]++; mu.Unlock() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := modern.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer modern.Close()
	ir, err := modern.Initialize(ctx, mcp.InitializeRequest{})
	if err != nil || ir.ProtocolVersion != mcp.ProtocolVersion20260728 {
		t.Fatalf("initialize: %v %v", ir, err)
	}
	stop, err := modern.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) { t.Errorf("listen: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	time.Sleep(200 * time.Millisecond) // the listen stream is registered

	// Session-based, with its GET stream open.
	ltr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(auth), transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	legacy := client.NewClient(ltr, client.WithLegacyProtocolOnly())
	legacy.OnNotification(func(n mcp.JSONRPCNotification) { mu.Lock(); got["legacy "+n.Method]++; mu.Unlock() })
	if err := legacy.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	if _, err := legacy.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	// Both promote a server-everything tool (one notice each), so that
	// the server's removal takes a listed tool away.
	if isErr, txt := callTool(t, legacy, "tool_search", map[string]any{"query": "select:everything_get-sum"}); isErr {
		t.Fatalf("tool_search: %s", txt)
	}
	if _, err := modern.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "tool_search", Arguments: map[string]any{"query": "select:everything_get-sum"}}}); err != nil {
		t.Fatal(err)
	}
	before := toolNames(t, legacy)
	if !slices.ContainsFunc(before, func(n string) bool { return strings.HasPrefix(n, "everything_") }) {
		t.Fatalf("tools before = %v: want server-everything's", before)
	}

	conn, err := grpcx.Dial(grpcAddr, grpcx.DialOptions{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	off := false
	if _, err := catalogv1.NewCatalogServiceClient(conn).UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "everything", Server: &catalogv1.ServerUpdate{Enabled: &off}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		m, l := got["modern notifications/tools/list_changed"], got["legacy notifications/tools/list_changed"]
		mu.Unlock()
		if m == 2 && l == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a promotion and disabling the server: list_changed modern=%d legacy=%d, want 2 each", m, l)
		}
	}
	after := toolNames(t, legacy)
	if slices.ContainsFunc(after, func(n string) bool { return strings.HasPrefix(n, "everything_") }) {
		t.Fatalf("tools after disabling the server = %v", after)
	}
	res, err := modern.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if strings.HasPrefix(tl.Name, "everything_") {
			t.Fatalf("2026-07-28 tools/list still has %s", tl.Name)
		}
	}
	t.Logf("tools: %d before, %d after disabling server-everything", len(before), len(after))
}

// The official TypeScript SDK (1.32, .tools/npm) through the real suite: a
// streamable HTTP session gets list_changed after tool_search and calls the
// promoted tool; its deprecated HTTP+SSE transport fails at once (GET
// without a session id is 405) instead of hanging for its timeout; a
// session-based POST without a session id is 400.
func TestEndToEndTypeScriptSDK(t *testing.T) {
	url, _ := startSuite(t)
	pkg := filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(everythingJS(t)))), "sdk", "package.json")
	if _, err := os.Stat(pkg); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("@modelcontextprotocol/sdk not installed in .tools/npm: %v", err)
		}
		t.Skipf("@modelcontextprotocol/sdk not installed in .tools/npm: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "ts-sdk-client.cjs"))
	cmd.Env = append(os.Environ(), "SDK_PACKAGE_JSON="+pkg, "MCP_URL="+url, "MCP_TOKEN="+editorToken)
	outb, err := cmd.Output()
	var out struct {
		Protocol           string   `json:"protocol"`
		SessionID          bool     `json:"sessionId"`
		After              []string `json:"after"`
		ListChanged        int      `json:"listChanged"`
		Sum                string   `json:"sum"`
		PostWithoutSession int      `json:"postWithoutSession"`
		SSE                string   `json:"sse"`
		SSEMillis          int      `json:"sseMillis"`
		Error              string   `json:"error"`
	}
	if jerr := json.Unmarshal(outb, &out); jerr != nil || err != nil || out.Error != "" {
		t.Fatalf("ts client: %v %v %s", err, jerr, outb)
	}
	if !out.SessionID || out.ListChanged < 1 || !slices.Contains(out.After, "everything_get-sum") || !strings.Contains(out.Sum, "5") {
		t.Errorf("streamable HTTP session: %s", outb)
	}
	if out.PostWithoutSession != http.StatusBadRequest {
		t.Errorf("POST without Mcp-Session-Id: %d, want 400", out.PostWithoutSession)
	}
	if out.SSE == "connected" || !strings.Contains(out.SSE, "405") || out.SSEMillis > 5000 {
		t.Errorf("HTTP+SSE transport: %q after %d ms, want a 405 failure at once", out.SSE, out.SSEMillis)
	}
	t.Logf("ts sdk: protocol %s, HTTP+SSE: %q in %d ms", out.Protocol, out.SSE, out.SSEMillis)
}

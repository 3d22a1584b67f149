package runtimemcp_test

import (
	"context"
	"encoding/json"
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
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimemcp"
)

// The exposed URIs of server-everything (prefixed server "everything";
// docs/decisions/0161-front-door-resources-and-prompts.md).
const (
	evPrefix     = "toolplane+mcp://everything/"
	evStaticPre  = evPrefix + "demo://resource/static/document/"
	evDynamicTpl = evPrefix + "demo://resource/dynamic/text/{resourceId}"
)

func ctx20(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func resourceURIs(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListResources(ctx20(t), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatalf("resources/list: %v", err)
	}
	var out []string
	for _, r := range res.Resources {
		out = append(out, r.URI)
	}
	return out
}

func templateURIs(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListResourceTemplates(ctx20(t), mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatalf("resources/templates/list: %v", err)
	}
	var out []string
	for _, r := range res.ResourceTemplates {
		if r.URITemplate != nil {
			out = append(out, r.URITemplate.Raw())
		}
	}
	return out
}

func readText(t *testing.T, c *client.Client, uri string) (string, string, error) {
	t.Helper()
	res, err := c.ReadResource(ctx20(t), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	if err != nil {
		return "", "", err
	}
	if len(res.Contents) == 0 {
		t.Fatalf("resources/read %s: no contents", uri)
	}
	switch c := res.Contents[0].(type) {
	case mcp.TextResourceContents:
		return c.URI, c.Text, nil
	case mcp.BlobResourceContents:
		return c.URI, c.Blob, nil
	}
	t.Fatalf("resources/read %s: contents %T", uri, res.Contents[0])
	return "", "", nil
}

// Resources, templates, prompts, completion and a subscription through the
// front door with mcp-go's client on a session-based protocol version,
// against the real suite and server-everything; a viewer's policy denies
// the dynamic resources.
func TestEndToEndResourcesAndPrompts(t *testing.T) {
	url, grpcAddr := startSuite(t)
	c, ir, notes := mcpClient(t, url, editorToken)
	if ir.Capabilities.Resources == nil || !ir.Capabilities.Resources.Subscribe || ir.Capabilities.Prompts == nil || ir.Capabilities.Completions == nil {
		t.Fatalf("capabilities: %+v", ir.Capabilities)
	}
	uris := resourceURIs(t, c)
	var static string
	for _, u := range uris {
		if strings.HasPrefix(u, evStaticPre) {
			static = u
			break
		}
	}
	if static == "" || slices.Contains(uris, "toolplane-frontdoor://dispatch") {
		t.Fatalf("resources/list = %v: want server-everything's static documents, namespaced, and no dispatch entry", uris)
	}
	gotURI, text, err := readText(t, c, static)
	if err != nil || gotURI != static || text == "" {
		t.Fatalf("resources/read %s: uri %q, %d bytes, %v", static, gotURI, len(text), err)
	}
	if tpls := templateURIs(t, c); !slices.Contains(tpls, evDynamicTpl) {
		t.Fatalf("resources/templates/list = %v: want %s", tpls, evDynamicTpl)
	}
	// A template expanded by the client reads through its server.
	dyn := evPrefix + "demo://resource/dynamic/text/7"
	if u, text, err := readText(t, c, dyn); err != nil || u != dyn || !strings.Contains(text, "7") {
		t.Fatalf("resources/read %s: %q %q %v", dyn, u, text, err)
	}
	if _, _, err := readText(t, c, evPrefix+"demo://no/such/resource"); err == nil {
		t.Fatal("resources/read of an unknown URI succeeded")
	}

	pl, err := c.ListPrompts(ctx20(t), mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var prompts []string
	for _, p := range pl.Prompts {
		prompts = append(prompts, p.Name)
	}
	if !slices.Contains(prompts, "everything_args-prompt") || slices.Contains(prompts, "toolplane.frontdoor.dispatch") {
		t.Fatalf("prompts/list = %v", prompts)
	}
	gp, err := c.GetPrompt(ctx20(t), mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "everything_args-prompt", Arguments: map[string]string{"city": "Lyon"}}})
	if err != nil {
		t.Fatalf("prompts/get: %v", err)
	}
	if b, _ := json.Marshal(gp.Messages); !strings.Contains(string(b), "Lyon") || strings.Contains(string(b), "toolplane.dev/requested") {
		t.Fatalf("prompts/get messages: %s", b)
	}
	cr, err := c.Complete(ctx20(t), mcp.CompleteRequest{Params: mcp.CompleteParams{
		Ref: mcp.PromptReference{Type: "ref/prompt", Name: "everything_completable-prompt"}, Argument: mcp.CompleteArgument{Name: "department", Value: "Eng"}}})
	if err != nil || !slices.Equal(cr.Completion.Values, []string{"Engineering"}) {
		t.Fatalf("completion/complete: %+v %v", cr, err)
	}

	// Subscribe, make server-everything send updates, receive them.
	if err := c.Subscribe(ctx20(t), mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: static}}); err != nil {
		t.Fatalf("resources/subscribe: %v", err)
	}
	if isErr, txt := callTool(t, c, "tool_search", map[string]any{"query": "select:everything_toggle-subscriber-updates"}); isErr {
		t.Fatalf("tool_search: %s", txt)
	}
	if isErr, txt := callTool(t, c, "everything_toggle-subscriber-updates", nil); isErr {
		t.Fatalf("toggle-subscriber-updates: %s", txt)
	}
	waitFor(t, 10*time.Second, "notifications/resources/updated", func() bool {
		return slices.Contains(notes(), string(mcp.MethodNotificationResourceUpdated))
	})
	if err := c.Unsubscribe(ctx20(t), mcp.UnsubscribeRequest{Params: mcp.UnsubscribeParams{URI: static}}); err != nil {
		t.Fatalf("resources/unsubscribe: %v", err)
	}
	// Updates off again (server-everything's timer would keep the child
	// alive past stdin's end when it is disabled below).
	if isErr, txt := callTool(t, c, "everything_toggle-subscriber-updates", nil); isErr {
		t.Fatalf("toggle-subscriber-updates: %s", txt)
	}

	// The viewer: static documents yes, dynamic ones denied by policy.
	v, _, _ := mcpClient(t, url, viewerToken)
	vuris := resourceURIs(t, v)
	if !slices.Contains(vuris, static) {
		t.Errorf("viewer resources/list = %v: want %s", vuris, static)
	}
	if tpls := templateURIs(t, v); slices.Contains(tpls, evDynamicTpl) {
		t.Errorf("viewer sees the denied template: %v", tpls)
	}
	if _, _, err := readText(t, v, dyn); err == nil || !strings.Contains(err.Error(), "denied by policy") {
		t.Errorf("viewer resources/read %s: %v, want a policy denial", dyn, err)
	}
	if err := v.Subscribe(ctx20(t), mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: dyn}}); err == nil {
		t.Error("viewer subscribed to a denied resource")
	}
	if _, _, err := readText(t, v, static); err != nil {
		t.Errorf("viewer resources/read %s: %v", static, err)
	}

	// The server goes away: both lists change, the sessions are told — a
	// session-based one on its GET stream, a 2026-07-28 one on its
	// subscriptions/listen stream.
	var mu sync.Mutex
	got := map[string]int{}
	auth := map[string]string{"Authorization": "Bearer " + editorToken}
	ltr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(auth), transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	legacy := client.NewClient(ltr, client.WithLegacyProtocolOnly())
	legacy.OnNotification(func(n mcp.JSONRPCNotification) { mu.Lock(); got["legacy "+n.Method]++; mu.Unlock() })
	if err := legacy.Start(ctx20(t)); err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	if _, err := legacy.Initialize(ctx20(t), mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	mtr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(auth))
	if err != nil {
		t.Fatal(err)
	}
	modern := client.NewClient(mtr)
	modern.OnNotification(func(n mcp.JSONRPCNotification) { mu.Lock(); got["modern "+n.Method]++; mu.Unlock() })
	if err := modern.Start(ctx20(t)); err != nil {
		t.Fatal(err)
	}
	defer modern.Close()
	if _, err := modern.Initialize(ctx20(t), mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	stop, err := modern.ListenAsync(ctx20(t), mcp.SubscriptionFilter{ResourcesListChanged: true, PromptsListChanged: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	time.Sleep(300 * time.Millisecond) // both streams are open
	conn, err := grpcx.Dial(grpcAddr, grpcx.DialOptions{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	off := false
	if _, err := catalogv1.NewCatalogServiceClient(conn).UpdateServer(ctx20(t), &catalogv1.UpdateServerRequest{Name: "everything", Server: &catalogv1.ServerUpdate{Enabled: &off}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "resources and prompts list_changed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range []string{"legacy ", "modern "} {
			if got[k+string(mcp.MethodNotificationResourcesListChanged)] == 0 || got[k+string(mcp.MethodNotificationPromptsListChanged)] == 0 {
				return false
			}
		}
		return true
	})
	if uris := resourceURIs(t, c); len(uris) != 0 {
		t.Errorf("resources of a disabled server still listed: %v", uris)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
	}
}

// mcp-go's client on protocol 2026-07-28 (sessionless): resources, prompts,
// and a resource subscription through subscriptions/listen.
func TestEndToEndResourcesModernProtocol(t *testing.T) {
	url, _ := startSuite(t)
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + editorToken}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	var mu sync.Mutex
	var updated []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationResourceUpdated) {
			mu.Lock()
			updated = append(updated, n.Params.AdditionalFields["uri"].(string))
			mu.Unlock()
		}
	})
	if err := c.Start(ctx20(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ir, err := c.Initialize(ctx20(t), mcp.InitializeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ir.ProtocolVersion != mcp.ProtocolVersion20260728 {
		t.Fatalf("negotiated %s, want %s", ir.ProtocolVersion, mcp.ProtocolVersion20260728)
	}
	uris := resourceURIs(t, c)
	var static string
	for _, u := range uris {
		if strings.HasPrefix(u, evStaticPre) {
			static = u
			break
		}
	}
	if static == "" {
		t.Fatalf("resources/list = %v", uris)
	}
	if u, text, err := readText(t, c, static); err != nil || u != static || text == "" {
		t.Fatalf("resources/read: %q %v", u, err)
	}
	gp, err := c.GetPrompt(ctx20(t), mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "everything_simple-prompt"}})
	if err != nil || len(gp.Messages) == 0 {
		t.Fatalf("prompts/get: %+v %v", gp, err)
	}
	lctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = c.Listen(lctx, mcp.SubscriptionFilter{ResourceSubscriptions: []string{static}}) }()
	time.Sleep(300 * time.Millisecond) // the listen stream is open and acknowledged
	if isErr, txt := callTool(t, c, "tool_search", map[string]any{"query": "select:everything_toggle-subscriber-updates"}); isErr {
		t.Fatalf("tool_search: %s", txt)
	}
	if isErr, txt := callTool(t, c, "everything_toggle-subscriber-updates", nil); isErr {
		t.Fatalf("toggle: %s", txt)
	}
	waitFor(t, 10*time.Second, "resources/updated on the listen stream", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(updated, static)
	})
}

// DELETE of a front-door session closes its thread's per-thread MCP
// sessions in the catalog; another session's stay.
func TestEndToEndDeleteEndsPerThreadSessions(t *testing.T) {
	url, grpcAddr := startSuiteScope(t, "per_thread")
	open := func(viaTool bool) *client.Client {
		tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + editorToken}))
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, client.WithLegacyProtocolOnly())
		if err := c.Start(ctx20(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx20(t), mcp.InitializeRequest{}); err != nil {
			t.Fatal(err)
		}
		if viaTool { // a tool call through the runtime starts the thread's child
			if isErr, txt := callTool(t, c, "tool_search", map[string]any{"query": "select:everything_echo"}); isErr {
				t.Fatalf("tool_search: %s", txt)
			}
			if isErr, txt := callTool(t, c, "everything_echo", map[string]any{"message": "hi"}); isErr {
				t.Fatalf("echo: %s", txt)
			}
			return c
		}
		// A read through the per-thread scope starts the thread's child.
		uris := resourceURIs(t, c)
		if len(uris) == 0 {
			t.Fatal("no resources")
		}
		if _, _, err := readText(t, c, uris[0]); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := open(true)
	b := open(false)
	t.Cleanup(func() { _ = b.Close() })
	// The two sessions' threads, newest first.
	conn, err := grpcx.Dial(grpcAddr, grpcx.DialOptions{Token: editorToken})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	th, err := runtimev1.NewRuntimeServiceClient(conn).ListThreads(ctx20(t), &runtimev1.ListThreadsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var threads []string
	for _, x := range th.GetThreads() {
		if x.GetMetadata()[runtimemcp.MetadataBinding] == "session" {
			threads = append(threads, x.GetThreadId())
		}
	}
	if len(threads) != 2 {
		t.Fatalf("front-door threads: %v", threads)
	}
	threadB, threadA := threads[0], threads[1]
	svc, err := grpcx.Dial(grpcAddr, grpcx.DialOptions{Token: serviceToken})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	cat := catalogv1.NewCatalogServiceClient(svc)
	scoped := func() int32 {
		res, err := cat.GetServer(ctx20(t), &catalogv1.GetServerRequest{Name: "everything"})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetServer().GetScopedSessions()
	}
	if n := scoped(); n != 2 {
		t.Fatalf("per-thread sessions before DELETE: %d, want 2", n)
	}
	// DELETE /mcp with the credential (mcp-go's Close sends its DELETE
	// without the transport's custom headers, so the guard would refuse it).
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Authorization", "Bearer "+editorToken)
	req.Header.Set("Mcp-Session-Id", a.GetSessionId())
	req.Header.Set("MCP-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	t.Cleanup(func() { _ = a.Close() })
	// Session A's child is closed (asynchronously after the DELETE).
	waitFor(t, 10*time.Second, "the deleted session's per-thread session closed", func() bool { return scoped() == 1 })
	asEddie := grpcx.WithPrincipal(ctx20(t), &typev1.Principal{Subject: "eddie", Tenant: "default", Roles: []string{"editor"}})
	if res, err := cat.CloseThreadSessions(asEddie, &catalogv1.CloseThreadSessionsRequest{ThreadId: threadA}); err != nil || res.GetClosed() != 0 {
		t.Fatalf("CloseThreadSessions(A) after DELETE = %v, %v; want 0", res, err)
	}
	// Another principal cannot close eddie's thread's sessions.
	asVera := grpcx.WithPrincipal(ctx20(t), &typev1.Principal{Subject: "vera", Tenant: "default", Roles: []string{"viewer"}})
	if res, err := cat.CloseThreadSessions(asVera, &catalogv1.CloseThreadSessionsRequest{ThreadId: threadB}); err != nil || res.GetClosed() != 0 {
		t.Fatalf("CloseThreadSessions(B) as another user = %v, %v; want 0", res, err)
	}
	// Session B's child is still there.
	if res, err := cat.CloseThreadSessions(asEddie, &catalogv1.CloseThreadSessionsRequest{ThreadId: threadB}); err != nil || res.GetClosed() != 1 {
		t.Fatalf("CloseThreadSessions(B) = %v, %v; want 1 closed", res, err)
	}
}

// The official TypeScript SDK lists and reads resources, gets prompts,
// receives resources/updated on a subscription, and a viewer is denied a
// resource by policy (testdata/ts-sdk-features.cjs).
func TestEndToEndTypeScriptSDKResources(t *testing.T) {
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
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "ts-sdk-features.cjs"))
	cmd.Env = append(os.Environ(), "SDK_PACKAGE_JSON="+pkg, "MCP_URL="+url, "MCP_TOKEN="+editorToken, "MCP_VIEWER_TOKEN="+viewerToken)
	outb, err := cmd.Output()
	var out struct {
		Resources    []string `json:"resources"`
		ReadURI      string   `json:"readUri"`
		ReadBytes    int      `json:"readBytes"`
		Templates    []string `json:"templates"`
		Prompts      []string `json:"prompts"`
		PromptText   string   `json:"promptText"`
		Completion   []string `json:"completion"`
		Updated      []string `json:"updated"`
		ViewerDenied string   `json:"viewerDenied"`
		ViewerList   []string `json:"viewerTemplates"`
		Error        string   `json:"error"`
	}
	if jerr := json.Unmarshal(outb, &out); jerr != nil || err != nil || out.Error != "" {
		t.Fatalf("ts client: %v %v %s", err, jerr, outb)
	}
	if out.ReadURI == "" || !strings.HasPrefix(out.ReadURI, evStaticPre) || out.ReadBytes == 0 {
		t.Errorf("read: %s", outb)
	}
	if !slices.Contains(out.Templates, evDynamicTpl) || !slices.Contains(out.Prompts, "everything_args-prompt") || !strings.Contains(out.PromptText, "Lyon") {
		t.Errorf("templates/prompts: %s", outb)
	}
	if !slices.Equal(out.Completion, []string{"Engineering"}) {
		t.Errorf("completion: %v", out.Completion)
	}
	if !slices.Contains(out.Updated, out.ReadURI) {
		t.Errorf("no resources/updated for %s: %v", out.ReadURI, out.Updated)
	}
	if !strings.Contains(out.ViewerDenied, "denied by policy") || slices.Contains(out.ViewerList, evDynamicTpl) {
		t.Errorf("viewer: denied %q, templates %v", out.ViewerDenied, out.ViewerList)
	}
}

// mcpClientHeaders is mcpClient with extra HTTP headers.
func mcpClientHeaders(t *testing.T, url string, headers map[string]string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithLegacyProtocolOnly())
	if err := c.Start(ctx20(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx20(t), mcp.InitializeRequest{}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The resource policy holds for resources embedded in a prompt's result,
// for dot segments and encoded dots in a URI, and a thread named by the
// client must be the caller's. The viewer's policy denies
// toolplane+mcp://everything/demo://resource/dynamic/*.
func TestEndToEndResourcePolicyHoles(t *testing.T) {
	url, grpcAddr := startSuite(t)
	ed, _, _ := mcpClient(t, url, editorToken)
	vw, _, _ := mcpClient(t, url, viewerToken)

	// Embedded resources of prompts/get.
	getPrompt := func(c *client.Client) string {
		gp, err := c.GetPrompt(ctx20(t), mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "everything_resource-prompt",
			Arguments: map[string]string{"resourceType": "Text", "resourceId": "1"}}})
		if err != nil {
			t.Fatalf("prompts/get: %v", err)
		}
		b, _ := json.Marshal(gp.Messages)
		return string(b)
	}
	dyn1 := evPrefix + "demo://resource/dynamic/text/1"
	if got := getPrompt(ed); !strings.Contains(got, dyn1) || strings.Contains(got, "withheld") {
		t.Errorf("editor prompts/get: want the embedded %s, got %s", dyn1, got)
	}
	if got := getPrompt(vw); strings.Contains(got, "dynamic/text/1") || !strings.Contains(got, "resource withheld by policy") {
		t.Errorf("viewer prompts/get: want the embedded resource withheld, got %s", got)
	}

	// Dot segments and percent-encoded dots are removed before the policy.
	for _, u := range []string{
		evPrefix + "demo://resource/static/../dynamic/text/1",
		evPrefix + "demo://resource/static/%2e%2e/dynamic/text/1",
		evPrefix + "demo://resource/./static/document/../../dynamic/text/1",
		evPrefix + "demo://resource/%64ynamic/text/1",
	} {
		if _, _, err := readText(t, vw, u); err == nil || !strings.Contains(err.Error(), "denied by policy") {
			t.Errorf("viewer resources/read %s: want denied by policy, got %v", u, err)
		}
		if got, text, err := readText(t, ed, u); err != nil || got != dyn1 || !strings.Contains(text, "1") {
			t.Errorf("editor resources/read %s: want %s read, got %q %q %v", u, dyn1, got, text, err)
		}
	}
	if _, _, err := readText(t, ed, evPrefix+"demo://resource/static/..%2Fdynamic/text/1"); err == nil || !strings.Contains(err.Error(), "encoded path separator") {
		t.Errorf("resources/read with ..%%2F: want refused, got %v", err)
	}

	// A thread named by Toolplane-Thread must be the caller's.
	threadOf := func(token string) string {
		conn, err := grpcx.Dial(grpcAddr, grpcx.DialOptions{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		res, err := runtimev1.NewRuntimeServiceClient(conn).CreateThread(ctx20(t), &runtimev1.CreateThreadRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetThread().GetThreadId()
	}
	static := ""
	for _, u := range resourceURIs(t, vw) {
		if strings.HasPrefix(u, evStaticPre) {
			static = u
			break
		}
	}
	own := mcpClientHeaders(t, url, map[string]string{"Authorization": "Bearer " + viewerToken, runtimemcp.HeaderThread: threadOf(viewerToken)})
	if _, _, err := readText(t, own, static); err != nil {
		t.Fatalf("viewer resources/read on its own named thread: %v", err)
	}
	edThread := threadOf(editorToken)
	other := mcpClientHeaders(t, url, map[string]string{"Authorization": "Bearer " + viewerToken, runtimemcp.HeaderThread: edThread})
	_, _, err := readText(t, other, static)
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("viewer resources/read on the editor's thread: want not found, got %v", err)
	}
	if _, err := other.GetPrompt(ctx20(t), mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "everything_args-prompt",
		Arguments: map[string]string{"city": "Lyon"}}}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("viewer prompts/get on the editor's thread: want not found, got %v", err)
	}
	unknown := mcpClientHeaders(t, url, map[string]string{"Authorization": "Bearer " + viewerToken, runtimemcp.HeaderThread: "no-such-thread"})
	_, _, err2 := readText(t, unknown, static)
	if err2 == nil || err2.Error() != strings.ReplaceAll(err.Error(), edThread, "no-such-thread") {
		t.Errorf("unknown thread answered %v, another's thread %v: want the same answer", err2, err)
	}
}

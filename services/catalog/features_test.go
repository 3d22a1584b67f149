package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

func TestExposedURIRoundTrip(t *testing.T) {
	for _, c := range []struct{ server, uri string }{
		{"fs", "file:///tmp/a.txt"},
		{"team/tools", "demo://resource/static/document/x%20y"},
		{"we%ird name", "test://template/{id}/data"},
		{"a", "toolplane+mcp://b/c://d"}, // an upstream URI in our own form stays reversible
	} {
		exp := ExposeURI(c.server, c.uri)
		srv, orig, ok := ParseExposedURI(exp)
		if !ok || srv != c.server || orig != c.uri {
			t.Errorf("ExposeURI(%q, %q) = %q parses back as (%q, %q, %v)", c.server, c.uri, exp, srv, orig, ok)
		}
	}
	for _, bad := range []string{"file:///x", "toolplane+mcp://", "toolplane+mcp://srv", "toolplane+mcp:///x", "toolplane+mcp://srv/", "toolplane+mcp://%zz/x"} {
		if s, o, ok := ParseExposedURI(bad); ok {
			t.Errorf("ParseExposedURI(%q) = (%q, %q), want not ok", bad, s, o)
		}
	}
	re := templateRE("test://template/{id}/data")
	for uri, want := range map[string]bool{"test://template/123/data": true, "test://template/1/2/data": true, "test://template/123/datax": false, "xtest://template/1/data": false} {
		if got := re.MatchString(uri); got != want {
			t.Errorf("template match %q = %v, want %v", uri, got, want)
		}
	}
}

// Three server-everything instances: "a" prefixed, "b" and "c" unprefixed
// (c's URIs collide with b's and fall back to the namespaced form; its
// prompts collide and get the hash suffix).
func TestResourcesAndPromptsOfServers(t *testing.T) {
	ev := npmJS(t, "server-everything")
	srv := func(name string, prefix bool) string {
		return fmt.Sprintf(`%q: {"command": "node", "args": [%q, "stdio"], "tool_name_prefix": %v}`, name, ev, prefix)
	}
	h := start(t, extJSON(srv("a", true), srv("b", false), srv("c", false)), nil)
	ctx := ctxT(t)
	eventually(t, 20*time.Second, "resources of three servers", func() bool {
		res, err := h.svc.ListResources(ctx, &catalogv1.ListResourcesRequest{})
		seen := map[string]bool{}
		for _, r := range res.GetResources() {
			seen[r.GetServer()] = true
		}
		return err == nil && len(seen) == 3
	})
	res, err := h.svc.ListResources(ctx, &catalogv1.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	byServer := map[string]*catalogv1.Resource{}
	uris := map[string]bool{}
	for _, r := range res.GetResources() {
		if uris[r.GetUri()] {
			t.Fatalf("exposed URI %q listed twice", r.GetUri())
		}
		uris[r.GetUri()] = true
		if byServer[r.GetServer()] == nil && strings.Contains(r.GetOriginalUri(), "/static/document/") {
			byServer[r.GetServer()] = r
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(r.GetJson()), &m); err != nil || m["uri"] != r.GetUri() {
			t.Fatalf("resource JSON %s: uri is not the exposed one (%v)", r.GetJson(), err)
		}
	}
	a, b, c := byServer["a"], byServer["b"], byServer["c"]
	if a == nil || b == nil || c == nil {
		t.Fatalf("static documents per server: %v", byServer)
	}
	if a.GetUri() != ExposeURI("a", a.GetOriginalUri()) || b.GetUri() != b.GetOriginalUri() || c.GetUri() != ExposeURI("c", c.GetOriginalUri()) {
		t.Fatalf("exposed URIs: a %q, b %q, c %q", a.GetUri(), b.GetUri(), c.GetUri())
	}
	for _, r := range []*catalogv1.Resource{a, b, c} {
		out, err := h.svc.ReadResource(ctx, &catalogv1.ReadResourceRequest{Uri: r.GetUri()})
		if err != nil {
			t.Fatalf("read %s: %v", r.GetUri(), err)
		}
		var got struct {
			Contents []struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			} `json:"contents"`
		}
		if err := json.Unmarshal([]byte(out.GetResultJson()), &got); err != nil || out.GetServer() != r.GetServer() ||
			len(got.Contents) == 0 || got.Contents[0].URI != r.GetUri() || got.Contents[0].Text == "" {
			t.Fatalf("read %s: server %s, %s, %v", r.GetUri(), out.GetServer(), out.GetResultJson(), err)
		}
	}
	// An expansion of an unprefixed template goes to the first unprefixed server.
	out, err := h.svc.ReadResource(ctx, &catalogv1.ReadResourceRequest{Uri: "demo://resource/dynamic/text/5"})
	if err != nil || out.GetServer() != "b" || !strings.Contains(out.GetResultJson(), "5") {
		t.Fatalf("template read: %v %v", out, err)
	}
	for uri, code := range map[string]codes.Code{
		"":                                 codes.InvalidArgument,
		"nope://x":                         codes.NotFound,
		ExposeURI("zz", "demo://x"):        codes.NotFound,
		strings.Repeat("x", maxURIBytes+1): codes.InvalidArgument,
	} {
		if _, err := h.svc.ReadResource(ctx, &catalogv1.ReadResourceRequest{Uri: uri}); codeOf(err) != code {
			t.Errorf("read %.40q: %v, want %s", uri, err, code)
		}
	}
	// End users reach resources only through the runtime's front door.
	if _, err := h.user.ListResources(ctx, &catalogv1.ListResourcesRequest{}); codeOf(err) != codes.PermissionDenied {
		t.Errorf("user credential: %v, want PERMISSION_DENIED", err)
	}

	pr, err := h.svc.ListPrompts(ctx, &catalogv1.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names, completable := map[string]string{}, map[string]string{}
	for _, p := range pr.GetPrompts() {
		switch p.GetOriginalName() {
		case "simple-prompt":
			names[p.GetServer()] = p.GetName()
		case "completable-prompt":
			completable[p.GetServer()] = p.GetName()
		}
	}
	if names["a"] != "a_simple-prompt" || names["b"] != "simple-prompt" || !strings.HasPrefix(names["c"], "simple-prompt_") {
		t.Fatalf("prompt names: %v", names)
	}
	gp, err := h.svc.GetPrompt(ctx, &catalogv1.GetPromptRequest{Name: "a_args-prompt", Arguments: map[string]string{"city": "Oslo"}})
	if err != nil || gp.GetServer() != "a" || !strings.Contains(gp.GetResultJson(), "Oslo") {
		t.Fatalf("get prompt: %v %v", gp, err)
	}
	if _, err := h.svc.GetPrompt(ctx, &catalogv1.GetPromptRequest{Name: "no-such-prompt"}); codeOf(err) != codes.NotFound {
		t.Errorf("unknown prompt: %v", err)
	}
	cr, err := h.svc.Complete(ctx, &catalogv1.CompleteRequest{Prompt: completable["c"], ArgumentName: "department", ArgumentValue: "Sa"})
	if err != nil || cr.GetServer() != "c" || !strings.Contains(cr.GetResultJson(), `"Sales"`) {
		t.Fatalf("complete: %v %v", cr, err)
	}
	if _, err := h.svc.Complete(ctx, &catalogv1.CompleteRequest{ArgumentName: "x"}); codeOf(err) != codes.InvalidArgument {
		t.Errorf("complete without a reference: %v", err)
	}

	// A subscription on a's static document, updates made by a's own tool.
	sctx, cancel := ctxWithCancel(t)
	defer cancel()
	st, err := h.svc.SubscribeResource(sctx, &catalogv1.SubscribeResourceRequest{Uri: a.GetUri()})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || !m.GetSubscribed() {
		t.Fatalf("first message: %v %v", m, err)
	}
	if _, err := h.call(ctx, h.svc, "a_toggle-subscriber-updates", `{}`); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetUpdatedUri() != a.GetUri() {
		t.Fatalf("update: %v %v", m, err)
	}
	if _, err := h.svc.CloseThreadSessions(ctx, &catalogv1.CloseThreadSessionsRequest{}); codeOf(err) != codes.InvalidArgument {
		t.Errorf("CloseThreadSessions without a thread: %v", err)
	}
}

func ctxWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// A server that declares resources but answers resources/templates/list with
// -32601 still has its resources and prompts re-exported (each kind is
// listed on its own).
func TestFeaturesWithoutTemplatesList(t *testing.T) {
	h := start(t, extJSON(fmt.Sprintf(`"nt": {"command": %q, "args": ["notemplates"]}`, fixture)), nil)
	ctx := ctxT(t)
	eventually(t, 20*time.Second, "resources and prompts of a server without templates/list", func() bool {
		res, err := h.svc.ListResources(ctx, &catalogv1.ListResourcesRequest{})
		if err != nil || len(res.GetResources()) != 1 {
			return false
		}
		pr, err := h.svc.ListPrompts(ctx, &catalogv1.ListPromptsRequest{})
		return err == nil && len(pr.GetPrompts()) == 1
	})
}

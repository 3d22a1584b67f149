package runtimetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/egress"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func webCall(t *testing.T, w *WebSettings, use string, args map[string]any) (string, error) {
	t.Helper()
	d := NewDispatcher(Settings{ToolCallTimeout: 10 * time.Second, Web: w}, Deps{Workspace: NewWorkspace(t.TempDir())})
	name := runtimeassembly.ImplNames[use]
	tool := &runtimeassembly.Tool{Name: name, Source: runtimeassembly.SourceConfig, Use: use, Group: "web"}
	ec := &runtimechain.Call{
		Thread: &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1"}},
		View:   &runtimeassembly.View{Base: &runtimeassembly.Base{ByName: map[string]*runtimeassembly.Tool{name: tool}}},
		Name:   name, CallID: "c1", Args: args,
	}
	o, err := d.CallTool(context.Background(), ec)
	if err != nil {
		return "", err
	}
	return o.Text, nil
}

func wantBusiness(t *testing.T, err error, substr string) {
	t.Helper()
	var be *runtimechain.BusinessError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want a BUSINESS error containing %q", err, substr)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("err = %q, want it to contain %q", err, substr)
	}
}

const page = `<!doctype html><html><head><title>  The  Page </title><style>body{color:red}</style>
<script>var secret = "do-not-show";</script></head>
<body><nav><a href="/home">Home</a></nav>
<h1>Main heading</h1>
<p>First   paragraph with <b>bold</b> text and a <a href="/docs/a?x=1">relative link</a>.</p>
<ul><li>one</li><li>two</li></ul>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<pre>  keep   spacing
  here</pre>
<img src="x.png" alt="a diagram"><a href="javascript:alert(1)">js</a>
</body></html>`

func TestWebFetchDeniedAndAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, page)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-page":
			http.Redirect(w, r, "/page", http.StatusFound)
		case "/image":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG\r\n\x1a\n"))
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(strings.Repeat("x", 4096)))
		case "/slow":
			time.Sleep(700 * time.Millisecond)
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("late"))
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"a":1}`))
		case "/missing":
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)

	// Deny rules on: the loopback fake is refused, by address and by a name
	// that resolves to it (checked after DNS).
	deny := &WebSettings{Fetch: &egress.Policy{}}
	_, err := webCall(t, deny, "web.fetch", map[string]any{"url": srv.URL + "/page"})
	wantBusiness(t, err, "egress denied")
	_, err = webCall(t, deny, "web.fetch", map[string]any{"url": "http://localhost:" + u.Port() + "/page"})
	wantBusiness(t, err, "egress denied")
	_, err = webCall(t, deny, "web.fetch", map[string]any{"url": "http://[::ffff:127.0.0.1]:" + u.Port() + "/page"})
	wantBusiness(t, err, "egress denied")
	_, err = webCall(t, deny, "web.fetch", map[string]any{"url": "http://user:pw@" + u.Host + "/page"})
	wantBusiness(t, err, "credentials in the URL")
	_, err = webCall(t, deny, "web.fetch", map[string]any{"url": "file:///etc/passwd"})
	wantBusiness(t, err, "scheme")

	// Loopback explicitly allowed: the page is fetched and rendered.
	allow := &WebSettings{Fetch: &egress.Policy{Allow: loopback, MaxResponseBytes: 2048, Timeout: 300 * time.Millisecond}}
	txt, err := webCall(t, allow, "web.fetch", map[string]any{"url": srv.URL + "/to-page"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"URL: " + srv.URL + "/page\n", "Title: The Page\n", "# Main heading", "First paragraph with bold text and a relative link (" + srv.URL + "/docs/a?x=1).",
		"- one\n- two", "k | v", "a | 1", "  keep   spacing\n  here", "[image: a diagram]", "Home (" + srv.URL + "/home)"} {
		if !strings.Contains(txt, want) {
			t.Errorf("fetched text lacks %q:\n%s", want, txt)
		}
	}
	for _, not := range []string{"do-not-show", "color:red", "javascript:"} {
		if strings.Contains(txt, not) {
			t.Errorf("fetched text holds %q:\n%s", not, txt)
		}
	}

	// A redirect is re-checked: to the metadata address it is refused even
	// with loopback allowed.
	_, err = webCall(t, allow, "web.fetch", map[string]any{"url": srv.URL + "/to-metadata"})
	wantBusiness(t, err, "169.254.169.254")
	// Content type, size and time limits.
	_, err = webCall(t, allow, "web.fetch", map[string]any{"url": srv.URL + "/image"})
	wantBusiness(t, err, "content type image/png")
	_, err = webCall(t, allow, "web.fetch", map[string]any{"url": srv.URL + "/big"})
	wantBusiness(t, err, "larger than the limit")
	_, err = webCall(t, allow, "web.fetch", map[string]any{"url": srv.URL + "/slow"})
	wantBusiness(t, err, "did not answer in time")
	_, err = webCall(t, allow, "web.fetch", map[string]any{"url": srv.URL + "/missing"})
	wantBusiness(t, err, "HTTP 404")
	txt, err = webCall(t, allow, "web.fetch", map[string]any{"url": srv.URL + "/json?token=secret"})
	if err != nil || !strings.Contains(txt, `{"a":1}`) || strings.Contains(txt, "secret") {
		t.Fatalf("json fetch = %q, %v (want the body, the query redacted)", txt, err)
	}
	// The text bound.
	short := &WebSettings{Fetch: &egress.Policy{Allow: loopback}, FetchMaxChars: 10}
	txt, err = webCall(t, short, "web.fetch", map[string]any{"url": srv.URL + "/page"})
	if err != nil || !strings.Contains(txt, "[truncated: 10 of") {
		t.Fatalf("bounded fetch = %q, %v", txt, err)
	}
	// Not configured.
	_, err = webCall(t, nil, "web.fetch", map[string]any{"url": srv.URL})
	wantBusiness(t, err, "runtime.web.fetch")
}

func TestWebSearchBackends(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/search":
			if r.URL.Query().Get("format") != "json" || r.URL.Query().Get("q") != "go egress" {
				http.Error(w, "bad query "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"results":[{"title":"First","url":"https://a.example/1","content":"snippet\none"},{"title":"no url"},{"title":"Second","url":"https://b.example/2","content":""},{"title":"Third","url":"https://c.example/3"}]}`)
		case "/v1/chat/completions":
			var body struct {
				Model    string `json:"model"`
				Messages []struct{ Role, Content string }
			}
			if r.Header.Get("Authorization") != "Bearer k-123" || json.NewDecoder(r.Body).Decode(&body) != nil || body.Model != "sonar" || body.Messages[len(body.Messages)-1].Content != "go egress" {
				http.Error(w, "unauthorized or bad body", http.StatusUnauthorized)
				return
			}
			fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"Egress is checked at dial time [1]."}}],"search_results":[{"title":"Doc","url":"https://d.example/"}]}`)
		}
	}))
	defer srv.Close()

	sx := &SearchBackend{Kind: SearchSearXNG, URL: srv.URL, MaxResults: 2, Policy: &egress.Policy{}}
	// The backend's loopback address is refused until the operator allows it.
	_, err := webCall(t, &WebSettings{Search: sx}, "web.search", map[string]any{"query": "go egress"})
	if err == nil || !strings.Contains(err.Error(), "egress denied") {
		t.Fatalf("search through a denied backend = %v", err)
	}
	sx.Policy = &egress.Policy{Allow: loopback}
	txt, err := webCall(t, &WebSettings{Search: sx}, "web.search", map[string]any{"query": "go egress"})
	if err != nil {
		t.Fatal(err)
	}
	want := "1. First\n   https://a.example/1\n   snippet one\n2. Second\n   https://b.example/2"
	if txt != want {
		t.Fatalf("searxng results:\n%s\nwant:\n%s", txt, want)
	}
	txt, _ = webCall(t, &WebSettings{Search: sx}, "web.search", map[string]any{"query": "go egress", "max_results": 1.0})
	if strings.Contains(txt, "Second") {
		t.Fatalf("max_results 1 listed two:\n%s", txt)
	}
	_, err = webCall(t, &WebSettings{Search: sx}, "web.search", map[string]any{"query": "  "})
	wantBusiness(t, err, "query must not be empty")

	oa := &SearchBackend{Kind: SearchOpenAI, URL: srv.URL + "/v1", APIKey: "k-123", Model: "sonar", Policy: &egress.Policy{Allow: loopback}}
	txt, err = webCall(t, &WebSettings{Search: oa}, "web.search", map[string]any{"query": "go egress"})
	if err != nil || txt != "Egress is checked at dial time [1].\n\nSources:\n1. Doc — https://d.example/" {
		t.Fatalf("openai search = %q, %v", txt, err)
	}
	oa.APIKey = "wrong"
	_, err = webCall(t, &WebSettings{Search: oa}, "web.search", map[string]any{"query": "go egress"})
	if err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("a refused key: err = %v (want a failure that never shows the key)", err)
	}
}

func TestHTMLTextMalformed(t *testing.T) {
	// The HTML5 parser recovers from broken markup; nothing is lost or
	// duplicated and no tag text leaks.
	_, txt := HTMLText([]byte(`<p>unclosed <b>bold <i>both</p><div>next<script>x()`), nil)
	if txt != "unclosed bold both\n\nnext" {
		t.Fatalf("text = %q", txt)
	}
}

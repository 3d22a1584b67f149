package runtimemcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
)

// testVerifier is a real authenticator with two user tokens, alice and
// mallory (the suite's *auth.Authenticator).
func testVerifier(t testing.TB) Verifier {
	t.Helper()
	a, err := auth.NewAuthenticator(auth.Options{Enabled: true, Tokens: []auth.TokenSpec{
		{Name: "alice", SHA256: auth.HashToken("alice"), Kind: auth.KindUser, Principal: &typev1.Principal{Subject: "alice", Tenant: "t1", Roles: []string{"user"}}},
		{Name: "alice2", SHA256: auth.HashToken("alice-rotated"), Kind: auth.KindUser, Principal: &typev1.Principal{Subject: "alice", Tenant: "t1", Roles: []string{"user"}}},
		{Name: "mallory", SHA256: auth.HashToken("mallory"), Kind: auth.KindUser, Principal: &typev1.Principal{Subject: "mallory", Tenant: "t1", Roles: []string{"user"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ran is what the fake runtime has done so far (threads created, thread
// lookups including tool calls).
func (f *fakeRuntime) ran() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("creates=%d lookups=%d", f.creates, len(f.auths))
}

type rawReq struct {
	method, body string
	headers      map[string]string
}

func send(t *testing.T, url string, rq rawReq) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	req, _ := http.NewRequest(rq.method, url, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	for k, v := range rq.headers {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header, string(b)
}

// legacySession opens a session-based MCP session for token and returns
// the client and its session id.
func legacySession(t *testing.T, url, token string) (*client.Client, string) {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithLegacyProtocolOnly())
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	if tr.GetSessionId() == "" {
		t.Fatal("no session id")
	}
	return c, tr.GetSessionId()
}

const toolsCall = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"everything__add","arguments":{}}}`

// The front door's hostile cases (docs/architecture.md §5): every refusal
// is an HTTP status (never a JSON-RPC error in a 200), and nothing reaches
// the runtime.
func TestGuardHostileCases(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{Verifier: testVerifier(t), AllowedOrigins: []string{"https://app.example"}, MaxBodyBytes: 64 << 10})
	alice, sid := legacySession(t, url, "alice")
	call(t, alice, "tool_search", map[string]any{}, nil) // promotes everything__add in alice's thread

	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("x", 70<<10) + `"}}}`
	cases := []struct {
		name      string
		rq        rawReq
		code      int
		challenge string // WWW-Authenticate prefix, when 401
	}{
		{"POST without credential", rawReq{method: http.MethodPost, body: toolsCall, headers: map[string]string{"Mcp-Session-Id": sid}}, 401, `Bearer realm="toolplane"`},
		{"GET stream without credential", rawReq{method: http.MethodGet, headers: map[string]string{"Mcp-Session-Id": sid}}, 401, `Bearer realm="toolplane"`},
		{"DELETE without credential", rawReq{method: http.MethodDelete, headers: map[string]string{"Mcp-Session-Id": sid}}, 401, `Bearer realm="toolplane"`},
		{"POST with an invalid credential", rawReq{method: http.MethodPost, body: toolsCall, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer nope"}}, 401, `Bearer realm="toolplane", error="invalid_token"`},
		{"initialize with an invalid credential", rawReq{method: http.MethodPost, body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`, headers: map[string]string{"Authorization": "Bearer nope"}}, 401, `Bearer realm="toolplane", error="invalid_token"`},
		{"malformed Authorization", rawReq{method: http.MethodPost, body: toolsCall, headers: map[string]string{"Authorization": "Basic YWxpY2U6eA=="}}, 401, `Bearer realm="toolplane", error="invalid_token"`},
		{"another principal's session id (POST)", rawReq{method: http.MethodPost, body: toolsCall, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer mallory"}}, 404, ""},
		{"another principal's session id (GET)", rawReq{method: http.MethodGet, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer mallory"}}, 404, ""},
		{"another principal's session id (DELETE)", rawReq{method: http.MethodDelete, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer mallory"}}, 404, ""},
		{"an invented session id", rawReq{method: http.MethodPost, body: toolsCall, headers: map[string]string{"Mcp-Session-Id": "mcp-session-00000000-0000-0000-0000-000000000000", "Authorization": "Bearer alice"}}, 404, ""},
		{"foreign Origin", rawReq{method: http.MethodPost, body: toolsCall, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer alice", "Origin": "https://evil.example"}}, 403, ""},
		{"null Origin", rawReq{method: http.MethodPost, body: toolsCall, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer alice", "Origin": "null"}}, 403, ""},
		{"body over mcp_max_body_bytes", rawReq{method: http.MethodPost, body: big, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer alice"}}, 413, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.ran()
			code, h, body := send(t, url, tc.rq)
			if code != tc.code {
				t.Fatalf("status %d, want %d (%s)", code, tc.code, body)
			}
			if tc.challenge != "" && !strings.HasPrefix(h.Get("WWW-Authenticate"), tc.challenge) {
				t.Errorf("WWW-Authenticate %q, want prefix %q", h.Get("WWW-Authenticate"), tc.challenge)
			}
			if strings.Contains(body, `"jsonrpc"`) {
				t.Errorf("refusal carried a JSON-RPC body: %s", body)
			}
			if after := f.ran(); after != before {
				t.Errorf("the runtime was reached: %s → %s", before, after)
			}
		})
	}
	// alice's session survived every attempt (mallory's DELETE included).
	if res := call(t, alice, "everything__add", map[string]any{}, nil); res.IsError {
		t.Fatalf("alice's session broken after the hostile requests: %q", textOf(t, res))
	}
	// Her rotated token names the same principal: the session is hers (the
	// fake runtime keys threads by token, so only the guard is checked).
	if code, _, body := send(t, url, rawReq{method: http.MethodPost, body: `{"jsonrpc":"2.0","id":3,"method":"ping"}`, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer alice-rotated"}}); code != 200 {
		t.Errorf("the session's own principal with another token: %d %s", code, body)
	}
	// An allowed Origin is served.
	if code, _, body := send(t, url, rawReq{method: http.MethodPost, body: toolsCall, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer alice", "Origin": "https://app.example"}}); code != 200 {
		t.Errorf("allowed origin: %d %s", code, body)
	}
	// The owner's DELETE ends the session; the id is then refused to her too.
	if code, _, _ := send(t, url, rawReq{method: http.MethodDelete, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer alice"}}); code != 200 {
		t.Fatalf("owner's DELETE: %d", code)
	}
	if code, _, _ := send(t, url, rawReq{method: http.MethodPost, body: toolsCall, headers: map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer alice"}}); code != 404 {
		t.Errorf("deleted session: %d, want 404", code)
	}
}

// A chunked body (no Content-Length) over the bound is refused after
// reading at most limit+1 bytes.
func TestGuardChunkedBodyRefused(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{MaxBodyBytes: 4 << 10})
	r := &countingReader{n: 1 << 30}
	req, _ := http.NewRequest(http.MethodPost, url, r)
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
	}
	if n := r.read.Load(); n > 8<<20 {
		t.Errorf("read %d bytes of a 1 GiB body", n)
	}
	if f.ran() != "creates=0 lookups=0" {
		t.Errorf("runtime reached: %s", f.ran())
	}
}

// countingReader yields n bytes of '{' without allocating them.
type countingReader struct {
	n    int64
	read atomic.Int64 // written by the server's goroutine, read by the test
}

func (c *countingReader) Read(p []byte) (int, error) {
	done := c.read.Load()
	if done >= c.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), c.n-done)
	for i := range p[:k] {
		p[i] = '{'
	}
	c.read.Add(k)
	return int(k), nil
}

// BenchmarkRefuseOversizedBody: refusing a body over mcp_max_body_bytes
// costs the same for 8 MiB and 1 GiB, with and without Content-Length
// (memory flat: at most limit+1 bytes are read).
func BenchmarkRefuseOversizedBody(b *testing.B) {
	s := New(nil, Options{Verifier: testVerifier(b)})
	h := s.guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { b.Fatal("reached mcp-go") }))
	for _, size := range []int64{8 << 20, 64 << 20, 1 << 30} {
		for _, chunked := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%dMiB/chunked=%v", size>>20, chunked), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					req := httptest.NewRequest(http.MethodPost, "/mcp", &countingReader{n: size})
					req.Header.Set("Authorization", "Bearer alice")
					req.ContentLength = size
					if chunked {
						req.ContentLength = -1
					}
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusRequestEntityTooLarge {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		}
	}
}

package runtimemcp

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`

// TestSessionsPerPrincipalCapped: a principal past
// mcp_max_sessions_per_principal loses its least recently used idle session
// (404 from then on), other principals are untouched, and when every one of
// its sessions has a request in flight (open GET streams) a new one is 429
// naming the limit.
func TestSessionsPerPrincipalCapped(t *testing.T) {
	f := newFakeRuntime()
	v := testVerifier(t)
	url, srv := startServer(t, startRuntime(t, f), Options{Verifier: v, MaxSessionsPerPrincipal: 3})
	open := func(tok string) string {
		t.Helper()
		code, h, body := send(t, url, rawReq{method: http.MethodPost, body: initBody, headers: map[string]string{"Authorization": "Bearer " + tok}})
		if code != 200 || h.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize as %s: %d %s", tok, code, body)
		}
		return h.Get("Mcp-Session-Id")
	}
	ping := func(tok, sid string) int {
		code, _, _ := send(t, url, rawReq{method: http.MethodPost, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, headers: map[string]string{"Authorization": "Bearer " + tok, "Mcp-Session-Id": sid}})
		return code
	}
	mal := open("mallory")
	var a []string
	for range 3 {
		a = append(a, open("alice"))
		time.Sleep(5 * time.Millisecond)
	}
	if ping("alice", a[0]) != 200 { // a[0] is now the most recently used
		t.Fatal("alice's first session")
	}
	a4 := open("alice") // evicts a[1], the least recently used idle one
	if c := ping("alice", a[1]); c != 404 {
		t.Fatalf("evicted session answered %d, want 404", c)
	}
	for _, sid := range []string{a[0], a[2], a4} {
		if c := ping("alice", sid); c != 200 {
			t.Fatalf("alice's kept session %s: %d", sid, c)
		}
	}
	if c := ping("mallory", mal); c != 200 {
		t.Fatalf("another principal's session evicted: %d", c)
	}
	md := metadata.Pairs("authorization", "Bearer alice")
	id, err := v.Credential(metadata.NewIncomingContext(context.Background(), md))
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.caps.count(principalKeyOf(id)); n != 3 {
		t.Fatalf("alice holds %d sessions, want 3", n)
	}

	// Busy sessions are never evicted: with three open GET streams a
	// fourth session is refused.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, sid := range []string{a[0], a[2], a4} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		code, h, body := send(t, url, rawReq{method: http.MethodPost, body: initBody, headers: map[string]string{"Authorization": "Bearer alice"}})
		if code == http.StatusTooManyRequests {
			if !strings.Contains(body, "server.http.mcp_max_sessions_per_principal") || h.Get("Retry-After") == "" || strings.Contains(body, `"jsonrpc"`) {
				t.Fatalf("refusal: %v %s", h, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fourth session with three busy ones: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond) // the streams may not be open yet
	}
	// A GET without a session (which would open one) is refused as well.
	if code, _, _ := send(t, url, rawReq{method: http.MethodGet, headers: map[string]string{"Authorization": "Bearer alice"}}); code != http.StatusTooManyRequests {
		t.Fatalf("sessionless GET at the cap: %d", code)
	}
	// Mallory is not affected by alice's cap.
	if open("mallory") == "" {
		t.Fatal("mallory refused")
	}
	cancel()
}

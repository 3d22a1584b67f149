package runtimemcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

func do(t *testing.T, method, url, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return res, "" // a stream: do not wait for it to end
	}
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// GET /mcp without a session id is 405 with Allow (no empty stream for an
// HTTP+SSE client to hang on); a GET with a live session id opens its
// stream; a session-based POST without a session id is 400 and with an
// unknown one 404; initialize and 2026-07-28 requests need none.
func TestSessionHeaderRules(t *testing.T) {
	f := newFakeRuntime()
	url := startFrontDoor(t, startRuntime(t, f), Options{})
	auth := map[string]string{"Authorization": "Bearer alice"}

	res, body := do(t, http.MethodGet, url, "", map[string]string{"Accept": "text/event-stream"})
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "POST, DELETE" || !strings.Contains(body, "Mcp-Session-Id") {
		t.Fatalf("GET without session: %d Allow=%q %s", res.StatusCode, res.Header.Get("Allow"), body)
	}

	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + mcp.LATEST_LEGACY_PROTOCOL_VERSION + `","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	res, body = do(t, http.MethodPost, url, init, auth)
	sid := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize without a session id: %d %q %s", res.StatusCode, sid, body)
	}
	withSession := map[string]string{"Authorization": "Bearer alice", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.LATEST_LEGACY_PROTOCOL_VERSION}
	res, _ = do(t, http.MethodGet, url, "", map[string]string{"Authorization": "Bearer alice", "Mcp-Session-Id": sid, "Accept": "text/event-stream"})
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET with a live session: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}

	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	res, body = do(t, http.MethodPost, url, list, map[string]string{"Authorization": "Bearer alice", "Mcp-Protocol-Version": mcp.LATEST_LEGACY_PROTOCOL_VERSION})
	var e mcp.JSONRPCError
	if res.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != mcp.INVALID_REQUEST || e.ID.String() != "int64:7" || !strings.Contains(e.Error.Message, "Mcp-Session-Id") {
		t.Fatalf("session-based POST without a session id: %d %s", res.StatusCode, body)
	}
	res, body = do(t, http.MethodPost, url, list, map[string]string{"Authorization": "Bearer alice", "Mcp-Session-Id": "no-such-session"})
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session id: %d %s", res.StatusCode, body)
	}
	res, body = do(t, http.MethodPost, url, list, withSession)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "tool_search") {
		t.Fatalf("POST with the session: %d %s", res.StatusCode, body)
	}

	modern := `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion20260728 + `","io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	res, body = do(t, http.MethodPost, url, modern, map[string]string{"Authorization": "Bearer alice", "Mcp-Protocol-Version": mcp.ProtocolVersion20260728, "Mcp-Method": "tools/list"})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "tool_search") {
		t.Fatalf("2026-07-28 POST without a session id: %d %s", res.StatusCode, body)
	}
}

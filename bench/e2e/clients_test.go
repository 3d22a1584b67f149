//go:build benche2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// httpClient posts JSON to one REST route with keep-alive.
type httpClient struct {
	url, token string
	c          *http.Client
}

func (h *httpClient) do(t testing.TB, body string) {
	if h.c == nil {
		h.c = &http.Client{Timeout: 30 * time.Second}
	}
	req, _ := http.NewRequest("POST", h.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", h.url, resp.StatusCode, raw)
	}
}

// directEcho is a direct mcp-go client (stdio) of its own server-everything
// process: the baseline of the CallTool figures.
func directEcho(t testing.TB) func() {
	c, err := client.NewStdioMCPClient("node", nil, everythingJS(t), "stdio")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "bench-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": "hello"}
	return func() {
		r, err := c.CallTool(ctx, req)
		if err != nil || r.IsError {
			t.Fatalf("direct echo: %v %v", err, r)
		}
	}
}

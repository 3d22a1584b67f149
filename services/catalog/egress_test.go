package catalog

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/svckit"
)

// TestEgressPolicy: with the default catalog.egress (nothing allowed), an
// http/sse MCP server on loopback, link-local metadata or a private address
// written through the API is refused naming the field, and one in the file
// is FAILED at dial time without the loopback handler ever running; with
// loopback allowed the same write is accepted.
func TestEgressPolicy(t *testing.T) {
	var hits atomic.Int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer fake.Close()
	h := start(t, `{"mcpServers": {"local": {"type": "http", "url": "`+fake.URL+`/mcp"}, "meta": {"type": "sse", "url": "http://169.254.169.254/sse"}}}`,
		func(c *Config, _ *svckit.Env) { c.Egress = EgressConfig{} })
	ctx := ctxT(t)
	for _, u := range []string{fake.URL + "/mcp", "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/mcp", "http://localhost:9/mcp", "http://[::1]:9/mcp", "file:///etc/passwd"} {
		_, err := h.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{{Name: "x", Type: catalogv1.ServerType_SERVER_TYPE_HTTP, Url: u}}})
		if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "url") {
			t.Errorf("ReplaceServers %s: %v, want INVALID_ARGUMENT naming the url", u, err)
		}
	}
	for _, name := range []string{"local", "meta"} {
		s := h.server(name)
		if s.GetState() != catalogv1.ServerState_SERVER_STATE_FAILED || !strings.Contains(s.GetLastError(), "egress") {
			t.Errorf("%s: %s %q, want FAILED by the egress policy", name, s.GetState(), s.GetLastError())
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback MCP server was reached %d times with loopback denied", n)
	}
	allowed := start(t, "", nil) // the harness allows loopback
	if _, err := allowed.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{{Name: "x", Type: catalogv1.ServerType_SERVER_TYPE_HTTP, Url: fake.URL + "/mcp"}}}); err != nil {
		t.Fatalf("loopback allowed: %v", err)
	}
	eventually(t, 10e9, "the allowed server was dialled", func() bool { return hits.Load() > 0 })
}

package catalog

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// echoServer starts an in-process mcp-go echo server over streamable HTTP
// on loopback and returns its /mcp URL.
func echoServer(b *testing.B) string {
	s := server.NewMCPServer("bench-echo", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewToolWithRawSchema("echo", "Echo", []byte(`{"type":"object","properties":{"message":{"type":"string"}}}`)),
		func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(r.GetString("message", "")), nil
		})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	b.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func directClient(b *testing.B, url string) *client.Client {
	// The same transport options as the catalog's sessions (continuous
	// listening for list_changed, which keeps the protocol at 2025-11-25),
	// so both paths speak the same protocol version.
	c, err := client.NewStreamableHttpClient(url, transport.WithContinuousListening())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(int(float64(len(s))*p), len(s)-1)]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// BenchmarkCallTool measures CallTool through the catalog over gRPC
// loopback (with the full interceptor chain: authentication, class check,
// validation) against a direct mcp-go client call, both to the same
// in-process Go echo server over streamable HTTP on loopback. Sub-benchmarks
// `direct` and `catalog` give ns/op and allocs/op of each path (allocations
// of the whole process: client, catalog and echo server); `paired`
// interleaves one call of each per iteration and reports the added latency
// (catalog − direct) at p50 and p99 in µs.
func BenchmarkCallTool(b *testing.B) {
	url := echoServer(b)
	direct := directClient(b, url)
	h := start(b, fmt.Sprintf(`{"mcpServers": {"echo": {"type": "http", "url": %q}}}`, url), nil)
	ctx := context.Background()
	dreq := mcp.CallToolRequest{}
	dreq.Params.Name = "echo"
	dreq.Params.Arguments = map[string]any{"message": "hi"}
	creq := &catalogv1.CallToolRequest{Name: "echo_echo", Arguments: args(b, `{"message":"hi"}`)}
	callDirect := func() {
		if _, err := direct.CallTool(ctx, dreq); err != nil {
			b.Fatal(err)
		}
	}
	callCatalog := func() {
		r, err := h.svc.CallTool(ctx, creq)
		if err != nil || textOf(r) != "hi" {
			b.Fatalf("%v %v", r, err)
		}
	}
	b.Logf("protocol: catalog %s, direct %s", h.srv.Manager().Statuses()[0].ProtocolVersion, direct.ProtocolVersion())
	for i := 0; i < 200; i++ { // warm up connections and pools
		callDirect()
		callCatalog()
	}
	run := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				f()
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			b.ReportMetric(us(percentile(lat, 0.50)), "p50-µs")
			b.ReportMetric(us(percentile(lat, 0.99)), "p99-µs")
		})
	}
	run("direct", callDirect)
	run("catalog", callCatalog)
	b.Run("paired", func(b *testing.B) {
		dl := make([]time.Duration, 0, b.N)
		cl := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			callDirect()
			t1 := time.Now()
			callCatalog()
			t2 := time.Now()
			dl = append(dl, t1.Sub(t0))
			cl = append(cl, t2.Sub(t1))
		}
		b.ReportMetric(us(percentile(cl, 0.50)-percentile(dl, 0.50)), "added-p50-µs")
		b.ReportMetric(us(percentile(cl, 0.99)-percentile(dl, 0.99)), "added-p99-µs")
	})
}

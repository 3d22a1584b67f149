package runtimemcp

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeretention"
)

// fakeCatalog serves WatchCatalog: a SNAPSHOT, then one CHANGED event per
// call of changed.
type fakeCatalog struct {
	catalogv1.UnimplementedCatalogServiceServer
	mu      sync.Mutex
	streams []chan struct{}
}

func (f *fakeCatalog) WatchCatalog(_ *catalogv1.WatchCatalogRequest, stream grpc.ServerStreamingServer[catalogv1.WatchCatalogResponse]) error {
	ch := make(chan struct{}, 16)
	f.mu.Lock()
	f.streams = append(f.streams, ch)
	f.mu.Unlock()
	if err := stream.Send(&catalogv1.WatchCatalogResponse{Event: &catalogv1.CatalogEvent{Type: catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_SNAPSHOT}}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-ch:
			if err := stream.Send(&catalogv1.WatchCatalogResponse{Event: &catalogv1.CatalogEvent{Type: catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_CHANGED, ServersChanged: []string{"everything"}}}); err != nil {
				return err
			}
		}
	}
}

// changed sends a CHANGED event on every open watch.
func (f *fakeCatalog) changed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.streams {
		ch <- struct{}{}
	}
}

func (f *fakeCatalog) watching() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.streams) > 0
}

func startCatalog(t *testing.T, f *fakeCatalog) catalogv1.CatalogServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	catalogv1.RegisterCatalogServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(); gs.Stop() })
	return catalogv1.NewCatalogServiceClient(conn)
}

func count(n *notes, method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, x := range n.all {
		if x.Method == method {
			c++
		}
	}
	return c
}

func shortRechecks(t *testing.T) {
	old := recheckDelays
	recheckDelays = []time.Duration{20 * time.Millisecond, 150 * time.Millisecond}
	t.Cleanup(func() { recheckDelays = old })
}

// stays asserts that n holds want notices of method for a while.
func stays(t *testing.T, n *notes, method string, want int, what string) {
	t.Helper()
	time.Sleep(400 * time.Millisecond)
	if got := count(n, method); got != want {
		t.Fatalf("%s: %d %s, want %d", what, got, method, want)
	}
}

const listChanged = "notifications/tools/list_changed"

// On protocol 2026-07-28 a client that opened subscriptions/listen for tool
// changes (mcp-go's client) is told after tool_search promoted a tool —
// from another request of the same credential — and after an upstream
// change that removed a tool from its thread; an upstream change that
// leaves its tools alone sends nothing, and a listen stream that did not
// ask for tool changes gets none.
func TestSessionlessListChanged(t *testing.T) {
	shortRechecks(t)
	f := newFakeRuntime()
	cat := &fakeCatalog{}
	url, fd := startServer(t, startRuntime(t, f), Options{Catalog: startCatalog(t, cat)})
	hdr := map[string]string{"Authorization": "Bearer bob"}
	listener, ir, n := connect(t, url, hdr, false)
	if ir.ProtocolVersion != mcp.ProtocolVersion20260728 {
		t.Fatalf("negotiated %q, want %q", ir.ProtocolVersion, mcp.ProtocolVersion20260728)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, err := listener.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) { t.Errorf("listen: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	other, _, on := connect(t, url, hdr, false)
	stopOther, err := other.ListenAsync(ctx, mcp.SubscriptionFilter{PromptsListChanged: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stopOther()
	waitFor(t, func() bool {
		return cat.watching() && len(fd.subscribers(func(*subscriber) bool { return true })) == 1
	}, "the listen stream registered")

	caller, _, _ := connect(t, url, hdr, false)
	call(t, caller, "tool_search", map[string]any{"query": "add"}, nil)
	waitFor(t, func() bool { return count(n, listChanged) == 1 }, "list_changed after tool_search on 2026-07-28")
	if got := names(list(t, listener)); !slices.Contains(got, "everything__add") {
		t.Fatalf("tools after the notice: %v", got)
	}

	cat.changed() // nothing this thread binds changed
	stays(t, n, listChanged, 1, "catalog change that leaves the tools alone")

	f.mu.Lock()
	f.hideEcho = true
	f.mu.Unlock()
	cat.changed()
	waitFor(t, func() bool { return count(n, listChanged) == 2 }, "list_changed after an upstream removal")
	if got := names(list(t, listener)); slices.Contains(got, "echo") {
		t.Fatalf("tools after the upstream removal: %v", got)
	}
	if c := count(on, listChanged); c != 0 {
		t.Errorf("a listen stream that asked for prompts only got %d tool notices", c)
	}
}

// A session-based session that listed its tools is told when an upstream
// change alters them (on its GET stream), once per change.
func TestSessionListChangedUpstream(t *testing.T) {
	shortRechecks(t)
	f := newFakeRuntime()
	cat := &fakeCatalog{}
	url := startFrontDoor(t, startRuntime(t, f), Options{Catalog: startCatalog(t, cat)})
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer alice"}), transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithLegacyProtocolOnly())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := &notes{}
	c.OnNotification(n.add)
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "frontdoor-test", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := names(list(t, c)); len(got) != 2 {
		t.Fatalf("tools = %v", got)
	}
	waitFor(t, cat.watching, "the catalog watch")
	time.Sleep(100 * time.Millisecond) // the GET stream opens

	cat.changed()
	stays(t, n, listChanged, 0, "catalog change that leaves the tools alone")
	f.mu.Lock()
	f.hideEcho = true
	f.mu.Unlock()
	cat.changed()
	waitFor(t, func() bool { return count(n, listChanged) == 1 }, "list_changed after an upstream removal (session-based)")
	if got := names(list(t, c)); !slices.Equal(got, []string{"tool_search"}) {
		t.Fatalf("tools after the removal = %v", got)
	}
	stays(t, n, listChanged, 1, "one notice per change")
}

// Retention finds the front door's threads by the metadata key it writes.
func TestRetentionKnowsTheBindingKey(t *testing.T) {
	if runtimeretention.FrontDoorMetadataKey != MetadataBinding {
		t.Fatalf("runtimeretention.FrontDoorMetadataKey = %q, runtimemcp.MetadataBinding = %q", runtimeretention.FrontDoorMetadataKey, MetadataBinding)
	}
}

package runtimetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// FakeCatalog is an in-memory CatalogService over a fixed tool list. Its
// hash is SHA-256 over the sorted "name\x00description" lines of the
// candidate set (not the real catalog's RFC 8785 recipe; only equality
// matters to the runtime). Mutate changes tools WITHOUT a watch event, to
// simulate a catalog that moved between assembly and search.
type FakeCatalog struct {
	catalogv1.UnimplementedCatalogServiceServer
	mu    sync.Mutex
	tools []*catalogv1.Tool
	Calls []string // names passed to CallTool
}

// NewFakeCatalog returns a catalog serving tools (server "fake").
func NewFakeCatalog(tools ...*catalogv1.Tool) *FakeCatalog { return &FakeCatalog{tools: tools} }

// Mutate applies fn to the tool list under the lock (no event is sent).
func (f *FakeCatalog) Mutate(fn func(tools []*catalogv1.Tool) []*catalogv1.Tool) {
	f.mu.Lock()
	f.tools = fn(f.tools)
	f.mu.Unlock()
}

func (f *FakeCatalog) subset(c *typev1.StringList) []*catalogv1.Tool {
	if c == nil {
		return slices.Clone(f.tools)
	}
	var out []*catalogv1.Tool
	for _, t := range f.tools {
		if slices.Contains(c.GetValues(), t.GetName()) {
			out = append(out, t)
		}
	}
	return out
}

// Hash returns the fake hash of a tool set.
func Hash(tools []*catalogv1.Tool) string {
	lines := make([]string, 0, len(tools))
	for _, t := range tools {
		lines = append(lines, t.GetName()+"\x00"+t.GetDescription())
	}
	slices.Sort(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:])[:16]
}

// ListTools implements the RPC (one page).
func (f *FakeCatalog) ListTools(context.Context, *catalogv1.ListToolsRequest) (*catalogv1.ListToolsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &catalogv1.ListToolsResponse{Tools: slices.Clone(f.tools), TotalSize: int32(len(f.tools))}, nil
}

// GetCatalog implements the RPC.
func (f *FakeCatalog) GetCatalog(_ context.Context, r *catalogv1.GetCatalogRequest) (*catalogv1.GetCatalogResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.subset(r.GetCandidates())
	resp := &catalogv1.GetCatalogResponse{CatalogHash: Hash(set), ToolCount: int32(len(set))}
	for _, n := range r.GetCandidates().GetValues() {
		if !slices.ContainsFunc(set, func(t *catalogv1.Tool) bool { return t.GetName() == n }) {
			resp.Unknown = append(resp.Unknown, n)
		}
	}
	return resp, nil
}

// SearchTools implements the `select:` form and a substring search.
func (f *FakeCatalog) SearchTools(_ context.Context, r *catalogv1.SearchToolsRequest) (*catalogv1.SearchToolsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.subset(r.GetCandidates())
	resp := &catalogv1.SearchToolsResponse{CatalogHash: Hash(set)}
	q := strings.TrimSpace(r.GetQuery())
	for _, t := range set {
		match := strings.Contains(strings.ToLower(t.GetName()+" "+t.GetDescription()), strings.ToLower(q))
		if sel, ok := strings.CutPrefix(q, "select:"); ok {
			match = slices.Contains(strings.Split(sel, ","), t.GetName())
		}
		if match {
			resp.Hits = append(resp.Hits, &catalogv1.SearchHit{Tool: t, Score: 1})
		}
	}
	return resp, nil
}

// CallTool records the call and echoes the tool name.
func (f *FakeCatalog) CallTool(_ context.Context, r *catalogv1.CallToolRequest) (*catalogv1.CallToolResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.ContainsFunc(f.tools, func(t *catalogv1.Tool) bool { return t.GetName() == r.GetName() }) {
		return nil, status.Errorf(codes.NotFound, "tool %q not found", r.GetName())
	}
	f.Calls = append(f.Calls, r.GetName())
	return &catalogv1.CallToolResponse{Content: []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: "called " + r.GetName()}}}, nil
}

// WatchCatalog sends a SNAPSHOT and then nothing until the client leaves.
func (f *FakeCatalog) WatchCatalog(_ *catalogv1.WatchCatalogRequest, stream grpc.ServerStreamingServer[catalogv1.WatchCatalogResponse]) error {
	f.mu.Lock()
	h := Hash(f.tools)
	f.mu.Unlock()
	if err := stream.Send(&catalogv1.WatchCatalogResponse{Event: &catalogv1.CatalogEvent{Type: catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_SNAPSHOT, CatalogHash: h}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

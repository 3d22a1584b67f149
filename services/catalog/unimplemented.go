package catalog

// Code in this file was written by hand from a skeleton: every RPC not yet
// implemented answers UNIMPLEMENTED with a message naming the missing
// capability. Replace a stub by implementing the method on *Server in its own file.

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

func unimplemented(capability string) error {
	return status.Errorf(codes.Unimplemented, "%s is not implemented yet", capability)
}

// ListTools is not implemented yet: MCP server connections and tool calls (issue #3).
func (s *Server) ListTools(_ context.Context, _ *catalogv1.ListToolsRequest) (*catalogv1.ListToolsResponse, error) {
	return nil, unimplemented("CatalogService.ListTools: MCP server connections and tool calls (issue #3)")
}

// GetTool is not implemented yet: MCP server connections and tool calls (issue #3).
func (s *Server) GetTool(_ context.Context, _ *catalogv1.GetToolRequest) (*catalogv1.GetToolResponse, error) {
	return nil, unimplemented("CatalogService.GetTool: MCP server connections and tool calls (issue #3)")
}

// SearchTools is not implemented yet: tool search (deferred catalog, issue #4).
func (s *Server) SearchTools(_ context.Context, _ *catalogv1.SearchToolsRequest) (*catalogv1.SearchToolsResponse, error) {
	return nil, unimplemented("CatalogService.SearchTools: tool search (deferred catalog, issue #4)")
}

// GetCatalog is not implemented yet: the catalog hash (issue #4).
func (s *Server) GetCatalog(_ context.Context, _ *catalogv1.GetCatalogRequest) (*catalogv1.GetCatalogResponse, error) {
	return nil, unimplemented("CatalogService.GetCatalog: the catalog hash (issue #4)")
}

// WatchCatalog is not implemented yet: catalog change events (issue #4).
func (s *Server) WatchCatalog(_ *catalogv1.WatchCatalogRequest, _ grpc.ServerStreamingServer[catalogv1.WatchCatalogResponse]) error {
	return unimplemented("CatalogService.WatchCatalog: catalog change events (issue #4)")
}

// CallTool is not implemented yet: MCP server connections and tool calls (issue #3).
func (s *Server) CallTool(_ context.Context, _ *catalogv1.CallToolRequest) (*catalogv1.CallToolResponse, error) {
	return nil, unimplemented("CatalogService.CallTool: MCP server connections and tool calls (issue #3)")
}

// CallToolStream is not implemented yet: MCP server connections and tool calls (issue #3).
func (s *Server) CallToolStream(_ *catalogv1.CallToolStreamRequest, _ grpc.ServerStreamingServer[catalogv1.CallToolStreamResponse]) error {
	return unimplemented("CatalogService.CallToolStream: MCP server connections and tool calls (issue #3)")
}

// ListServers is not implemented yet: MCP server connections and tool calls (issue #3).
func (s *Server) ListServers(_ context.Context, _ *catalogv1.ListServersRequest) (*catalogv1.ListServersResponse, error) {
	return nil, unimplemented("CatalogService.ListServers: MCP server connections and tool calls (issue #3)")
}

// GetServer is not implemented yet: MCP server connections and tool calls (issue #3).
func (s *Server) GetServer(_ context.Context, _ *catalogv1.GetServerRequest) (*catalogv1.GetServerResponse, error) {
	return nil, unimplemented("CatalogService.GetServer: MCP server connections and tool calls (issue #3)")
}

// UpdateServer is not implemented yet: MCP server connections and tool calls (issue #3).
func (s *Server) UpdateServer(_ context.Context, _ *catalogv1.UpdateServerRequest) (*catalogv1.UpdateServerResponse, error) {
	return nil, unimplemented("CatalogService.UpdateServer: MCP server connections and tool calls (issue #3)")
}

// ReplaceServers is not implemented yet: MCP server connections and tool calls (issue #3).
func (s *Server) ReplaceServers(_ context.Context, _ *catalogv1.ReplaceServersRequest) (*catalogv1.ReplaceServersResponse, error) {
	return nil, unimplemented("CatalogService.ReplaceServers: MCP server connections and tool calls (issue #3)")
}

// ReloadServers is not implemented yet: MCP server connections and tool calls (issue #3).
func (s *Server) ReloadServers(_ context.Context, _ *catalogv1.ReloadServersRequest) (*catalogv1.ReloadServersResponse, error) {
	return nil, unimplemented("CatalogService.ReloadServers: MCP server connections and tool calls (issue #3)")
}

package catalog

import "github.com/toolplane/toolplane/internal/auth"

// Classes returns the access class of every RPC of the service, checked by the
// shared interceptor before validation and the handler (docs/architecture.md §5).
func (s *Server) Classes() map[string]auth.Class {
	return map[string]auth.Class{
		"/toolplane.catalog.v1.CatalogService/ListTools":      auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/GetTool":        auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/SearchTools":    auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/GetCatalog":     auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/WatchCatalog":   auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/CallTool":       auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/CallToolStream": auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/ListAcpAgents":  auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/InvokeAcpAgent": auth.ClassService,
		// Resources, prompts and completion: the runtime's MCP front door
		// filters and authorizes them per principal (features.go).
		"/toolplane.catalog.v1.CatalogService/ListResources":         auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/ListResourceTemplates": auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/ReadResource":          auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/SubscribeResource":     auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/ListPrompts":           auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/GetPrompt":             auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/Complete":              auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/WatchFeatures":         auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/CloseThreadSessions":   auth.ClassService,
		// Server reads: service credentials and admins, checked in the
		// handler (serverReader), since a tenant admin reads the servers
		// its tenant owns. Writes: global admins, and tenant admins
		// confined to their tenant's servers (writers.go,
		// docs/decisions/0105-tenant-scoped-servers.md). Reviews of pinned
		// tools likewise: a tenant admin reviews its tenant's servers' tools
		// (review.go, docs/decisions/0107-tenant-admins-review-their-tools.md).
		"/toolplane.catalog.v1.CatalogService/ListServers":      auth.ClassPublic,
		"/toolplane.catalog.v1.CatalogService/GetServer":        auth.ClassPublic,
		"/toolplane.catalog.v1.CatalogService/UpdateServer":     auth.ClassAdmin,
		"/toolplane.catalog.v1.CatalogService/ReplaceServers":   auth.ClassAdmin,
		"/toolplane.catalog.v1.CatalogService/ReloadServers":    auth.ClassGlobalAdmin,
		"/toolplane.catalog.v1.CatalogService/ListPendingTools": auth.ClassAdmin,
		"/toolplane.catalog.v1.CatalogService/ApproveTool":      auth.ClassAdmin,
		"/toolplane.catalog.v1.CatalogService/RejectTool":       auth.ClassAdmin,
		// OAuth connections act for the effective principal (a shared
		// server's: admin, checked in the handler; connections.go).
		"/toolplane.catalog.v1.CatalogService/ConnectServer":    auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/DisconnectServer": auth.ClassService,
		"/toolplane.catalog.v1.CatalogService/ListConnections":  auth.ClassService,
	}
}

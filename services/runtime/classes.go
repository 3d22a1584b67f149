package runtime

import "github.com/toolplane/toolplane/internal/auth"

// Classes returns the access class of every RPC of the service, checked by the
// shared interceptor before validation and the handler (docs/architecture.md §5).
func (s *Server) Classes() map[string]auth.Class {
	return map[string]auth.Class{
		"/toolplane.runtime.v1.RuntimeService/CreateThread":          auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/ListThreads":           auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/GetThread":             auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/DeleteThread":          auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/ListMessages":          auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/AssembleTools":         auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/ExecuteToolCall":       auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/ExecuteToolCallStream": auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/RunTurn":               auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/ListRuns":              auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/CancelRun":             auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/ResumeRun":             auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/ListAgents":            auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/GetAgent":              auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/UpsertAgent":           auth.ClassGlobalAdmin,
		"/toolplane.runtime.v1.RuntimeService/DeleteAgent":           auth.ClassGlobalAdmin,
		"/toolplane.runtime.v1.RuntimeService/ConnectMyServer":       auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/DisconnectMyServer":    auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/ListMyConnections":     auth.ClassPublic,
		"/toolplane.runtime.v1.RuntimeService/UploadThreadFile":      auth.ClassPublic,
	}
}

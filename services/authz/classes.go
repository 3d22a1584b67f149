package authz

import "github.com/toolplane/toolplane/internal/auth"

// Classes returns the access class of every RPC of the service, checked by the
// shared interceptor before validation and the handler (docs/architecture.md §5).
func (s *Server) Classes() map[string]auth.Class {
	return map[string]auth.Class{
		"/toolplane.authz.v1.AuthzService/FilterResources": auth.ClassPublic,
		"/toolplane.authz.v1.AuthzService/Authorize":       auth.ClassPublic,
		"/toolplane.authz.v1.AuthzService/WatchPolicy":     auth.ClassPublic,
		"/toolplane.authz.v1.AuthzService/ListPolicies":    auth.ClassAdmin,
		"/toolplane.authz.v1.AuthzService/AddPolicies":     auth.ClassAdmin,
		"/toolplane.authz.v1.AuthzService/RemovePolicies":  auth.ClassAdmin,
		"/toolplane.authz.v1.AuthzService/ListDecisions":   auth.ClassAdmin,
		"/toolplane.authz.v1.AuthzService/RecordRefusal":   auth.ClassService,
	}
}

package catalog

import (
	"fmt"
	"strconv"

	"github.com/toolplane/toolplane/internal/grpcx"
)

// checkTenantServerCount refuses a tenant admin's ReplaceServers that would
// leave its tenant owning more than catalog.tenant_admins.max_servers
// servers (a tenant admin's request replaces exactly its tenant's set, so
// the request's length is that number). It runs before any entry is
// validated, so an oversized request costs nothing further. Global admins
// write the operator's configuration and are not bounded by it
// (docs/decisions/0138-fair-scoped-session-eviction.md).
func (s *Server) checkTenantServerCount(w writer, n int) error {
	limit := s.cfg.TenantAdmins.MaxServers
	if !w.tenantAdmin || n <= limit {
		return nil
	}
	return grpcx.InvalidMeta(errorDomain, grpcx.ReasonInvalidRequest, map[string]string{"limit": strconv.Itoa(limit)}, grpcx.Violation{
		Field: "servers", Reason: grpcx.ViolationTooMany,
		Description: fmt.Sprintf("a tenant admin's tenant owns at most %d servers (catalog.tenant_admins.max_servers); the request has %d", limit, n)})
}

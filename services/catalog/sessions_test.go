package catalog

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// TestTenantSessionsRefusal: a session refused at
// catalog.sessions.max_scoped_per_tenant answers RESOURCE_EXHAUSTED naming
// the key and the limit (not UNAVAILABLE, which callers retry at once).
func TestTenantSessionsRefusal(t *testing.T) {
	err := callError(context.Background(), "scratch.think", false, &catalogmcp.TenantSessionsError{Tenant: "acme", Limit: 4})
	if codeOf(err) != codes.ResourceExhausted {
		t.Fatalf("code %v (%v), want RESOURCE_EXHAUSTED", codeOf(err), err)
	}
	ei, _ := grpcx.ErrorDetails(err)
	if ei.GetMetadata()["field"] != "catalog.sessions.max_scoped_per_tenant" || ei.GetMetadata()["limit"] != "4" {
		t.Fatalf("ErrorInfo %v", ei)
	}
	if !strings.Contains(err.Error(), "catalog.sessions.max_scoped_per_tenant") {
		t.Fatalf("message %q does not name the key", err)
	}
}

// TestSessionsConfig: max_scoped_per_tenant defaults to 0 (fair eviction
// only) and a negative value is refused naming the key.
func TestSessionsConfig(t *testing.T) {
	var c Config
	c.SetDefaults()
	if c.Sessions.MaxScopedPerTenant != 0 || c.Sessions.MaxScoped != 32 || c.TenantAdmins.MaxServers != 50 {
		t.Fatalf("defaults %+v", c.Sessions)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Sessions.MaxScopedPerTenant = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "catalog.sessions.max_scoped_per_tenant") {
		t.Fatalf("negative max_scoped_per_tenant: %v", err)
	}
}

// TestTenantAdminMaxServers: a tenant admin's ReplaceServers with more
// servers than catalog.tenant_admins.max_servers is refused before any
// entry is looked at, naming `servers` (TOO_MANY), and writes nothing; a
// global admin is not bounded by it.
func TestTenantAdminMaxServers(t *testing.T) {
	h := start(t, extJSON(fixtureServer("g", "")), func(c *Config, _ *svckit.Env) { c.TenantAdmins.MaxServers = 2 })
	ctx := ctxT(t)
	before, _ := os.ReadFile(h.path)
	var many []*catalogv1.ServerConfig
	for i := range 3 {
		many = append(many, &catalogv1.ServerConfig{Name: fmt.Sprint("acme", i), Type: catalogv1.ServerType_SERVER_TYPE_HTTP,
			Url: "http://127.0.0.1:1/mcp", Tenants: []string{"acme"}})
	}
	_, err := h.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: many})
	if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "catalog.tenant_admins.max_servers") {
		t.Fatalf("3 servers over a limit of 2: %v, want INVALID_ARGUMENT naming the key", err)
	}
	if _, br := grpcx.ErrorDetails(err); len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != "servers" ||
		br.GetFieldViolations()[0].GetReason() != grpcx.ViolationTooMany {
		t.Fatalf("BadRequest %v, want servers TOO_MANY", br)
	}
	if after, _ := os.ReadFile(h.path); string(after) != string(before) {
		t.Fatal("a refused write changed the file")
	}
	w := writer{tenantAdmin: true, tenant: "acme"}
	if err := h.srv.checkTenantServerCount(w, 2); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if err := h.srv.checkTenantServerCount(writer{}, 300); err != nil {
		t.Fatalf("a global admin is bounded: %v", err)
	}
}

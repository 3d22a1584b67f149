package catalog

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/toolplane/toolplane/internal/grpcx"
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
	if c.Sessions.MaxScopedPerTenant != 0 || c.Sessions.MaxScoped != 32 {
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

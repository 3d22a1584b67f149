package runtime_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/services/runtime"
)

// TestPerTokenDefaultAgent: a thread created without an agent takes the
// caller's `agent` attribute (a per-token default), an explicit agent wins,
// and a default naming a missing agent is NOT_FOUND rather than silently
// falling back.
func TestPerTokenDefaultAgent(t *testing.T) {
	const carolToken = "carol-token-0123456789"
	const daveToken = "dave-token-0123456789"
	s := newSuite(t, func(c *app.Config) {
		c.Auth.Tokens = append(c.Auth.Tokens,
			config.Token{Name: "carol", SHA256: sha(carolToken), Kind: "user", Subject: "carol", Tenant: "default", Roles: []string{"user"}, Attributes: map[string]string{runtime.DefaultAgentAttribute: "researcher"}},
			config.Token{Name: "dave", SHA256: sha(daveToken), Kind: "user", Subject: "dave", Tenant: "default", Roles: []string{"user"}, Attributes: map[string]string{"agent": "nope"}})
	})
	ctx := context.Background()
	if _, err := s.rt(adminToken).UpsertAgent(ctx, &runtimev1.UpsertAgentRequest{Agent: &runtimev1.Agent{Name: "researcher"}}); err != nil {
		t.Fatal(err)
	}
	carol := s.rt(carolToken)
	r, err := carol.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
	if err != nil || r.GetThread().GetAgent() != "researcher" {
		t.Fatalf("carol's thread agent = %q, %v; want researcher", r.GetThread().GetAgent(), err)
	}
	r, err = carol.CreateThread(ctx, &runtimev1.CreateThreadRequest{Agent: "default"})
	if err != nil || r.GetThread().GetAgent() != "default" {
		t.Fatalf("explicit agent = %q, %v; want default", r.GetThread().GetAgent(), err)
	}
	if r, err := s.rt(aliceToken).CreateThread(ctx, &runtimev1.CreateThreadRequest{}); err != nil || r.GetThread().GetAgent() != "" {
		t.Fatalf("alice (no attribute) agent = %q, %v; want the default (empty)", r.GetThread().GetAgent(), err)
	}
	if _, err := s.rt(daveToken).CreateThread(ctx, &runtimev1.CreateThreadRequest{}); status.Code(err) != codes.NotFound {
		t.Fatalf("dave's default names a missing agent: %v; want NOT_FOUND", err)
	}
}

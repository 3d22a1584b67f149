package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
)

// principalKey is the effective principal's (tenant, subject); tenant ""
// is "default", as for scoped sessions (tools.go).
func principalKey(ctx context.Context) (tenant, subject string) {
	if pr := auth.EffectivePrincipal(ctx); pr != nil {
		tenant, subject = pr.GetTenant(), pr.GetSubject()
		if tenant == "" {
			tenant = "default"
		}
	}
	return tenant, subject
}

// oauthTarget resolves whose connection of server a Connect or Disconnect
// acts on: the caller's own for a per-principal server, the shared one
// (admin only) otherwise.
func (s *Server) oauthTarget(ctx context.Context, name string, discovery bool) (tenant, subject string, err error) {
	if name == "" {
		return "", "", checkName("name", name)
	}
	if !viewerOf(ctx).seesServer(s.snap.Load(), name) {
		// A server of other tenants does not exist for the caller
		// (docs/decisions/0105-tenant-scoped-servers.md).
		return "", "", statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_SERVER_NOT_FOUND, map[string]string{"server": name}, "server %q not found", name)
	}
	per, grant, err := s.mgr.OAuthServer(name)
	switch {
	case errors.Is(err, catalogmcp.ErrUnknownServer):
		return "", "", statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_SERVER_NOT_FOUND, map[string]string{"server": name}, "server %q not found", name)
	case errors.Is(err, catalogmcp.ErrNoOAuth):
		return "", "", statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_INVALID_REQUEST, map[string]string{"server": name},
			"server %q does not authenticate with OAuth (it is stdio, static, or sends a configured Authorization header)", name)
	case err != nil:
		return "", "", err
	}
	if grant != catalogoauth.GrantAuthorizationCode {
		return "", "", statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_INVALID_REQUEST, map[string]string{"server": name},
			"server %q uses the %s grant: it connects by itself, no login", name, grant)
	}
	if per && !discovery {
		tenant, subject = principalKey(ctx)
		return tenant, subject, nil
	}
	// A call relayed for an end user (the runtime's ConnectServer, acting
	// for the verified principal) never reaches a shared or discovery
	// connection, whatever the relaying service's own roles: those are an
	// admin's, called on the catalog directly (docs/architecture.md §10.6).
	if id, ok := auth.Caller(ctx); !ok || !id.Admin() || id.ActingFor != nil {
		what := fmt.Sprintf("is shared: an admin connects it (toolplane servers connect %s --admin)", name)
		if per {
			what = fmt.Sprintf("discovery connection: only an admin connects it (toolplane servers connect %s --discovery)", name)
		}
		return "", "", statusErr(codes.PermissionDenied, catalogv1.ErrorReason_ERROR_REASON_NEEDS_AUTH, map[string]string{"server": name},
			"server %q %s", name, what)
	}
	return "", "", nil
}

// ConnectServer implements catalogv1.CatalogServiceServer.
func (s *Server) ConnectServer(ctx context.Context, req *catalogv1.ConnectServerRequest) (*catalogv1.ConnectServerResponse, error) {
	tenant, subject, err := s.oauthTarget(ctx, req.GetName(), req.GetDiscovery())
	if err != nil {
		return nil, err
	}
	u, err := s.mgr.StartLogin(ctx, req.GetName(), tenant, subject)
	if err != nil {
		return nil, statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_NEEDS_AUTH, map[string]string{"server": req.GetName()},
			"server %q: %v", req.GetName(), err)
	}
	return &catalogv1.ConnectServerResponse{AuthorizationUrl: u, ExpiresAt: timestamppb.New(time.Now().Add(10 * time.Minute))}, nil
}

// DisconnectServer implements catalogv1.CatalogServiceServer.
func (s *Server) DisconnectServer(ctx context.Context, req *catalogv1.DisconnectServerRequest) (*catalogv1.DisconnectServerResponse, error) {
	tenant, subject, err := s.oauthTarget(ctx, req.GetName(), req.GetDiscovery())
	if err != nil {
		return nil, err
	}
	if err := s.mgr.Revoke(ctx, req.GetName(), tenant, subject); err != nil {
		// The tokens are deleted even when the revocation request failed.
		s.log.Warn("oauth revocation failed", "server", req.GetName(), "err", err)
	}
	return &catalogv1.DisconnectServerResponse{}, nil
}

// ListConnections implements catalogv1.CatalogServiceServer.
func (s *Server) ListConnections(ctx context.Context, _ *catalogv1.ListConnectionsRequest) (*catalogv1.ListConnectionsResponse, error) {
	tenant, subject := principalKey(ctx)
	cs, err := s.mgr.Connections(ctx, tenant, subject)
	if err != nil {
		return nil, err
	}
	out := &catalogv1.ListConnectionsResponse{}
	v, snap := viewerOf(ctx), s.snap.Load()
	for _, c := range cs {
		if !v.seesServer(snap, c.Server) {
			continue // a server of other tenants (docs/decisions/0105)
		}
		pc := &catalogv1.Connection{Server: c.Server, SessionScope: scopeEnum(c.Scope), GrantType: c.Grant, Connected: c.Connected}
		if !c.Expires.IsZero() {
			pc.ExpiresAt = timestamppb.New(c.Expires)
		}
		out.Connections = append(out.Connections, pc)
	}
	return out, nil
}

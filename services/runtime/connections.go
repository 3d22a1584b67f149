package runtime

import (
	"context"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
)

// The end user's OAuth connections to MCP servers (docs/architecture.md
// §10.6): public-class RPCs relayed to the catalog acting for the verified
// principal (toolplane-principal-bin, runtimeident.ActingFor), like every
// other user-facing call. The catalog keys every connection by that
// principal, so a user only ever sees or changes its own; it refuses a
// shared server or a discovery connection to a relayed call (an admin
// connects those with the catalog's own ConnectServer). Catalog errors
// (NOT_FOUND, FAILED_PRECONDITION, PERMISSION_DENIED with their ErrorInfo)
// are returned as they are: they name the server and never a credential.

// listableServers returns which of names the caller may list as
// mcp_server resources (authz, fail closed: an authz failure is the
// call's error, whatever runtime.authz.fail_open_listing says — nothing
// here is needed to assemble tools).
func (s *Server) listableServers(ctx context.Context, names []string) (map[string]bool, error) {
	ok := make(map[string]bool, len(names))
	if len(names) == 0 {
		return ok, nil
	}
	r, err := s.authz.FilterResources(runtimeident.ActingFor(ctx), &authzv1.FilterResourcesRequest{Principal: runtimeident.Principal(ctx),
		ResourceType: authzv1.ResourceType_RESOURCE_TYPE_MCP_SERVER, Candidates: names, Action: authzv1.Action_ACTION_LIST})
	if err != nil {
		return nil, statusErr(codes.Unavailable, runtimev1.ErrorReason_ERROR_REASON_UPSTREAM_UNAVAILABLE, "authorization service: %s", status.Convert(err).Message())
	}
	for _, n := range r.GetAllowed() {
		ok[n] = true
	}
	return ok, nil
}

// ConnectMyServer implements runtimev1.RuntimeServiceServer. A server the
// caller may not list is NOT_FOUND, as if it did not exist.
func (s *Server) ConnectMyServer(ctx context.Context, req *runtimev1.ConnectMyServerRequest) (*runtimev1.ConnectMyServerResponse, error) {
	ok, err := s.listableServers(ctx, []string{req.GetName()})
	if err != nil {
		return nil, err
	}
	if !ok[req.GetName()] {
		// The catalog's own answer for an unknown server, word for word.
		return nil, grpcx.Status(codes.NotFound, "catalog.toolplane.dev", catalogv1.ErrorReason_ERROR_REASON_SERVER_NOT_FOUND.String(),
			map[string]string{"server": req.GetName()}, fmt.Sprintf("server %q not found", req.GetName())).Err()
	}
	r, err := s.catalog.ConnectServer(runtimeident.ActingFor(ctx), &catalogv1.ConnectServerRequest{Name: req.GetName()})
	if err != nil {
		return nil, err
	}
	return &runtimev1.ConnectMyServerResponse{AuthorizationUrl: r.GetAuthorizationUrl(), ExpiresAt: r.GetExpiresAt()}, nil
}

// DisconnectMyServer implements runtimev1.RuntimeServiceServer. It is not
// filtered by authz: a user who lost access to a server may still revoke
// and delete its own token.
func (s *Server) DisconnectMyServer(ctx context.Context, req *runtimev1.DisconnectMyServerRequest) (*runtimev1.DisconnectMyServerResponse, error) {
	if _, err := s.catalog.DisconnectServer(runtimeident.ActingFor(ctx), &catalogv1.DisconnectServerRequest{Name: req.GetName()}); err != nil {
		return nil, err
	}
	return &runtimev1.DisconnectMyServerResponse{}, nil
}

// ListMyConnections implements runtimev1.RuntimeServiceServer.
func (s *Server) ListMyConnections(ctx context.Context, _ *runtimev1.ListMyConnectionsRequest) (*runtimev1.ListMyConnectionsResponse, error) {
	r, err := s.catalog.ListConnections(runtimeident.ActingFor(ctx), &catalogv1.ListConnectionsRequest{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(r.GetConnections()))
	for _, c := range r.GetConnections() {
		names = append(names, c.GetServer())
	}
	ok, err := s.listableServers(ctx, names)
	if err != nil {
		return nil, err
	}
	out := &runtimev1.ListMyConnectionsResponse{}
	for _, c := range r.GetConnections() {
		if ok[c.GetServer()] {
			out.Connections = append(out.Connections, c)
		}
	}
	return out, nil
}

// ConnectServer calls the upstream under the runtime's policy (not
// retried: it may register a client at the authorization server). The
// catalog talks to the authorization server (discovery, registration), so
// the deadline is the tool-call timeout, not upstream_timeout.
func (c catalogClient) ConnectServer(ctx context.Context, in *catalogv1.ConnectServerRequest, o ...grpc.CallOption) (*catalogv1.ConnectServerResponse, error) {
	return invoke(ctx, c.u, "catalog", "ConnectServer", false, c.u.callTimeout, c.CatalogServiceClient.ConnectServer, in, o...)
}

// DisconnectServer calls the upstream under the runtime's policy (not
// retried: the revocation is sent once; deadline as ConnectServer).
func (c catalogClient) DisconnectServer(ctx context.Context, in *catalogv1.DisconnectServerRequest, o ...grpc.CallOption) (*catalogv1.DisconnectServerResponse, error) {
	return invoke(ctx, c.u, "catalog", "DisconnectServer", false, c.u.callTimeout, c.CatalogServiceClient.DisconnectServer, in, o...)
}

// ListConnections calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c catalogClient) ListConnections(ctx context.Context, in *catalogv1.ListConnectionsRequest, o ...grpc.CallOption) (*catalogv1.ListConnectionsResponse, error) {
	return invoke(ctx, c.u, "catalog", "ListConnections", true, c.u.timeout, c.CatalogServiceClient.ListConnections, in, o...)
}

// validServerName checks the name of a ConnectServer or DisconnectServer
// request (the catalog's own bound: 256 bytes of UTF-8).
func validServerName(name string) error {
	switch {
	case name == "":
		return invalid("name", grpcx.ViolationRequired, "must not be empty")
	case len(name) > 256:
		return invalid("name", grpcx.ViolationTooLong, "longer than 256 bytes")
	case !utf8.ValidString(name):
		return invalid("name", grpcx.ViolationInvalidUTF8, "not valid UTF-8")
	}
	return nil
}

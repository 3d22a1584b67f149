// Package authz is the authorization service: a Principal-based policy decision
// point on Casbin that filters what a principal can see, re-checks every call and
// audits decisions (ARCHITECTURE §2.2).
package authz

import (
	"context"
	"log/slog"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/internal/svckit"
)

// Config is the `authz` section of toolplane.yaml.
type Config struct{}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {}

// Validate checks the section; errors name the key path.
func (c *Config) Validate() error { return nil }

// Server implements authzv1.AuthzServiceServer.
type Server struct {
	authzv1.UnimplementedAuthzServiceServer
	cfg Config
	env svckit.Env
	log *slog.Logger
}

var (
	_ authzv1.AuthzServiceServer = (*Server)(nil)
	_ svckit.Service             = (*Server)(nil)
)

// New builds the service from its config section and the process environment.
func New(_ context.Context, cfg Config, env svckit.Env) (*Server, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Server{cfg: cfg, env: env, log: log}, nil
}

// Name returns "authz".
func (s *Server) Name() string { return "authz" }

// FullName returns the fully-qualified gRPC service name.
func (s *Server) FullName() string { return authzv1.AuthzService_ServiceDesc.ServiceName }

// Register registers the gRPC service.
func (s *Server) Register(r grpc.ServiceRegistrar) { authzv1.RegisterAuthzServiceServer(r, s) }

// RegisterGateway registers the REST mirror.
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return authzv1.RegisterAuthzServiceHandler(ctx, mux, conn)
}

// Ready reports whether the service can serve.
func (s *Server) Ready(context.Context) error { return nil }

// Close releases the service's resources.
func (s *Server) Close() error { return nil }

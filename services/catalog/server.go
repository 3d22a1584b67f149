// Package catalog is the catalog service: it owns every connection to MCP servers,
// the tools they expose, the deferred catalog and its hash, tool search, and every
// call to a tool (ARCHITECTURE §2.1).
package catalog

import (
	"context"
	"log/slog"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/svckit"
)

// Config is the `catalog` section of toolplane.yaml.
type Config struct{}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {}

// Validate checks the section; errors name the key path.
func (c *Config) Validate() error { return nil }

// Server implements catalogv1.CatalogServiceServer.
type Server struct {
	catalogv1.UnimplementedCatalogServiceServer
	cfg Config
	env svckit.Env
	log *slog.Logger
}

var (
	_ catalogv1.CatalogServiceServer = (*Server)(nil)
	_ svckit.Service                 = (*Server)(nil)
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

// Name returns "catalog".
func (s *Server) Name() string { return "catalog" }

// FullName returns the fully-qualified gRPC service name.
func (s *Server) FullName() string { return catalogv1.CatalogService_ServiceDesc.ServiceName }

// Register registers the gRPC service.
func (s *Server) Register(r grpc.ServiceRegistrar) { catalogv1.RegisterCatalogServiceServer(r, s) }

// RegisterGateway registers the REST mirror.
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return catalogv1.RegisterCatalogServiceHandler(ctx, mux, conn)
}

// Ready reports whether the service can serve.
func (s *Server) Ready(context.Context) error { return nil }

// Close releases the service's resources.
func (s *Server) Close() error { return nil }

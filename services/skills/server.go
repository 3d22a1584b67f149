// Package skills is the skills service: SKILL.md storage, strict validation,
// deterministic scanning, review, and the tool policy active skills impose
// (ARCHITECTURE §2.3).
package skills

import (
	"context"
	"log/slog"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/svckit"
)

// Config is the `skills` section of toolplane.yaml.
type Config struct{}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {}

// Validate checks the section; errors name the key path.
func (c *Config) Validate() error { return nil }

// Server implements skillsv1.SkillsServiceServer.
type Server struct {
	skillsv1.UnimplementedSkillsServiceServer
	cfg Config
	env svckit.Env
	log *slog.Logger
}

var (
	_ skillsv1.SkillsServiceServer = (*Server)(nil)
	_ svckit.Service               = (*Server)(nil)
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

// Name returns "skills".
func (s *Server) Name() string { return "skills" }

// FullName returns the fully-qualified gRPC service name.
func (s *Server) FullName() string { return skillsv1.SkillsService_ServiceDesc.ServiceName }

// Register registers the gRPC service.
func (s *Server) Register(r grpc.ServiceRegistrar) { skillsv1.RegisterSkillsServiceServer(r, s) }

// RegisterGateway registers the REST mirror.
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return skillsv1.RegisterSkillsServiceHandler(ctx, mux, conn)
}

// Ready reports whether the service can serve.
func (s *Server) Ready(context.Context) error { return nil }

// Close releases the service's resources.
func (s *Server) Close() error { return nil }

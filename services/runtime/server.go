// Package runtime is the runtime service: threads, the tool assembly
// pipeline, the tool-call chain, the agent loop and the MCP front door
// (ARCHITECTURE §2.4, §3). It reaches catalog, authz and skills only through
// their generated gRPC clients — also when all four run in one process.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	gwruntime "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/svckit"
)

// Config is the `runtime` section of toolplane.yaml.
type Config struct {
	// Upstreams are the addresses of catalog, authz and skills when they are
	// not served by this process (split topology).
	Upstreams Upstreams `yaml:"upstreams"`
	// UpstreamTimeout bounds every unary call to an upstream.
	UpstreamTimeout time.Duration `yaml:"upstream_timeout"`
}

// Upstreams holds one entry per upstream service.
type Upstreams struct {
	// Catalog is the catalog service.
	Catalog Upstream `yaml:"catalog"`
	// Authz is the authz service.
	Authz Upstream `yaml:"authz"`
	// Skills is the skills service.
	Skills Upstream `yaml:"skills"`
}

// Upstream is how the runtime reaches one service.
type Upstream struct {
	// Address is HOST:PORT of the service's gRPC listener.
	Address string `yaml:"address"`
	// TokenFile holds the bearer token (a service credential) sent upstream.
	TokenFile string `yaml:"token_file"`
	// TLS of the connection; plaintext when ca_file and cert_file are empty.
	TLS UpstreamTLS `yaml:"tls"`
}

// UpstreamTLS configures TLS/mTLS towards an upstream.
type UpstreamTLS struct {
	// Enabled turns TLS on (system roots unless ca_file is set).
	Enabled bool `yaml:"enabled"`
	// CAFile verifies the server certificate.
	CAFile string `yaml:"ca_file"`
	// CertFile is the client certificate for mTLS.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the client key for mTLS.
	KeyFile string `yaml:"key_file"`
	// ServerName overrides the name checked in the server certificate.
	ServerName string `yaml:"server_name"`
}

// Upstream returns the entry of one upstream by short name.
func (c *Config) Upstream(name string) Upstream {
	switch name {
	case "catalog":
		return c.Upstreams.Catalog
	case "authz":
		return c.Upstreams.Authz
	case "skills":
		return c.Upstreams.Skills
	}
	return Upstream{}
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	if c.UpstreamTimeout == 0 {
		c.UpstreamTimeout = 10 * time.Second
	}
}

// Validate checks the section; errors name the key path.
func (c *Config) Validate() error {
	if c.UpstreamTimeout < 0 {
		return errors.New("runtime.upstream_timeout: must not be negative")
	}
	for _, name := range []string{"catalog", "authz", "skills"} {
		u := c.Upstream(name)
		key := "runtime.upstreams." + name
		if (u.TLS.CertFile == "") != (u.TLS.KeyFile == "") {
			return fmt.Errorf("%s.tls: cert_file and key_file must be set together", key)
		}
		if (u.TLS.CAFile != "" || u.TLS.CertFile != "") && !u.TLS.Enabled {
			return fmt.Errorf("%s.tls.enabled: must be true when ca_file or cert_file is set", key)
		}
	}
	return nil
}

// Server implements runtimev1.RuntimeServiceServer.
type Server struct {
	runtimev1.UnimplementedRuntimeServiceServer
	cfg Config
	env svckit.Env
	log *slog.Logger

	catalog catalogv1.CatalogServiceClient
	authz   authzv1.AuthzServiceClient
	skills  skillsv1.SkillsServiceClient
	health  map[string]healthpb.HealthClient
}

var (
	_ runtimev1.RuntimeServiceServer = (*Server)(nil)
	_ svckit.Service                 = (*Server)(nil)
)

// upstreamServices maps short names to the fully-qualified names whose
// health the runtime's readiness reflects.
var upstreamServices = []struct{ short, full string }{
	{"catalog", catalogv1.CatalogService_ServiceDesc.ServiceName},
	{"authz", authzv1.AuthzService_ServiceDesc.ServiceName},
	{"skills", skillsv1.SkillsService_ServiceDesc.ServiceName},
}

// New builds the runtime. env.Upstreams must hold a connection for each of
// catalog, authz and skills.
func New(_ context.Context, cfg Config, env svckit.Env) (*Server, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, env: env, log: log, health: map[string]healthpb.HealthClient{}}
	for _, u := range upstreamServices {
		conn := env.Upstreams[u.short]
		if conn == nil {
			return nil, fmt.Errorf("runtime: no connection to upstream %s", u.short)
		}
		s.health[u.short] = healthpb.NewHealthClient(conn)
	}
	s.catalog = catalogv1.NewCatalogServiceClient(env.Upstreams["catalog"])
	s.authz = authzv1.NewAuthzServiceClient(env.Upstreams["authz"])
	s.skills = skillsv1.NewSkillsServiceClient(env.Upstreams["skills"])
	return s, nil
}

// Name returns "runtime".
func (s *Server) Name() string { return "runtime" }

// FullName returns the fully-qualified gRPC service name.
func (s *Server) FullName() string { return runtimev1.RuntimeService_ServiceDesc.ServiceName }

// Register registers the gRPC service.
func (s *Server) Register(r grpc.ServiceRegistrar) { runtimev1.RegisterRuntimeServiceServer(r, s) }

// RegisterGateway registers the REST mirror.
func (s *Server) RegisterGateway(ctx context.Context, mux *gwruntime.ServeMux, conn *grpc.ClientConn) error {
	return runtimev1.RegisterRuntimeServiceHandler(ctx, mux, conn)
}

// Ready reports whether every upstream answers SERVING for its service over
// the runtime's own gRPC clients; the error names each upstream that does not.
func (s *Server) Ready(ctx context.Context) error {
	var bad []string
	for _, u := range upstreamServices {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := s.health[u.short].Check(cctx, &healthpb.HealthCheckRequest{Service: u.full})
		cancel()
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s unreachable (%s)", u.short, shortErr(err)))
		case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
			bad = append(bad, fmt.Sprintf("%s %s", u.short, resp.GetStatus()))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("upstream not ready: %s", strings.Join(bad, "; "))
	}
	return nil
}

func shortErr(err error) string {
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160] + "..."
	}
	return msg
}

// Close releases the service's resources.
func (s *Server) Close() error { return nil }

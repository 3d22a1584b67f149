// Package runtime is the runtime service: threads, the tool assembly
// pipeline, the tool-call chain, the agent loop and the MCP front door
// (docs/architecture.md §2.4, §3). It reaches catalog, authz and skills only through
// their generated gRPC clients — also when all four run in one process.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	gwruntime "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimeretention"
	"github.com/toolplane/toolplane/services/runtime/runtimesqlite"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

// Config is the `runtime` section of toolplane.yaml.
type Config struct {
	// Upstreams are the addresses of catalog, authz and skills when they are
	// not served by this process (split topology).
	Upstreams Upstreams `yaml:"upstreams"`
	// UpstreamTimeout bounds every unary call to an upstream (except tool
	// calls, see ToolCallTimeout).
	UpstreamTimeout time.Duration `yaml:"upstream_timeout"`
	// ToolCallTimeout bounds one tool call end to end (catalog CallTool and
	// built-in tools; default 2m).
	ToolCallTimeout time.Duration `yaml:"tool_call_timeout"`
	// RunLease is how long a replica holds a RUNNING run without renewing
	// it (renewed every third of it): a replica that dies leaves its runs
	// RUNNING at most this long plus a third before a peer marks them
	// INTERRUPTED (default 30s; docs/decisions/0081-run-leases.md).
	RunLease time.Duration `yaml:"run_lease"`
	// Tools are the config tools (default: ls, read_file, write_file,
	// str_replace, bash).
	Tools []ToolConfig `yaml:"tools"`
	// ToolGroups are the declared tool groups.
	ToolGroups []ToolGroupConfig `yaml:"tool_groups"`
	// AllowBash binds config tools of group `bash` (or use `bash`); off by
	// default (docs/deerflow.md §1.5).
	AllowBash bool `yaml:"allow_bash"`
	// ToolSearch configures deferral and tool_search.
	ToolSearch ToolSearchConfig `yaml:"tool_search"`
	// ToolOutput is the output budget.
	ToolOutput ToolOutputConfig `yaml:"tool_output"`
	// ToolBounds bounds what of an MCP tool is bound for the model
	// (docs/architecture.md §3.1).
	ToolBounds ToolBoundsConfig `yaml:"tool_bounds"`
	// Authz configures the handling of authz failures.
	Authz AuthzConfig `yaml:"authz"`
	// Retention configures thread retention.
	Retention RetentionConfig `yaml:"retention"`
	// DefaultAgent is the built-in default agent.
	DefaultAgent DefaultAgentConfig `yaml:"default_agent"`
	// CacheEntries bounds the assembly cache (entries keyed by principal,
	// agent, catalog and policy version; default 4096).
	CacheEntries int `yaml:"cache_entries"`
	// CacheBytes bounds the estimated bytes the cached assemblies keep
	// alive (default 64 MiB; docs/decisions/0142-assembly-cache-bounded-by-bytes.md).
	CacheBytes int64 `yaml:"cache_bytes"`
	// Loop configures the agent loop (RunTurn): models, limits, guards,
	// subagents (loopconfig.go).
	Loop LoopConfig `yaml:"loop"`
	// Limits bounds tool arguments, user text and the thread workspace
	// (limits.go).
	Limits LimitsConfig `yaml:"limits"`
	// BootstrapAgent names the bootstrap agent, whose threads get
	// setup_agent to create an agent owned by their user (docs/deerflow.md
	// §1.3; docs/decisions/0152-owned-agents.md). Empty (the default): none.
	BootstrapAgent string `yaml:"bootstrap_agent"`
	// Uploads bounds UploadThreadFile and the multipart upload route (uploads.go).
	Uploads UploadsConfig `yaml:"uploads"`
	// Web configures the web group's tools, web_fetch and web_search
	// (webconfig.go; off unless a runtime.tools entry uses them).
	Web WebConfig `yaml:"web"`
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
	c.setToolDefaults()
	c.setLimitDefaults()
	c.Uploads.setDefaults()
	c.Loop.SetDefaults()
}

// Validate checks the section; errors name the key path.
func (c *Config) Validate() error {
	if c.UpstreamTimeout < 0 {
		return errors.New("runtime.upstream_timeout: must not be negative")
	}
	if err := c.validateLimits(); err != nil {
		return err
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
	if err := c.validateTools(); err != nil {
		return err
	}
	if err := c.validateAgentsAndUploads(); err != nil {
		return err
	}
	if err := c.validateWeb(); err != nil {
		return err
	}
	return c.Loop.Validate()
}

// Server implements runtimev1.RuntimeServiceServer.
type Server struct {
	runtimev1.UnimplementedRuntimeServiceServer
	cfg Config
	// upGate holds the uploads being received (uploads.go).
	upGate uploadGate
	env    svckit.Env
	log    *slog.Logger

	catalog catalogv1.CatalogServiceClient
	authz   authzv1.AuthzServiceClient
	skills  skillsv1.SkillsServiceClient
	health  map[string]healthpb.HealthClient

	store   runtimestore.Store
	metrics *metrics
	stop    context.CancelFunc
	bg      sync.WaitGroup
	now     func() time.Time
	loops   loopState // the agent loop engine, built on first use (runs.go)
	// replica is this process's id as owner of the runs it executes, and
	// owned the runs it holds (leases.go).
	replica string
	owned   owned
	// shared is set when the store is shared by several processes
	// (PostgreSQL): start-up then interrupts only runs whose lease expired.
	shared bool

	// ws holds the thread workspaces under <data dir>/runtime/threads/<id>/.
	ws *runtimetools.Workspace
	// assembly is the assembly pipeline (AssembleTools and the chain's
	// assembly step).
	assembly *runtimeassembly.Builder
	// chain is the tool-call chain, built once at start (runtimechain.Standard).
	chain *runtimechain.Chain
	// agents resolves agents (agents.go).
	agents *agentBook

	credProbe credentialProbe // last accepted credential probe (ready.go)
	// gw is the gateway's connection to this listener, kept by
	// RegisterGateway for the multipart upload route (uploads.go).
	gw *grpc.ClientConn
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
// catalog, authz and skills. It opens <data dir>/runtime.db, marks runs left
// running by a previous process as interrupted, and starts the catalog and
// policy watchers (cache invalidation) and the retention sweeper.
func New(_ context.Context, cfg Config, env svckit.Env) (*Server, error) {
	s, err := newServer(cfg, env)
	if err != nil {
		return nil, err
	}
	st, err := runtimesqlite.Open(filepath.Join(env.DataDir, "runtime.db"))
	if err != nil {
		return nil, fmt.Errorf("runtime: store: %w", err)
	}
	return s.start(st)
}

// NewWithStore builds the runtime on a given store (tests and other store
// implementations); env.DataDir still holds the thread workspaces.
func NewWithStore(cfg Config, env svckit.Env, st runtimestore.Store) (*Server, error) {
	s, err := newServer(cfg, env)
	if err != nil {
		return nil, err
	}
	return s.start(st)
}

func newServer(cfg Config, env svckit.Env) (*Server, error) {
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
	s.metrics = newMetrics(env.Metrics)
	u := &upstream{timeout: cfg.UpstreamTimeout, callTimeout: cfg.ToolCallTimeout, latency: s.metrics.upstream}
	s.catalog = catalogClient{catalogv1.NewCatalogServiceClient(env.Upstreams["catalog"]), u}
	s.authz = authzClient{authzv1.NewAuthzServiceClient(env.Upstreams["authz"]), u}
	s.skills = skillsClient{skillsv1.NewSkillsServiceClient(env.Upstreams["skills"]), u}
	if env.DataDir == "" {
		return nil, errors.New("runtime: empty data dir")
	}
	s.ws = runtimetools.NewWorkspace(filepath.Join(env.DataDir, "runtime"))
	if err := os.MkdirAll(s.ws.ThreadsDir(), 0o700); err != nil {
		return nil, fmt.Errorf("runtime: data dir: %w", err)
	}
	return s, nil
}

func (s *Server) start(st runtimestore.Store) (*Server, error) {
	s.store = st
	s.now = time.Now
	s.replica = newReplicaID()
	if sh, ok := st.(runtimestore.Shared); ok {
		s.shared = sh.Shared()
	}
	s.wire()
	// One process per sqlite file: every RUNNING run belongs to a process
	// that stopped. On a shared store only expired leases do (leases.go).
	interrupt := func() (int, error) {
		return st.InterruptUnfinished(context.Background(), "the runtime stopped during the run", time.Now())
	}
	if s.shared {
		interrupt = func() (int, error) {
			return st.InterruptExpired(context.Background(), fmt.Sprintf(leaseReason, s.cfg.RunLease), time.Now())
		}
	}
	if n, err := interrupt(); err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("runtime: store: %w", err)
	} else if n > 0 {
		s.log.Warn("runs left running by a previous process marked interrupted", "runs", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.bg.Add(4)
	go func() { defer s.bg.Done(); s.leaseLoop(ctx) }()
	go func() { defer s.bg.Done(); s.assembly.WatchCatalog(ctx) }()
	go func() { defer s.bg.Done(); s.assembly.WatchPolicy(ctx) }()
	go func() {
		defer s.bg.Done()
		r := s.cfg.Retention
		sw := &runtimeretention.Sweeper{Store: s.store, Workspace: s.ws, Log: s.log, Now: s.now}
		sw.Loop(ctx, runtimeretention.Periods{Threads: r.Threads, FrontDoorThreads: r.FrontDoorThreads, Runs: r.Runs, Messages: r.Messages, Artifacts: r.Artifacts, SweepInterval: r.SweepInterval})
	}()
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
	s.gw = conn
	return runtimev1.RegisterRuntimeServiceHandler(ctx, mux, conn)
}

// Ready reports whether the runtime's store answers (on PostgreSQL: the
// database, so a replica that lost it leaves the load balancer) and every
// upstream answers SERVING for its service over the runtime's own gRPC
// clients; the error names each part that does not.
func (s *Server) Ready(ctx context.Context) error {
	var bad []string
	if p, ok := s.store.(interface{ Ping(context.Context) error }); ok {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := p.Ping(cctx)
		cancel()
		if err != nil {
			return errors.New("store unreachable (storage.dsn or the data directory)")
		}
	}
	for _, u := range upstreamServices {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := s.health[u.short].Check(cctx, &healthpb.HealthCheckRequest{Service: u.full})
		cancel()
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s unreachable (%s)", u.short, runtimeassembly.ShortErr(err)))
		case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
			bad = append(bad, fmt.Sprintf("%s %s", u.short, resp.GetStatus()))
		}
	}
	if len(bad) == 0 {
		bad = s.credProbe.probe(ctx, s.catalog, s.authz, s.skills)
	}
	if len(bad) > 0 {
		return fmt.Errorf("upstream not ready: %s", strings.Join(bad, "; "))
	}
	if p, ok := s.store.(interface{ Ping(context.Context) error }); ok {
		if err := p.Ping(ctx); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	return nil
}

// Close stops the watchers and closes the store.
func (s *Server) Close() error {
	s.loops.close() // active runs end as interrupted before the store closes
	if s.stop != nil {
		s.stop()
	}
	s.bg.Wait()
	if s.store != nil {
		return s.store.Close()
	}
	return nil
}

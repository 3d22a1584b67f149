// Package app is the composition root: config → stores → services → servers.
// `toolplane serve` calls Run with the services selected by --services; the
// same code path serves all-in-one and split topologies (docs/conventions.md §4).
//
// Lifecycle: bind both listeners (a port in use is a config error), build
// the selected services in dependency order (catalog, authz, skills,
// runtime), register them on one gRPC server with one interceptor chain,
// health NOT_SERVING per service until its Ready reports nil, serve the REST
// gateway as a gRPC client of the same server. On cancellation: health
// NOT_SERVING, drain, GracefulStop bounded by server.shutdown_timeout, HTTP
// shutdown, services closed in reverse order, stores last.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/observability"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/authz"
	"github.com/toolplane/toolplane/services/catalog"
	"github.com/toolplane/toolplane/services/runtime"
	"github.com/toolplane/toolplane/services/runtime/runtimemcp"
	"github.com/toolplane/toolplane/services/runtime/runtimepg"
	"github.com/toolplane/toolplane/services/skills"
)

// Options are process-level knobs that are not configuration.
type Options struct {
	// Logger overrides the logger built from server.log.
	Logger *slog.Logger
	// OnReady, when set, is called once every selected service is SERVING.
	OnReady func(grpcAddr, httpAddr string)
	// ExtraServices are registered next to the selected ones (tests).
	ExtraServices []svckit.Service
	// Postgres is the process's PostgreSQL pool from OpenStorage (opened
	// and migrated before Listen); nil = Run opens storage.dsn itself when
	// set, else sqlite in the data directory. Run closes it after every
	// service.
	Postgres *pgxpool.Pool
}

// Listeners are the bound listeners of a process.
type Listeners struct {
	GRPC net.Listener
	HTTP net.Listener
}

// Listen binds both listeners. A failure is a *config.Error naming the flag.
func Listen(cfg *Config) (*Listeners, error) {
	g, err := net.Listen("tcp", cfg.Server.GRPCAddr)
	if err != nil {
		return nil, &config.Error{Key: "server.grpc_addr (--grpc-addr)", Reason: listenReason(cfg.Server.GRPCAddr, err)}
	}
	h, err := net.Listen("tcp", cfg.Server.HTTPAddr)
	if err != nil {
		g.Close()
		return nil, &config.Error{Key: "server.http_addr (--http-addr)", Reason: listenReason(cfg.Server.HTTPAddr, err)}
	}
	return &Listeners{GRPC: g, HTTP: h}, nil
}

func listenReason(addr string, err error) string {
	if strings.Contains(err.Error(), "address already in use") {
		return fmt.Sprintf("port in use: %s", addr)
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return fmt.Sprintf("cannot listen on %s: %v", addr, oe.Err)
	}
	return fmt.Sprintf("cannot listen on %s: %v", addr, err)
}

// Prepare performs every check that must pass before anything listens
// besides the config itself: the data directory and the credential files.
func Prepare(cfg *Config) (*auth.Authenticator, error) {
	if err := config.CheckDataDir(cfg.Server.DataDir); err != nil {
		return nil, err
	}
	return newAuthenticator(cfg.Auth)
}

func newAuthenticator(a config.Auth) (*auth.Authenticator, error) {
	o := auth.Options{Enabled: a.Enabled, GlobalAdminTenants: a.GlobalAdminTenants}
	for _, t := range a.Tokens {
		o.Tokens = append(o.Tokens, auth.TokenSpec{Name: t.Name, SHA256: t.SHA256, Kind: auth.Kind(t.Kind),
			Principal: &typev1.Principal{Subject: t.Subject, Tenant: t.Tenant, Roles: t.Roles, Attributes: t.Attributes}})
	}
	if a.JWT.Enabled() {
		j := a.JWT
		spec := &auth.JWTSpec{Issuer: j.Issuer, Audience: j.Audience, Leeway: j.Leeway, KindClaim: j.KindClaim,
			TenantClaim: j.TenantClaim, RolesClaim: j.RolesClaim, AttributesClaim: j.AttributesClaim, DefaultKind: auth.Kind(j.DefaultKind)}
		if j.HMACSecretFile != "" {
			b, err := os.ReadFile(j.HMACSecretFile)
			if err != nil {
				return nil, &config.Error{Key: "auth.jwt.hmac_secret_file", Reason: err.Error()}
			}
			spec.HMACSecret = []byte(strings.TrimSpace(string(b)))
			if len(spec.HMACSecret) < 32 {
				return nil, &config.Error{Key: "auth.jwt.hmac_secret_file", Reason: "secret must be at least 32 bytes"}
			}
		} else {
			k, err := auth.LoadPublicKey(j.PublicKeyFile)
			if err != nil {
				return nil, &config.Error{Key: "auth.jwt.public_key_file", Reason: err.Error()}
			}
			spec.PublicKey = k
		}
		o.JWT = spec
	}
	au, err := auth.NewAuthenticator(o)
	if err != nil {
		return nil, &config.Error{Key: "auth", Reason: err.Error()}
	}
	return au, nil
}

// policy routes class and validation lookups to the owning service.
type policy struct {
	classes  map[string]auth.Class
	services map[string]svckit.Service // by "/pkg.Service/" prefix
}

func (p *policy) Class(m string) auth.Class { return p.classes[m] }

func (p *policy) Validate(m string, req any) error {
	i := strings.LastIndexByte(m, '/')
	if i <= 0 {
		return nil
	}
	if s, ok := p.services[m[:i+1]]; ok {
		return s.Validate(m, req)
	}
	return nil
}

// Run serves until ctx is cancelled, then shuts down gracefully and returns
// nil. Listeners are closed by Run.
func Run(ctx context.Context, cfg *Config, au *auth.Authenticator, lis *Listeners, opts Options) (err error) {
	log := opts.Logger
	if log == nil {
		log = observability.NewLogger(os.Stderr, cfg.Server.Log.Level, cfg.Server.Log.Format)
	}
	stopTracing, err := observability.SetupTracing(ctx)
	if err != nil {
		log.Warn("tracing disabled", "error", err)
		stopTracing = func(context.Context) error { return nil }
	}
	defer func() { _ = stopTracing(context.Background()) }()

	selected := map[string]bool{}
	for _, s := range cfg.Server.Services {
		selected[s] = true
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	reg.MustRegister(metrics)

	pol := &policy{classes: map[string]auth.Class{}, services: map[string]svckit.Service{}}
	var rates []grpcx.RoleRate
	for _, r := range cfg.Server.RateLimits {
		rates = append(rates, grpcx.RoleRate{Role: r.Role, DecisionsPerSecond: r.DecisionsPerSecond, DecisionsBurst: r.DecisionsBurst,
			WritesPerSecond: r.WritesPerSecond, WritesBurst: r.WritesBurst})
	}
	// Failed logins (gRPC, REST, /mcp) are logged at info and recorded as
	// decisions once per minute per source (auth.FailedLogins).
	failed := auth.NewFailedLogins(auth.FailedLoginsOptions{Logger: log.With("service", "auth")})
	defer failed.Close()
	chain := grpcx.ServerOptions(grpcx.ChainOptions{Logger: log, Metrics: metrics, Authenticator: au, Policy: pol, RateLimiter: grpcx.NewRateLimiter(rates), FailedLogins: failed})
	// watchCtx ends the Watch* streams when the drain period is over.
	watchCtx, endWatches := context.WithCancel(context.Background())
	defer endWatches()
	base := append([]grpc.ServerOption{
		grpcx.EndWatchesOn(watchCtx),
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.MaxRecvMsgSize(cfg.Server.MaxMessageBytes),
		grpc.MaxSendMsgSize(cfg.Server.MaxMessageBytes),
	}, chain...)
	extOpts := slices.Clone(base)
	if cfg.Server.TLS.Enabled() {
		tc, err := grpcx.ServerTLS(cfg.Server.TLS.CertFile, cfg.Server.TLS.KeyFile, cfg.Server.TLS.ClientCAFile)
		if err != nil {
			lis.GRPC.Close()
			lis.HTTP.Close()
			return &config.Error{Key: "server.tls", Reason: err.Error()}
		}
		extOpts = append(extOpts, grpc.Creds(credentials.NewTLS(tc)))
	}
	// ext serves the public gRPC listener; in serves an in-memory listener
	// for this process's own clients (the REST gateway and the runtime's
	// upstream connections). Both carry the same chain and services.
	ext := grpc.NewServer(extOpts...)
	in := grpc.NewServer(base...)
	// Each in-memory connection holds two pipes of this size for its life
	// (4 MiB each kept 24 MiB resident for three connections); HTTP/2 flow
	// control bounds what is in flight anyway, so a larger pipe only holds
	// memory (docs/performance.md "Memory").
	mem := bufconn.Listen(256 << 10)

	healthSrv := health.NewServer()
	healthSrv.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	for _, s := range []*grpc.Server{ext, in} {
		healthpb.RegisterHealthServer(s, healthSrv)
		reflection.Register(s)
	}

	dialMem := func(token string) (*grpc.ClientConn, error) {
		return grpcx.Dial("passthrough:///toolplane-inprocess", grpcx.DialOptions{
			Token:           token,
			MaxMessageBytes: cfg.Server.MaxMessageBytes,
			Extra: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				return mem.DialContext(ctx)
			})},
		})
	}

	// The process's own service token: the runtime's credential towards
	// in-process upstreams (docs/architecture.md §5). Never written anywhere.
	var selfToken string
	// The runtime's catalog upstream, for the MCP front door's catalog
	// watch (tool-list change notices, runtimemcp notify.go).
	var mcpCatalog catalogv1.CatalogServiceClient
	// and its authz upstream, for resources and prompts (runtimemcp features.go).
	var mcpAuthz authzv1.AuthzServiceClient
	if au.Enabled() {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		selfToken = hex.EncodeToString(b)
		au.AddToken("self:runtime", selfToken, auth.KindService, &typev1.Principal{Subject: "svc:toolplane-runtime", Tenant: "default", Roles: []string{"service"}})
	}

	var (
		services []svckit.Service
		conns    []*grpc.ClientConn
	)
	// closeConns closes this process's own client connections (the
	// gateway's and the runtime's upstreams); idempotent.
	var closeConnsOnce sync.Once
	closeConns := func() {
		closeConnsOnce.Do(func() {
			for _, c := range conns {
				_ = c.Close()
			}
		})
	}
	closeAll := func() {
		closeConns()
		for i := len(services) - 1; i >= 0; i-- {
			if err := services[i].Close(); err != nil {
				log.Error("close service", "service", services[i].Name(), "error", err)
			}
		}
		if opts.Postgres != nil {
			opts.Postgres.Close()
		}
	}
	if opts.Postgres == nil && cfg.Storage.DSN != "" {
		pool, err := OpenStorage(ctx, cfg.Storage.DSN, cfg.Server.Services)
		if err != nil {
			lis.GRPC.Close()
			lis.HTTP.Close()
			return err
		}
		opts.Postgres = pool
	}
	env := func(name string) svckit.Env {
		return svckit.Env{DataDir: cfg.Server.DataDir, Logger: log.With("service", name), Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"service": name}, reg), MaxMessageBytes: cfg.Server.MaxMessageBytes, Postgres: opts.Postgres}
	}
	build := func() error {
		if selected["catalog"] {
			s, err := catalog.New(ctx, cfg.Catalog, env("catalog"))
			if err != nil {
				return serviceError("catalog", err)
			}
			services = append(services, s)
		}
		if selected["authz"] {
			s, err := authz.New(ctx, cfg.Authz, env("authz"))
			if err != nil {
				return serviceError("authz", err)
			}
			services = append(services, s)
		}
		if selected["skills"] {
			s, err := skills.New(ctx, cfg.Skills, env("skills"))
			if err != nil {
				return serviceError("skills", err)
			}
			services = append(services, s)
		}
		if selected["runtime"] {
			e := env("runtime")
			e.Upstreams = map[string]grpc.ClientConnInterface{}
			for _, up := range []string{"catalog", "authz", "skills"} {
				conn, err := upstreamConn(cfg, up, selected[up], selfToken, dialMem)
				if err != nil {
					return err
				}
				conns = append(conns, conn)
				e.Upstreams[up] = conn
				if up == "catalog" {
					mcpCatalog = catalogv1.NewCatalogServiceClient(conn)
				}
				if up == "authz" {
					mcpAuthz = authzv1.NewAuthzServiceClient(conn)
				}
			}
			var s *runtime.Server
			var err error
			if opts.Postgres != nil {
				var st *runtimepg.Store
				if st, err = runtimepg.Open(ctx, opts.Postgres); err == nil {
					s, err = runtime.NewWithStore(cfg.Runtime, e, st)
				}
			} else {
				s, err = runtime.New(ctx, cfg.Runtime, e)
			}
			if err != nil {
				return serviceError("runtime", err)
			}
			services = append(services, s)
		}
		services = append(services, opts.ExtraServices...)
		return nil
	}
	if err := build(); err != nil {
		closeAll()
		lis.GRPC.Close()
		lis.HTTP.Close()
		return err
	}

	for _, s := range services {
		s.Register(ext)
		s.Register(in)
		for m, c := range s.Classes() {
			pol.classes[m] = c
		}
		pol.services["/"+s.FullName()+"/"] = s
		healthSrv.SetServingStatus(s.FullName(), healthpb.HealthCheckResponse_NOT_SERVING)
	}

	// REST gateway: a gRPC client of the in-memory listener; the caller's
	// Authorization header is forwarded, not replaced.
	gwConn, err := dialMem("")
	if err != nil {
		closeAll()
		return err
	}
	conns = append(conns, gwConn)
	if selected["authz"] && au.Enabled() {
		ac, err := dialMem(selfToken)
		if err != nil {
			closeAll()
			return err
		}
		conns = append(conns, ac)
		failed.SetSink(recordFailedLogin(authzv1.NewAuthzServiceClient(ac)))
	}
	hl := cfg.Server.HTTP
	mux := gateway.NewMux(gateway.RequireCredential(au, func(r *http.Request, err error) {
		failed.Note("rest", remoteHost(r.RemoteAddr), r.Method+" "+r.URL.Path, status.Convert(err).Message())
	}),
		gateway.LimitBodies(gateway.BodyLimits{Default: hl.MaxBodyBytes, ToolCall: hl.ToolCallMaxBodyBytes, Upload: hl.UploadMaxBodyBytes, UploadInFlight: hl.UploadMaxInFlight}))
	for _, s := range services {
		if err := s.RegisterGateway(ctx, mux, gwConn); err != nil {
			closeAll()
			return fmt.Errorf("gateway %s: %w", s.Name(), err)
		}
	}
	probe := &probe{services: services, health: healthSrv}
	// --- MCP front door (docs/architecture.md §1): /mcp on the HTTP listener when the runtime is served.
	httpHandler := gateway.Handler(mux, probe, reg)
	// Routes a service serves outside the gateway (the catalog's OAuth
	// callback, docs/architecture.md §10.6).
	for _, s := range services {
		if r, ok := s.(httpRouter); ok {
			outer := http.NewServeMux()
			for pattern, h := range r.HTTPRoutes() {
				outer.Handle(pattern, h)
			}
			outer.Handle("/", httpHandler)
			httpHandler = outer
		}
	}
	if selected["runtime"] {
		mlog := log.With("service", "runtime-mcp")
		mo := runtimemcp.Options{Logger: mlog, RequireAuthorization: cfg.Auth.Enabled, Context: ctx, Catalog: mcpCatalog, Authz: mcpAuthz,
			AllowedOrigins: hl.MCPAllowedOrigins, MaxBodyBytes: hl.MCPMaxBodyBytes, MaxSessionsPerPrincipal: hl.MCPMaxSessionsPerPrincipal,
			OnRefusal: func(r *http.Request, code int, reason string) {
				mlog.Info("mcp request refused", "method", r.Method, "status", code, "reason", reason, "remote", r.RemoteAddr)
				if code == http.StatusUnauthorized && r.Header.Get("Authorization") != "" {
					failed.Note("mcp", remoteHost(r.RemoteAddr), r.Method+" "+r.URL.Path, "invalid credential")
				}
			}}
		if au.Enabled() {
			// Every /mcp request's credential is verified here and each MCP
			// session is bound to its principal (docs/architecture.md §5).
			mo.Verifier = au
		}
		httpHandler = runtimemcp.Mount(httpHandler, gwConn, mo)
	}
	// --- end MCP front door.
	httpSrv := &http.Server{Handler: httpHandler, ReadHeaderTimeout: 10 * time.Second}
	httpLis := lis.HTTP
	if cfg.Server.TLS.Enabled() {
		tc, err := grpcx.ServerTLS(cfg.Server.TLS.CertFile, cfg.Server.TLS.KeyFile, cfg.Server.TLS.ClientCAFile)
		if err != nil {
			closeAll()
			return &config.Error{Key: "server.tls", Reason: err.Error()}
		}
		httpSrv.TLSConfig = tc
	}
	metrics.InitializeMetrics(ext)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ignoreClosed(ext.Serve(lis.GRPC)) })
	g.Go(func() error { return ignoreClosed(in.Serve(mem)) })
	g.Go(func() error {
		var err error
		if cfg.Server.TLS.Enabled() {
			err = httpSrv.ServeTLS(httpLis, "", "")
		} else {
			err = httpSrv.Serve(httpLis)
		}
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
	g.Go(func() error {
		probe.watch(gctx, log, cfg, lis, opts.OnReady)
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down", "drain", cfg.Server.DrainPeriod, "timeout", cfg.Server.ShutdownTimeout)
		probe.shutdown()
		time.Sleep(cfg.Server.DrainPeriod)
		endWatches()
		deadline := time.Now().Add(cfg.Server.ShutdownTimeout)
		// 1. The external entry points drain first: their in-flight calls may
		// still need the in-memory server (the gateway forwards to it, the
		// runtime reaches in-process upstreams through it).
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); gracefulStop(ext, deadline, log, "grpc") }()
		go func() {
			defer wg.Done()
			hctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			if err := httpSrv.Shutdown(hctx); err != nil {
				_ = httpSrv.Close()
			}
		}()
		wg.Wait()
		// 2. This process's own clients go away, ending their long-lived
		// streams on the in-memory server (e.g. the runtime's watches), which
		// GracefulStop would otherwise wait for until the deadline.
		closeConns()
		// 3. The in-memory server.
		gracefulStop(in, deadline, log, "in-process grpc")
		return nil
	})
	err = g.Wait()
	closeAll()
	if err != nil && ctx.Err() != nil {
		// errors after cancellation come from the shutdown itself
		log.Debug("error during shutdown", "error", err)
		return nil
	}
	return err
}

// serviceError wraps a service constructor's error. One that names a key of
// the service's section ("catalog.extensions_config: ...", the convention of
// every services/<svc> Config) is a configuration error (exit 2, one line).
func serviceError(section string, err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		return err
	}
	if msg := err.Error(); strings.HasPrefix(msg, section+".") {
		if k, r, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(k, " \n") {
			return &config.Error{Key: k, Reason: strings.ReplaceAll(r, "\n", " ")}
		}
	}
	return fmt.Errorf("%s: %w", section, err)
}

// gracefulStop stops s gracefully, or forcibly once deadline has passed
// (at least one second is always granted).
func gracefulStop(s *grpc.Server, deadline time.Time, log *slog.Logger, name string) {
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	wait := max(time.Until(deadline), time.Second)
	select {
	case <-done:
	case <-time.After(wait):
		log.Warn("graceful stop timed out; stopping", "server", name)
		s.Stop()
		<-done
	}
}

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// recordFailedLogin writes a failed login to the decision log: a refusal
// of resource type credential for the unauthenticated principal of the
// default tenant, the target naming the surface and what was asked.
func recordFailedLogin(ac authzv1.AuthzServiceClient) func(context.Context, auth.FailedLogin) error {
	return func(ctx context.Context, rec auth.FailedLogin) error {
		code := "auth.credential_invalid"
		if rec.Flood {
			code = "auth.credential_invalid_flood"
		}
		target := rec.Surface + " " + rec.Target
		if len(target) > 256 {
			target = target[:256]
		}
		msg := rec.ReasonMessage()
		if len(msg) > 1024 {
			msg = msg[:1024]
		}
		_, err := ac.RecordRefusal(ctx, &authzv1.RecordRefusalRequest{
			Principal:    &typev1.Principal{Subject: "(unauthenticated)", Tenant: "default"},
			ResourceType: authzv1.ResourceType_RESOURCE_TYPE_CREDENTIAL, Action: authzv1.Action_ACTION_USE,
			Target: target, Reason: &authzv1.Reason{Code: code, Message: msg}})
		return err
	}
}

// remoteHost is the host of an http.Request.RemoteAddr (port dropped).
func remoteHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// upstreamServices are the gRPC health service names of the runtime's
// upstreams (the names each process's probe reports).
var upstreamServices = map[string]string{
	"catalog": catalogv1.CatalogService_ServiceDesc.ServiceName,
	"authz":   authzv1.AuthzService_ServiceDesc.ServiceName,
	"skills":  skillsv1.SkillsService_ServiceDesc.ServiceName,
}

// upstreamConn dials the in-process server for a local upstream, or the
// configured address (with its token file and TLS) for a remote one.
func upstreamConn(cfg *Config, name string, local bool, selfToken string, dialMem func(string) (*grpc.ClientConn, error)) (*grpc.ClientConn, error) {
	if local {
		return dialMem(selfToken)
	}
	u := cfg.Runtime.Upstream(name)
	key := "runtime.upstreams." + name
	// Only replicas reporting the service SERVING get calls: a restarted
	// replica joins when it is ready (docs/decisions/0083-client-side-load-balancing.md).
	o := grpcx.DialOptions{MaxMessageBytes: cfg.Server.MaxMessageBytes, HealthService: upstreamServices[name]}
	if u.TokenFile != "" {
		b, err := os.ReadFile(u.TokenFile)
		if err != nil {
			return nil, &config.Error{Key: key + ".token_file", Reason: err.Error()}
		}
		o.Token = strings.TrimSpace(string(b))
	}
	if u.TLS.Enabled {
		tc, err := grpcx.ClientTLS(u.TLS.CAFile, u.TLS.CertFile, u.TLS.KeyFile, u.TLS.ServerName)
		if err != nil {
			return nil, &config.Error{Key: key + ".tls", Reason: err.Error()}
		}
		o.TLS = tc
	}
	conn, err := grpcx.Dial(u.Address, o)
	if err != nil {
		return nil, &config.Error{Key: key + ".address", Reason: err.Error()}
	}
	return conn, nil
}

// probe flips gRPC health per service as Ready reports, and answers /readyz.
type probe struct {
	services []svckit.Service
	health   *health.Server
	mu       sync.Mutex
	last     map[string]error
	stopping bool
}

func (p *probe) Live(context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.stopping
}

func (p *probe) Ready(ctx context.Context) map[string]error {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]error{}
	for _, s := range p.services {
		if p.stopping {
			out[s.Name()] = errors.New("shutting down")
			continue
		}
		err, ok := p.last[s.Name()]
		if !ok {
			err = errors.New("starting")
		}
		out[s.Name()] = err
	}
	return out
}

func (p *probe) check(ctx context.Context) bool {
	res := map[string]error{}
	all := true
	for _, s := range p.services {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := s.Ready(cctx)
		cancel()
		res[s.Name()] = err
		st := healthpb.HealthCheckResponse_SERVING
		if err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
			all = false
		}
		p.mu.Lock()
		if !p.stopping {
			p.health.SetServingStatus(s.FullName(), st)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return false
	}
	p.last = res
	if all {
		p.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	} else {
		p.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return all
}

func (p *probe) watch(ctx context.Context, log *slog.Logger, cfg *Config, lis *Listeners, onReady func(string, string)) {
	announced := false
	interval := 100 * time.Millisecond
	for {
		ready := p.check(ctx)
		if ready && !announced {
			announced = true
			log.Info("serving", "grpc", lis.GRPC.Addr().String(), "http", lis.HTTP.Addr().String(), "services", strings.Join(cfg.Server.Services, ","), "data_dir", abs(cfg.Server.DataDir), "storage", storageKind(cfg), "auth", cfg.Auth.Enabled)
			if onReady != nil {
				onReady(lis.GRPC.Addr().String(), lis.HTTP.Addr().String())
			}
		}
		if announced {
			interval = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func (p *probe) shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = true
	p.health.Shutdown()
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// httpRouter is a service with routes of its own on the HTTP listener.
type httpRouter interface {
	// HTTPRoutes maps ServeMux patterns to handlers.
	HTTPRoutes() map[string]http.Handler
}

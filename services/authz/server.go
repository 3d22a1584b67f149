// Package authz is the authorization service: a Principal-based policy decision
// point on Casbin that filters what a principal can see, re-checks every call and
// audits decisions (docs/architecture.md §2.2, §5; docs/deerflow.md §3).
//
// The store — sqlite (authzsqlite) by default, PostgreSQL (authzpg) when
// storage.dsn is set — is the only source of truth. At start the
// service imports, in order: the shipped default policy (only into an empty
// store), the DeerFlow `authorization` section of the config (replacing the
// previous DeerFlow import and the default lines of the roles it defines),
// and the optional policy file (file-owned lines). Every change — API, file
// or another process writing the store — bumps the policy version; the
// service builds the new decision snapshot aside and swaps it atomically
// (authzcasbin.Engine), so each decision reports the exact version it used.
// Every error denies (fail closed); only FilterResources may be configured
// fail-open.
package authz

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzpg"
	"github.com/toolplane/toolplane/services/authz/authzsqlite"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// Server implements authzv1.AuthzServiceServer.
type Server struct {
	authzv1.UnimplementedAuthzServiceServer
	cfg    Config
	env    svckit.Env
	log    *slog.Logger
	store  authzstore.Store
	engine *authzcasbin.Engine
	dlog   *authzstore.Log
	flood  *floodGuard                      // per-principal decision-record rate (flood.go)
	clock  atomic.Pointer[func() time.Time] // time.Now; tests replace it (setNow)

	reloadMu   sync.Mutex
	loaded     int64 // version of the last successful load
	loadFailed bool
	fileHash   [32]byte
	fileErr    string

	// importLock is authz.file_import on PostgreSQL (nil on sqlite): only
	// its holder imports the file-owned policy, so replicas whose files
	// differ (a rolling config change) do not overwrite each other; the
	// others follow through NOTIFY. importer: this replica holds it.
	importLock *pgstore.SessionLock
	importer   bool

	decisions *prometheus.CounterVec

	// unannotated is ResolveAnnotations(nil, cfg.AnnotationDefaults), built
	// once: the condition input of every resource without annotations (most
	// of a FilterResources call's candidates), shared read-only.
	unannotatedOnce sync.Once
	unannotated     map[string]string

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

var (
	_ authzv1.AuthzServiceServer = (*Server)(nil)
	_ svckit.Service             = (*Server)(nil)
)

// New builds the service from its config section and the process
// environment: it opens DataDir/authz.db, runs the start-up imports, loads
// the policy and starts the reload and retention loops.
func New(ctx context.Context, cfg Config, env svckit.Env) (*Server, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	if env.DataDir == "" {
		return nil, errors.New("authz: a data directory is required (DataDir/authz.db)")
	}
	if err := os.MkdirAll(env.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("authz: data dir: %w", err)
	}
	modelText := ""
	if cfg.ModelFile != "" {
		data, err := os.ReadFile(cfg.ModelFile)
		if err != nil {
			return nil, fmt.Errorf("authz.model_file: %w", err)
		}
		modelText = string(data)
	}
	engine, err := authzcasbin.NewEngine(modelText)
	if err != nil {
		return nil, fmt.Errorf("authz.model_file: %w", err)
	}
	var store authzstore.Store
	if env.Postgres != nil {
		var ps *authzpg.Store
		if ps, err = authzpg.Open(ctx, env.Postgres); err == nil {
			ps.OnListenError(func(err error) {
				log.Warn("authz policy listener disconnected; reconnecting (the version check every authz.reload_interval stays on)", "err", err)
			})
			store = ps
		}
	} else {
		store, err = authzsqlite.Open(filepath.Join(env.DataDir, "authz.db"))
	}
	if err != nil {
		return nil, fmt.Errorf("authz: %w", err)
	}
	return newWithStore(ctx, cfg, env, log, engine, store)
}

// newWithStore finishes New over any authzstore.Store (the store is closed on error).
func newWithStore(ctx context.Context, cfg Config, env svckit.Env, log *slog.Logger, engine *authzcasbin.Engine, store authzstore.Store) (*Server, error) {
	s := &Server{cfg: cfg, env: env, log: log, store: store, engine: engine}
	if l, ok := store.(fileImportLocker); ok {
		s.importLock = l.NewFileImportLock()
	}
	s.setNow(time.Now)
	s.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolplane_authz_decisions_total",
		Help: "Authorization decisions by RPC, result and primary reason code.",
	}, []string{"rpc", "allow", "code"})
	if env.Metrics != nil {
		if err := env.Metrics.Register(s.decisions); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				s.decisions = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	if err := s.importAtStart(ctx); err != nil {
		if s.importLock != nil {
			s.importLock.Release()
		}
		store.Close()
		return nil, err
	}
	if err := s.reload(ctx); err != nil {
		store.Close()
		return nil, fmt.Errorf("authz: load policy: %w", err)
	}
	s.dlog = authzstore.NewLog(store, 512)
	s.flood = newFloodGuard(s.cfg)
	loopCtx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.wg.Add(2)
	go s.reloadLoop(loopCtx)
	go s.pruneLoop(loopCtx)
	if n, ok := store.(authzstore.Notifier); ok {
		s.wg.Add(2)
		kick := make(chan struct{}, 1)
		go s.listen(loopCtx, n, kick)
		go s.notifiedReloads(loopCtx, kick)
	}
	return s, nil
}

// listen follows the policy changes the store reports (PostgreSQL
// LISTEN/NOTIFY, authzpg/notify.go): a version other than the one loaded
// (or 0: re-check after a reconnection) asks notifiedReloads for a reload.
// The version check of reloadLoop stays as the fallback
// (docs/decisions/0085-policy-propagation.md).
func (s *Server) listen(ctx context.Context, n authzstore.Notifier, kick chan<- struct{}) {
	defer s.wg.Done()
	n.Listen(ctx, func(v int64) {
		s.reloadMu.Lock()
		stale := v == 0 || v > s.loaded || s.loadFailed
		s.reloadMu.Unlock()
		if stale {
			select {
			case kick <- struct{}{}:
			default: // a reload is already pending: it reads the newest version
			}
		}
	})
}

// notifiedReloads runs the reloads listen asks for, one at a time; a burst
// of notifications costs at most two reloads.
func (s *Server) notifiedReloads(ctx context.Context, kick <-chan struct{}) {
	defer s.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			_ = s.reload(ctx)
		}
	}
}

// fileImportLocker is implemented by stores shared by several replicas
// (authzpg): the lock that elects the one importing file-owned policy.
type fileImportLocker interface {
	NewFileImportLock() *pgstore.SessionLock
}

func (s *Server) importAtStart(ctx context.Context) error {
	seeded, err := s.store.SeedDefault(ctx, authzcasbin.DefaultRules())
	if err != nil {
		return fmt.Errorf("authz: import default policy: %w", err)
	}
	if seeded {
		s.log.Info("authz default policy imported into an empty store")
	}
	if s.importLock != nil {
		held, err := s.importLock.TryLock(ctx)
		if err != nil {
			return fmt.Errorf("authz: storage.dsn: take %s: %w", authzpg.FileImportLock, err)
		}
		s.importer = held
		if !held {
			// authz.policy_file was parsed by Validate; another replica
			// imports it, and this one follows the database.
			s.log.Info("authz: another replica imports the file-owned policy into the database", "lock", authzpg.FileImportLock)
			return nil
		}
		s.log.Info("authz: this replica imports the file-owned policy into the database", "lock", authzpg.FileImportLock)
	}
	return s.importFileOwned(ctx, true)
}

// importFileOwned imports the authz.authorization section and the policy
// file (atStart: an invalid file is an error, and the file is read even
// when its content is unchanged).
func (s *Server) importFileOwned(ctx context.Context, atStart bool) error {
	var rules []authzcasbin.Rule
	var roles []string
	var err error
	if s.cfg.Authorization != nil {
		rules, roles, err = authzcasbin.TranslateDeerFlow(s.cfg.Authorization, "authz.authorization")
		if err != nil {
			return err
		}
	}
	if _, changed, err := s.store.ReplaceSource(ctx, authzcasbin.SourceDeerFlow, rules, nil, roles); err != nil {
		if !atStart {
			s.log.Error("authz authorization section not imported", "err", err)
			return nil
		}
		return fmt.Errorf("authz: import authz.authorization: %w", err)
	} else if changed {
		s.log.Info("authz DeerFlow authorization section imported", "lines", len(rules), "roles", len(roles))
	}
	return s.syncPolicyFile(ctx, atStart)
}

// mayImport reports whether this replica imports file-owned policy now:
// always on sqlite; on PostgreSQL while it holds authz.file_import, which
// it tries to take on every tick (a holder that died released it). A
// replica that just took it over imports at once, whatever its file's
// hash.
func (s *Server) mayImport(ctx context.Context) bool {
	if s.importLock == nil {
		return true
	}
	held, err := s.importLock.TryLock(ctx)
	if err != nil {
		s.log.Warn("authz: file import lock", "lock", authzpg.FileImportLock, "err", err)
	}
	if held && !s.importer {
		s.log.Info("authz: this replica took over importing the file-owned policy", "lock", authzpg.FileImportLock)
		s.reloadMu.Lock()
		s.fileHash = [32]byte{}
		s.reloadMu.Unlock()
		_ = s.importFileOwned(ctx, false)
	} else if !held && s.importer {
		s.log.Warn("authz: this replica lost the file import lock; another replica imports the file-owned policy", "lock", authzpg.FileImportLock)
	}
	s.importer = held
	return held
}

// syncPolicyFile replaces the file-owned lines when the file's content
// changed. At start an invalid file is an error; later it is logged and the
// previous file lines stay in force.
func (s *Server) syncPolicyFile(ctx context.Context, atStart bool) error {
	var rules []authzcasbin.Rule
	var links []authzcasbin.Link
	var sum [32]byte
	if s.cfg.PolicyFile != "" {
		data, err := os.ReadFile(s.cfg.PolicyFile)
		if err != nil {
			return s.fileProblem(atStart, fmt.Errorf("authz.policy_file: %w", err))
		}
		sum = sha256.Sum256(data)
		s.reloadMu.Lock()
		same := sum == s.fileHash && !atStart
		s.reloadMu.Unlock()
		if same {
			return nil
		}
		rules, links, err = authzcasbin.ParsePolicyText(string(data), authzcasbin.SourceFile)
		if err != nil {
			return s.fileProblem(atStart, fmt.Errorf("authz.policy_file: %s: %w", s.cfg.PolicyFile, err))
		}
	}
	v, changed, err := s.store.ReplaceSource(ctx, authzcasbin.SourceFile, rules, links, nil)
	if err != nil {
		return s.fileProblem(atStart, fmt.Errorf("authz.policy_file: store: %w", err))
	}
	s.reloadMu.Lock()
	s.fileHash, s.fileErr = sum, ""
	s.reloadMu.Unlock()
	if changed {
		s.log.Info("authz policy file applied", "path", s.cfg.PolicyFile, "lines", len(rules), "links", len(links), "policy_version", v)
	}
	return nil
}

func (s *Server) fileProblem(atStart bool, err error) error {
	if atStart {
		return err
	}
	s.reloadMu.Lock()
	repeated := s.fileErr == err.Error()
	s.fileErr = err.Error()
	s.reloadMu.Unlock()
	if !repeated {
		s.log.Error("authz policy file not applied; previous file lines stay in force", "err", err)
	}
	return nil
}

// reload loads the store's policy into a new snapshot and swaps it in. A
// store or validation failure installs the failed snapshot: every decision is
// denied with authz.store_error until a reload succeeds.
func (s *Server) reload(ctx context.Context) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	set, err := s.store.Snapshot(ctx)
	if err == nil && set.Version == s.loaded && !s.loadFailed && s.engine.Version() == set.Version && s.loaded != 0 {
		return nil
	}
	if err == nil {
		err = s.engine.Load(set)
	}
	if err != nil && ctx.Err() != nil {
		return err // shutting down or abandoned: keep the current snapshot
	}
	if err != nil {
		s.engine.Fail(err)
		s.loadFailed = true
		s.log.Error("authz policy load failed; denying every decision until it succeeds", "err", err)
		return err
	}
	if s.loadFailed {
		s.log.Info("authz policy load recovered", "policy_version", set.Version)
	}
	s.loaded, s.loadFailed = set.Version, false
	return nil
}

func (s *Server) reloadLoop(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.mayImport(ctx) && s.cfg.PolicyFile != "" {
			_ = s.syncPolicyFile(ctx, false)
		}
		v, err := s.store.Version(ctx)
		s.reloadMu.Lock()
		stale := err != nil || v != s.loaded || s.loadFailed
		s.reloadMu.Unlock()
		if stale && ctx.Err() == nil {
			_ = s.reload(ctx)
		}
	}
}

func (s *Server) pruneLoop(ctx context.Context) {
	defer s.wg.Done()
	for {
		s.prune(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.PruneInterval):
		}
	}
}

func (s *Server) prune(ctx context.Context) {
	var r authzstore.Retention
	if s.cfg.DecisionRetention > 0 {
		r.AllowsBefore = s.now().Add(-s.cfg.DecisionRetention)
	}
	if s.cfg.DenyRetention > 0 {
		r.DeniesBefore = s.now().Add(-s.cfg.DenyRetention)
	}
	if s.cfg.DecisionMaxRows > 0 {
		r.MaxRowsPerTenant = s.cfg.DecisionMaxRows
	}
	if n, err := s.store.Prune(ctx, r); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("authz decision retention failed", "err", err)
		}
	} else if n > 0 {
		s.log.Info("authz decision records pruned", "deleted", n)
	}
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

// Ready reports whether the service can serve: the store answers and the
// policy is loaded.
func (s *Server) Ready(ctx context.Context) error {
	if err := s.store.Ready(ctx); err != nil {
		return fmt.Errorf("authz store: %w", err)
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.loadFailed {
		return errors.New("authz policy not loaded")
	}
	return nil
}

// Close stops the loops, flushes the decision log and closes the store.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.stop()
		s.wg.Wait()
		if s.importLock != nil {
			s.importLock.Release()
		}
		err = errors.Join(s.dlog.Close(), s.store.Close())
	})
	return err
}

// now is the server's clock (time.Now unless a test replaced it).
func (s *Server) now() time.Time { return (*s.clock.Load())() }

// setNow replaces the clock; safe while the server's goroutines run.
func (s *Server) setNow(f func() time.Time) { s.clock.Store(&f) }

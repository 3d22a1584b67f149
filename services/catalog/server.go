// Package catalog is the catalog service: it owns every connection to MCP servers,
// the tools they expose, the deferred catalog and its hash, tool search, and every
// call to a tool (docs/architecture.md §2.1).
//
// Layout: catalogconfig (extensions_config.json), catalognames (exposed
// names, docs/architecture.md §7), catalogmcp (MCP sessions, supervision, scope
// pool); this package keeps an immutable snapshot of the catalog (rebuilt on
// every change and swapped atomically, so readers never see a half-built
// state), computes hashes (hash.go), serves the RPCs and streams changes.
package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/search"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogacp"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// Version is announced to MCP servers as clientInfo.version.
var Version = "0.1.0"

// DefaultMaxMessageBytes is used when the environment sets no maximum.
const DefaultMaxMessageBytes = 64 << 20

// Server implements catalogv1.CatalogServiceServer.
type Server struct {
	catalogv1.UnimplementedCatalogServiceServer
	cfg    Config
	env    svckit.Env
	log    *slog.Logger
	mgr    *catalogmcp.Manager
	path   string
	maxMsg int

	acp *catalogacp.Pool // nil: no ACP agents configured

	feats featureHub // WatchFeatures (features.go)

	snap    atomic.Pointer[snapshot]
	buildMu sync.Mutex
	cache   map[string]*serverCache

	writeMu sync.Mutex // serialises writes and reloads of the config file
	// applied is the SHA-256 of the configuration content applied last;
	// seen the content read last (a warning or parse error is logged once
	// per content); candidate the changed content seen on the previous
	// tick, applied only when a tick later it is still the same (debounce).
	applied, seen, candidate [32]byte
	// db is the server configuration in PostgreSQL, its source of truth
	// there (configdb.go); nil on sqlite, where the file is.
	db *dbState

	// store is the identity store (DataDir/catalog.db, or the catalog
	// schema of env.Postgres); vectors its tool-vector cache per model;
	// storeClose releases it (stores.go).
	store      catalogstore.IdentityStore
	vectors    func(model string) vectorCache
	storeClose func() error
	ids        *identity
	// builtSettled reports that the last rebuild saw every server settled
	// (its names are recorded, none provisional).
	builtSettled atomic.Bool

	watchMu  sync.Mutex
	watchers map[chan *catalogChange]struct{}

	index      searchIndex
	views      *viewCache      // candidate views of SearchTools (views.go)
	remote     *remoteEmbedder // catalog.search.embedder; nil without one
	oauthClose func() error    // the OAuth token store (oauth.go)
	met        *metrics
	churn      churnGuard // churn.go; used under buildMu

	stop     chan struct{}
	wg       sync.WaitGroup
	closeOne sync.Once

	readyOnce atomic.Bool // catalog.ready_requires was met once (latched)
	storeDown atomic.Bool // the last store ping of Ready failed

	place *placer // stateful servers over replicas (placement.go); nil = off
}

var (
	_ catalogv1.CatalogServiceServer = (*Server)(nil)
	_ svckit.Service                 = (*Server)(nil)
)

// New builds the service from its config section and the process
// environment, loads extensions_config.json and starts discovery (in the
// background; Ready waits for servers only as catalog.ready_requires says,
// and a broken server never blocks the service). It starts the reload loop.
func New(ctx context.Context, cfg Config, env svckit.Env) (*Server, error) {
	explicitMaxDef := cfg.MaxDefinitionBytes != 0
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	path, err := filepath.Abs(cfg.ExtensionsConfig)
	if err != nil {
		return nil, fmt.Errorf("catalog.extensions_config: %w", err)
	}
	s := &Server{cfg: cfg, env: env, log: log, path: path, maxMsg: env.MaxMessageBytes,
		cache: map[string]*serverCache{}, watchers: map[chan *catalogChange]struct{}{}, stop: make(chan struct{})}
	if s.maxMsg <= 0 {
		s.maxMsg = DefaultMaxMessageBytes
	}
	if limit := s.maxMsg / 4; cfg.MaxDefinitionBytes > limit {
		if explicitMaxDef {
			return nil, fmt.Errorf("catalog.max_definition_bytes: %d exceeds a quarter of the maximum message size (%d)", cfg.MaxDefinitionBytes, limit)
		}
		s.cfg.MaxDefinitionBytes = limit // the default, lowered to fit a small message limit
	}
	if err := s.openStore(ctx); err != nil {
		return nil, err
	}
	s.ids = &identity{store: s.store, log: log, retention: cfg.NameRetention, maxPerServer: cfg.MaxNamesPerServer}
	if err := s.ids.load(ctx); err != nil {
		s.closeStore()
		return nil, fmt.Errorf("catalog: %w", err)
	}
	remote, err := newEmbedder(cfg.Search.Embedder, func(model string) search.VectorCache { return s.vectors(model) }, log)
	if err != nil {
		s.closeStore()
		return nil, err
	}
	var emb search.Embedder // nil: the built-in static vectors
	if remote != nil {
		s.remote, emb = remote, remote.embedder
	}
	s.snap.Store(&snapshot{active: newNameIndex(0), heldIdx: newNameIndex(0), hash: emptyHash()})
	s.index.init(emb, log)
	s.views = newViewCache(cfg.Search.ViewCacheBytes)
	s.met = newMetrics(s, env.Metrics)
	s.ids.onEvict = s.met.observeEvicted
	oopts, oclose, err := oauthOptions(cfg.OAuth, env.DataDir, cfg.Egress.policy().Client(), s.store)
	if err != nil {
		s.closeStore()
		return nil, err
	}
	s.oauthClose = oclose
	if s.place, err = s.newPlacer(ctx); err != nil {
		s.closeStore()
		return nil, err
	}
	s.mgr = catalogmcp.NewManager(catalogmcp.ManagerOptions{
		Placement: s.placement(),
		Options: catalogmcp.Options{Version: Version, CloseGrace: cfg.CloseGrace, Logger: log, CommandPolicy: commandPolicy(cfg), ThreadsDir: threadsDir(cfg, env), HTTPClient: cfg.Egress.policy().StreamingClient(), OAuth: oopts,
			ScopeDirRoot: scopeDirRoot(env.DataDir)},
		PoolCap:       cfg.Sessions.MaxScoped,
		PoolTenantCap: cfg.Sessions.MaxScopedPerTenant,
		PoolIdleTTL:   cfg.Sessions.IdleTTL,
		OnPoolEvict:   s.met.observeSessionEvicted,
		OnChange:      func() { s.rebuild(); s.featuresChanged() },
		// Resources and prompts (features.go).
		OnFeaturesChange: s.featuresChanged,
	})
	var f *catalogconfig.File
	var raw []byte
	if s.db != nil {
		f, raw, err = s.initialConfigDB(ctx)
	} else {
		f, raw, err = s.initialConfig()
	}
	if err != nil {
		s.mgr.Close()
		s.closeStore()
		return nil, fmt.Errorf("catalog.extensions_config: %s: %w", path, err)
	}
	s.applied = sha256.Sum256(raw)
	s.logWarnings(f)
	s.mgr.Apply(f.Servers)
	s.rebuild()
	if err := s.startACP(); err != nil {
		s.mgr.Close()
		s.closeStore()
		return nil, err
	}
	s.rebuildWhenSettled()
	if s.db != nil {
		s.startDB()
	}
	s.wg.Add(1)
	go s.reloadLoop()
	s.startPlacement()
	return s, nil
}

// readyPingTimeout bounds the store ping of Ready.
const readyPingTimeout = 2 * time.Second

// Manager exposes the connection manager (tests, benchmarks).
func (s *Server) Manager() *catalogmcp.Manager { return s.mgr }

// WaitSettled waits until every server's first connection attempt ended and
// the catalog snapshot reflects it.
func (s *Server) WaitSettled(ctx context.Context) error {
	if err := s.mgr.WaitSettled(ctx); err != nil {
		return err
	}
	s.rebuild()
	return nil
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

// Ready reports whether the service can serve: its store answers (on
// PostgreSQL the database, within readyPingTimeout, so a replica that lost
// it leaves the load balancer; on sqlite DataDir/catalog.db), checked on
// every call; the configuration was loaded and, as catalog.ready_requires
// says, the MCP servers came up (servers that fail are reported per
// server, not here). Once met, the servers' condition is latched: a server
// restarting later does not make the catalog unready.
func (s *Server) Ready(ctx context.Context) error {
	select {
	case <-s.stop:
		return errors.New("catalog: closed")
	default:
	}
	if p, ok := s.store.(interface{ Ping(context.Context) error }); ok {
		pctx, cancel := context.WithTimeout(ctx, readyPingTimeout)
		err := p.Ping(pctx)
		cancel()
		if err != nil {
			// The cause stays in the log (once per outage): a driver error
			// may name the host.
			if !s.storeDown.Swap(true) {
				s.log.Warn("catalog: not ready: the store does not answer", "err", err)
			}
			return errors.New("catalog: store unreachable (storage.dsn or the data directory)")
		}
		if s.storeDown.Swap(false) {
			s.log.Info("catalog: the store answers again")
		}
	}
	if s.cfg.ReadyRequires == ReadyNone || s.readyOnce.Load() {
		return nil
	}
	if err := s.serversReady(); err != nil {
		return err
	}
	s.readyOnce.Store(true)
	s.log.Info("catalog: ready", "ready_requires", s.cfg.ReadyRequires)
	return nil
}

// serversReady checks catalog.ready_requires against the enabled servers:
// "all" wants every one past its first connection attempt, "any" one READY
// or every one past its first attempt. No enabled server is ready.
func (s *Server) serversReady() error {
	var waiting []string
	anyReady, enabled := false, 0
	for _, st := range s.publishedStatuses(s.snap.Load()) {
		if st.State == catalogmcp.StateDisabled {
			continue
		}
		enabled++
		if st.State == catalogmcp.StateReady {
			anyReady = true
		}
		settled := false
		if sup, ok := s.mgr.Supervisor(st.Name); ok {
			select {
			case <-sup.Settled():
				settled = true
			default:
			}
		}
		if !settled {
			waiting = append(waiting, st.Name)
		}
	}
	if len(waiting) == 0 || (s.cfg.ReadyRequires == ReadyAny && anyReady) {
		return nil
	}
	return fmt.Errorf("catalog: ready_requires %s: %d of %d enabled MCP servers still CONNECTING: %s",
		s.cfg.ReadyRequires, len(waiting), enabled, strings.Join(waiting, ", "))
}

// logWarnings logs, once per loaded file content, every key of an
// mcpServers entry Toolplane does not act on (catalogconfig.Server.Warnings).
func (s *Server) logWarnings(f *catalogconfig.File) {
	for i := range f.Servers {
		for _, w := range f.Servers[i].Warnings() {
			s.log.Warn("catalog: extensions_config: "+w, "path", s.path, "server", f.Servers[i].Name)
		}
	}
}

// Close stops the reload loop, every MCP server and session (no child
// process survives it), ends watch streams and closes DataDir/catalog.db.
func (s *Server) Close() error {
	var err error
	s.closeOne.Do(func() {
		close(s.stop)
		s.stopDB()
		s.wg.Wait()
		s.mgr.Close()
		s.closePlacement() // after every stateful server stopped
		if s.acp != nil {
			_ = s.acp.Close()
		}
		s.watchMu.Lock()
		for ch := range s.watchers {
			close(ch)
		}
		s.watchers = map[chan *catalogChange]struct{}{}
		s.watchMu.Unlock()
		s.buildMu.Lock() // no rebuild is writing vectors any more
		err = s.closeStore()
		s.buildMu.Unlock()
	})
	return err
}

// closeStore closes DataDir/catalog.db and the embedder's idle connections
// when a remote embedder is configured.
func (s *Server) closeStore() error {
	s.releaseDB()
	if s.oauthClose != nil {
		_ = s.oauthClose()
		s.oauthClose = nil
	}
	if s.remote != nil {
		s.remote.close()
	}
	if s.storeClose == nil {
		return nil
	}
	return s.storeClose()
}

// reloadLoop applies a content change of extensions_config.json within
// cfg.ReloadInterval (docs/architecture.md §10.2: within 2 s), debounced: a
// changed content is applied when it is still the same one tick later. It
// compares content, not mtime.
func (s *Server) reloadLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ReloadInterval)
	defer t.Stop()
	var lastRetry time.Time
	var kick chan struct{} // nil on sqlite: never ready
	if s.db != nil {
		kick = s.db.kick
	}
	for {
		select {
		case <-s.stop:
			return
		case <-kick:
			s.notifiedDB()
		case <-t.C:
			if s.db != nil {
				s.tickDB()
			} else if _, _, err := s.reload(false); err != nil {
				s.log.Warn("catalog: extensions_config reload failed; keeping the last good configuration", "path", s.path, "err", err)
			}
			if s.index.docErr.Load() != nil && time.Since(lastRetry) >= embedRetryInterval {
				lastRetry = time.Now()
				s.retryVectors()
			}
		}
	}
}

// embedRetryInterval is how often tool vectors that a remote embedder failed
// to return are asked for again (besides every catalog change).
var embedRetryInterval = 30 * time.Second

// retryVectors re-runs the search index update on the current snapshot: only
// the tools still without vectors are sent to the embedder.
func (s *Server) retryVectors() {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	s.index.update(s.snap.Load())
}

// reload re-reads the file and applies it when its content differs from
// the applied one and is stable (or at once when force). A content that does
// not declare servers (missing, empty, `{}`, `"mcpServers": null`) keeps the
// last applied configuration (see reload.go). It returns the servers
// restarted and unchanged.
func (s *Server) reload(force bool) (restarted, unchanged []string, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	raw, missing, err := s.readFile()
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(raw)
	if sum == s.applied && !missing && !force {
		s.seen, s.candidate = sum, sum
		return nil, nil, nil
	}
	if !force && sum != s.candidate {
		// Changed since the last tick: the file may still be being written.
		s.candidate = sum
		return nil, nil, nil
	}
	first := sum != s.seen
	s.seen = sum
	if reason := undeclared(raw, missing); reason != "" {
		if first || force {
			s.log.Warn("catalog: extensions_config declares no servers; keeping the last applied configuration (write {\"mcpServers\": {}} to remove every server)",
				"path", s.path, "content", reason)
		}
		if force {
			return nil, nil, fmt.Errorf("%s is %s; keeping the last applied configuration (write {\"mcpServers\": {}} to remove every server)", s.path, reason)
		}
		return nil, nil, nil
	}
	f, err := catalogconfig.Parse(raw)
	if err != nil {
		if !first && !force {
			return nil, nil, nil // reported once per content
		}
		return nil, nil, err
	}
	if sum == s.applied && !force {
		return nil, nil, nil
	}
	s.logWarnings(f)
	r, u := s.applyLocked(f, raw)
	return r, u, nil
}

func (s *Server) applyLocked(f *catalogconfig.File, raw []byte) (restarted, unchanged []string) {
	before := map[string]catalogconfig.Server{}
	for _, st := range s.mgr.Statuses() {
		before[st.Name] = st.Config
	}
	for _, srv := range f.Servers {
		if old, ok := before[srv.Name]; ok && old.Equal(&srv) {
			unchanged = append(unchanged, srv.Name)
		} else {
			restarted = append(restarted, srv.Name)
		}
	}
	s.applied, s.seen, s.candidate = sha256.Sum256(raw), sha256.Sum256(raw), sha256.Sum256(raw)
	s.mgr.Apply(f.Servers)
	s.rebuild()
	s.rebuildWhenSettled()
	s.rememberApplied(raw)
	return restarted, unchanged
}

// writeFileLocked persists f atomically and applies it.
func (s *Server) writeFileLocked(f *catalogconfig.File) error {
	data, err := f.Marshal()
	if err != nil {
		return err
	}
	if err := catalogconfig.WriteAtomic(s.path, data); err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	s.applyLocked(f, data)
	return nil
}

// loadLocked returns the configuration to edit: the file (placeholders and
// unknown keys intact), or the last applied configuration while the file
// declares no servers (an API write then does not turn a transient empty
// file into an empty server list).
func (s *Server) loadLocked() (*catalogconfig.File, error) {
	raw, missing, err := s.readFile()
	if err != nil {
		return nil, err
	}
	if undeclared(raw, missing) != "" {
		if prev, ok := s.lastApplied(); ok {
			raw = prev
		}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return &catalogconfig.File{}, nil
	}
	return catalogconfig.Parse(raw)
}

// commandPolicy is the stdio command policy applied before any server is
// started, whatever wrote its configuration (docs/architecture.md §10.4);
// nil with catalog.file_command_policy off (API writes are still checked).
func commandPolicy(cfg Config) func(*catalogconfig.Server) error {
	if cfg.FileCommandPolicy == "off" {
		return nil
	}
	allow := slices.Clone(cfg.StdioAllowlist)
	return func(s *catalogconfig.Server) error { return catalogconfig.ValidateCommand(s, allow) }
}

// rebuildWhenSettled rebuilds once every server has finished its first
// connection attempt, so provisional names are recorded (identity.assign)
// even when the last status change came before the last settle.
func (s *Server) rebuildWhenSettled() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		if s.mgr.WaitSettled(ctx) == nil && !s.builtSettled.Load() {
			s.rebuild()
		}
	}()
}

// scopeDirRoot is where `${TOOLPLANE_SCOPE_DIR}` directories live:
// <data dir>/mcp-scopes ("" without a data dir: servers referencing it fail).
func scopeDirRoot(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs // a child may run with another cwd
	}
	return filepath.Join(dataDir, "mcp-scopes")
}

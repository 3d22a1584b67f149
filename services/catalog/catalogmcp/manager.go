package catalogmcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	Options
	// PoolCap is the cap of per-scope sessions (default 32), evicted fairly
	// across tenants (pool.go).
	PoolCap int
	// PoolTenantCap bounds one tenant's per-scope sessions (0 = no bound
	// beyond fair eviction; catalog.sessions.max_scoped_per_tenant).
	PoolTenantCap int
	// OnPoolEvict counts the pool's evictions and refusals by reason
	// (EvictCapacity, EvictTenantCap, EvictIdle, RefusedTenantCap); it
	// must not block.
	OnPoolEvict func(reason string)
	// PoolIdleTTL closes a per-scope session idle this long (default 10 min).
	PoolIdleTTL time.Duration
	// Lookup resolves `$VAR` (default os.LookupEnv).
	Lookup func(string) (string, bool)
	// OnChange runs (from one goroutine, coalesced) after any server's
	// state or tools changed.
	OnChange func()
	// OnFeaturesChange runs after a server's resources, templates or
	// prompts changed (features.go); it must not block.
	OnFeaturesChange func()
	// Placement, when set, says where each `stateful: true` server runs
	// (placement.go); nil = every server runs in this process. It is
	// consulted by Apply and Reapply and must not block.
	Placement func(server string) Placement
}

// Manager reconciles the configured servers with running supervisors and
// routes calls to the right session.
type Manager struct {
	opts ManagerOptions
	pool *Pool

	applyMu sync.Mutex // serialises Apply and Reapply
	mu      sync.RWMutex
	order   []*Supervisor
	byName  map[string]*Supervisor
	closed  bool

	changed chan struct{}
	stopN   chan struct{}
	wgN     sync.WaitGroup

	// confirmKey (once) MACs OAuth callback confirmations when
	// OAuthOptions.ConfirmKey is unset (oauthconfirm.go).
	confirmOnce sync.Once
	confirmKey  []byte
}

// ErrUnknownServer is returned for a server name not in the configuration.
var ErrUnknownServer = errors.New("unknown server")

// ErrStatic is returned for a call to a static server's tool.
var ErrStatic = errors.New("static tools are listed and searchable but not callable")

// NewManager returns an empty manager; Apply loads servers.
func NewManager(opts ManagerOptions) *Manager {
	if opts.PoolCap <= 0 {
		opts.PoolCap = 32
	}
	if opts.PoolIdleTTL <= 0 {
		opts.PoolIdleTTL = 10 * time.Minute
	}
	if opts.Lookup == nil {
		opts.Lookup = os.LookupEnv
	}
	opts.featuresChanged = opts.OnFeaturesChange
	if opts.ListingDir == "" {
		// An empty private folder for the tools/list child of
		// workspace-bound servers (workspace.go); removed by Close.
		if d, err := os.MkdirTemp("", "toolplane-listing-"); err == nil {
			opts.ListingDir, opts.ownListingDir = d, true
		}
	}
	m := &Manager{opts: opts, pool: NewPoolWith(opts.PoolCap, opts.PoolIdleTTL, opts.grace(),
		PoolOptions{TenantCap: opts.PoolTenantCap, OnEvict: opts.OnPoolEvict}), byName: map[string]*Supervisor{},
		changed: make(chan struct{}, 1), stopN: make(chan struct{})}
	m.wgN.Add(1)
	go m.notifier()
	return m
}

func (m *Manager) notifier() {
	defer m.wgN.Done()
	for {
		select {
		case <-m.stopN:
			return
		case <-m.changed:
			if m.opts.OnChange != nil {
				m.opts.OnChange()
			}
		}
	}
}

func (m *Manager) emit() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Apply reconciles with servers (config-file order): a server whose
// configuration is unchanged keeps its supervisor, process and sessions;
// changed and new ones start (discovery runs in parallel, each bounded by
// its own init timeout); removed ones stop. It returns without waiting for
// discovery (see WaitSettled).
func (m *Manager) Apply(servers []catalogconfig.Server) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.applyLocked(servers)
}

func (m *Manager) applyLocked(servers []catalogconfig.Server) {
	// Placement may ask the database (a lock): before m.mu, which calls take.
	places := make([]Placement, len(servers))
	for i := range servers {
		places[i] = m.placementOf(&servers[i])
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	next := make([]*Supervisor, 0, len(servers))
	byName := make(map[string]*Supervisor, len(servers))
	var stale []*Supervisor
	for i, raw := range servers {
		place := places[i]
		if old, ok := m.byName[raw.Name]; ok && old.raw.Equal(&raw) && old.place.same(place) {
			next = append(next, old)
			byName[raw.Name] = old
			continue
		}
		sup := newSupervisor(raw.Clone(), m.opts.Lookup, m.opts.Options, m.emit, place)
		next = append(next, sup)
		byName[raw.Name] = sup
	}
	for name, old := range m.byName {
		if byName[name] != old {
			stale = append(stale, old)
		}
	}
	m.order, m.byName = next, byName
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, old := range stale {
		m.pool.RemoveServer(old.raw.Name)
		if old.raw.Stateful && !old.place.Remote && m.opts.Placement != nil {
			// It may start on another replica once its lock is released
			// (placement.go): wait until it is gone.
			wg.Add(1)
			go func() { defer wg.Done(); old.stop() }()
			continue
		}
		go old.stop()
	}
	m.emit()
	wg.Wait()
}

// WaitSettled waits until every server's first connection attempt ended or
// ctx is done.
func (m *Manager) WaitSettled(ctx context.Context) error {
	m.mu.RLock()
	sups := append([]*Supervisor(nil), m.order...)
	m.mu.RUnlock()
	for _, s := range sups {
		select {
		case <-s.Settled():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Statuses returns every server's status in config order.
func (m *Manager) Statuses() []Status {
	m.mu.RLock()
	sups := append([]*Supervisor(nil), m.order...)
	m.mu.RUnlock()
	out := make([]Status, len(sups))
	for i, s := range sups {
		out[i] = s.Status()
	}
	return out
}

// Supervisor returns the named server's supervisor.
func (m *Manager) Supervisor(name string) (*Supervisor, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.byName[name]
	return s, ok
}

// Pool exposes the per-scope pool (for inspection).
func (m *Manager) Pool() *Pool { return m.pool }

// Call calls an original tool on server. key selects the per-scope session
// for per_tenant / per_user / per_thread servers (ignored for shared ones). ctx carries
// the call's deadline. Errors: ErrUnknownServer, ErrStatic, *NotReadyError,
// ctx errors, *SessionError, *RPCError, or transport errors.
//
// Error texts have the server's secrets masked (they can carry a child's
// stderr); the error types are kept for errors.As / errors.Is. The result
// (every content block, structuredContent, _meta) and the notifications
// have them masked too (maskresult.go): a tool that echoes its environment
// or a header must not hand a `${VAR}` value to the runtime or a model.
func (m *Manager) Call(ctx context.Context, server, tool string, args []byte, key ScopeKey, notify func(Notification)) (res *Result, err error) {
	sup, ok := m.Supervisor(server)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	mask := sup.mask
	notify = mask.maskNotify(notify)
	defer func() { res, err = mask.maskResult(res), sup.maskErr(err) }()
	if sup.st.Type == catalogconfig.TypeStatic {
		return nil, ErrStatic
	}
	if sup.place.Remote {
		return nil, &NotOwnerError{Server: server, Owner: sup.place.Owner}
	}
	cfg := sup.Expanded()
	if cfg.Scope() == catalogconfig.ScopeShared {
		sess, err := sup.Session()
		if err != nil {
			return nil, err
		}
		res, err := sess.CallTool(ctx, tool, args, notify)
		if na := asNeedsAuth(server, err); na != nil {
			sup.RequestReconnect(sess) // the reconnect settles in NEEDS_AUTH
			return nil, na
		}
		var se *SessionError
		if errors.As(err, &se) && ctx.Err() == nil && sup.st.Type != catalogconfig.TypeStdio {
			// HTTP session unknown/expired or the SSE stream dropped:
			// re-initialise and retry once.
			sup.RequestReconnect(sess)
			if sess, err = sup.waitReady(ctx, sess); err != nil {
				return nil, err
			}
			return sess.CallTool(ctx, tool, args, notify)
		}
		if errors.As(err, &se) && ctx.Err() == nil {
			st := sup.Status()
			return nil, &NotReadyError{Server: server, State: StateFailed, LastError: sup.mask.mask(fmt.Sprint(se.Err, "; ", st.LastError))}
		}
		return res, err
	}
	if _, err := sup.Session(); err != nil && (sup.oauth == nil || !sup.oauth.perPrincipal(cfg)) {
		return nil, err
	}
	key.Server = server
	switch cfg.Scope() {
	case catalogconfig.ScopePerUser:
		key.Thread = ""
	case catalogconfig.ScopePerTenant:
		key.Subject, key.Thread = "", ""
	}
	wd, err := m.threadWorkDir(&cfg, key)
	if err != nil {
		return nil, err
	}
	dial := func(dctx context.Context) (*Session, error) {
		ictx, cancel := sup.initCtx(dctx)
		defer cancel()
		opts := m.opts.Options
		if sup.oauth != nil {
			var err error
			if opts, _, err = sup.oauth.connectOptions(opts, cfg, key.Tenant, key.Subject); err != nil {
				return nil, err
			}
		}
		scoped, err := sup.scopedConfig(key)
		if err != nil {
			return nil, err
		}
		if wd != nil {
			scoped.Cwd = wd.Path // working_dir: thread (workspace.go)
		}
		return Connect(ictx, scoped, opts, nil)
	}
	for attempt := 0; ; attempt++ {
		created := false
		sess, release, err := m.pool.Acquire(ctx, key, func(dctx context.Context) (*Session, error) {
			created = true
			return dial(dctx)
		})
		if na := asNeedsAuth(server, err); na != nil {
			return nil, na
		}
		if err != nil {
			return nil, err
		}
		res, err := sess.CallTool(ctx, tool, args, notify)
		release()
		if res != nil {
			res.WorkDir, res.SessionCreated = wd, created
		}
		if na := asNeedsAuth(server, err); na != nil {
			m.pool.Drop(key, sess)
			return nil, na
		}
		var se *SessionError
		if errors.As(err, &se) {
			m.pool.Drop(key, sess)
			if attempt == 0 && ctx.Err() == nil {
				continue
			}
		}
		return res, err
	}
}

// Close stops every server and session; it returns once every child is gone
// (bounded by the close grace per step).
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	sups := m.order
	m.order, m.byName = nil, map[string]*Supervisor{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sups {
		wg.Add(1)
		go func() { defer wg.Done(); s.stop() }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); m.pool.Close() }()
	wg.Wait()
	close(m.stopN)
	m.wgN.Wait()
	if m.opts.ownListingDir {
		os.RemoveAll(m.opts.ListingDir)
	}
	return nil
}

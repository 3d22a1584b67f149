package catalogmcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolplane/toolplane/internal/observability"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// State is a server's connection state.
type State int

// Server states (docs/architecture.md §10.1).
const (
	StateUnspecified State = iota
	// StateDisabled: `enabled: false`.
	StateDisabled
	// StateConnecting: starting, initialising or listing tools.
	StateConnecting
	// StateReady: connected and its tools are listed.
	StateReady
	// StateFailed: the last attempt failed or the child exited; a restart
	// is scheduled (except for configuration errors).
	StateFailed
	// StateNeedsAuth: the server needs an OAuth authorisation (no token,
	// or its refresh was rejected); no restart until a login completes
	// (docs/architecture.md §10.6). Settled, like READY and FAILED.
	StateNeedsAuth
)

func (s State) String() string {
	return [...]string{"UNSPECIFIED", "DISABLED", "CONNECTING", "READY", "FAILED", "NEEDS_AUTH"}[s]
}

// Backoff bounds for restarts (docs/architecture.md §10.1: exponential, capped at 30 s).
var (
	BackoffInitial = 500 * time.Millisecond
	BackoffMax     = 30 * time.Second
	// stableAfter resets the backoff once a session stayed up this long.
	stableAfter = 30 * time.Second
)

// ToolDef is a tool of a server with the origin server for static rows.
type ToolDef struct {
	Tool
	// Origin is the server the tool belongs to: the configured server for
	// MCP servers, the row's own `server` for static files.
	Origin string
}

// Status is a snapshot of one server.
type Status struct {
	// Name is the server name; Config its configuration as written (placeholders kept).
	Name   string
	Config catalogconfig.Server
	// Type is the effective type (stdio, sse, http, static).
	Type string
	// State, LastError (the most recent failure, kept after recovery until
	// the next success clears it), Restarts (restarts after failures).
	State     State
	LastError string
	Restarts  int
	// ProtocolVersion and ServerInfo of the current or last session.
	ProtocolVersion string
	ServerInfo      mcp.Implementation
	// Tools are the last listed tools (kept while the server is down).
	Tools []ToolDef
	// Listed reports that Tools were listed at least once.
	Listed bool
	// Pid of the discovery child (stdio), 0 otherwise.
	Pid int
	// Generation increases on every change of this status.
	Generation uint64
	// ChangedAt is when State last changed.
	ChangedAt time.Time
	// Instance identifies the supervisor (unique per process); ToolsVersion
	// increases whenever Tools is replaced. Together they key caches.
	Instance, ToolsVersion uint64
}

var instances atomic.Uint64

// Supervisor owns one server's discovery (and shared-scope) session.
type Supervisor struct {
	raw   catalogconfig.Server // as written
	cfg   catalogconfig.Server // expanded
	opts  Options
	emit  func()
	log   *slog.Logger
	mask  *masker     // secrets of cfg, for LastError and log lines
	oauth *oauthState // nil: no OAuth (oauth.go)
	place Placement   // a stateful server's replica (placement.go)
	feat  featState   // resources and prompts (features.go)

	mu       sync.Mutex
	st       Status
	sess     *Session
	settled  chan struct{}
	settleOn sync.Once
	ready    chan struct{} // closed and replaced on each READY

	relist    chan struct{}
	relists   atomic.Int64
	reconnect chan *Session
	cancel    context.CancelFunc
	done      chan struct{}
}

// newSupervisor prepares the supervisor; start launches it.
func newSupervisor(raw catalogconfig.Server, lookup func(string) (string, bool), opts Options, emit func(), place Placement) *Supervisor {
	s := &Supervisor{raw: raw, opts: opts, emit: emit, place: place, settled: make(chan struct{}), ready: make(chan struct{}),
		relist: make(chan struct{}, 1), reconnect: make(chan *Session, 1), done: make(chan struct{})}
	s.st = Status{Name: raw.Name, Config: raw, Type: raw.EffectiveType(), State: StateConnecting, ChangedAt: time.Now(),
		Instance: instances.Add(1)}
	s.log = s.logger()
	return s.init(lookup)
}

func (s *Supervisor) init(lookup func(string) (string, bool)) *Supervisor {
	fail := func(err error) *Supervisor {
		s.st.State, s.st.LastError = StateFailed, s.mask.mask(err.Error())
		s.log.Warn("catalog: MCP server FAILED (configuration; not retried until the entry changes)", "err", s.st.LastError)
		s.settle()
		close(s.done)
		return s
	}
	if !s.raw.IsEnabled() {
		s.st.State = StateDisabled
		s.log.Info("catalog: MCP server DISABLED")
		s.settle()
		close(s.done)
		return s
	}
	if err := s.raw.Validate(); err != nil {
		return fail(err)
	}
	if s.opts.CommandPolicy != nil {
		if err := s.opts.CommandPolicy(&s.raw); err != nil {
			return fail(err)
		}
	}
	vars := map[string]string{}
	record := func(k string) (string, bool) {
		v, ok := lookup(k)
		if ok {
			vars[k] = v
		}
		return v, ok
	}
	cfg, err := catalogconfig.Expand(s.raw, catalogconfig.LookupWithScopeDir(record))
	s.setMasker(cfg, vars)
	if err != nil {
		return fail(err)
	}
	s.cfg = cfg
	if s.place.Remote {
		// Another replica runs it (placement.go): list its tools, start
		// nothing. CONNECTING until the owner has published them.
		s.st.Tools, s.st.Listed = s.place.Tools, s.place.Listed
		if s.place.Listed {
			s.st.State = StateReady
		}
		s.log.Info("catalog: stateful MCP server runs on another replica", "owner", s.place.Owner, "tools", len(s.st.Tools))
		s.settle()
		close(s.done)
		return s
	}
	s.oauth, err = newOAuthState(s.raw, cfg, record, s.opts.OAuth)
	if s.oauth != nil {
		s.setMasker(cfg, vars) // with the OAuth values read
	}
	if err != nil {
		return fail(err)
	}
	if s.oauth != nil {
		// Declared tools (catalogconfig/declared.go) stand for the server's
		// until a connection lists them (oauth.go, NEEDS_AUTH below).
		rows, err := cfg.DeclaredTools()
		if err != nil {
			return fail(err)
		}
		for _, r := range rows {
			s.oauth.declared = append(s.oauth.declared, ToolDef{Origin: r.Server, Tool: Tool{Name: r.Name, Title: r.Title,
				Description: r.Description, InputSchema: r.InputSchema, OutputSchema: r.OutputSchema, Annotations: r.Annotations}})
		}
	}
	if s.st.Type == catalogconfig.TypeStatic {
		rows, err := catalogconfig.LoadStatic(cfg.Path, cfg.Name)
		if err != nil {
			return fail(fmt.Errorf("mcpServers.%s.path: %w", cfg.Name, err))
		}
		for _, r := range rows {
			s.st.Tools = append(s.st.Tools, ToolDef{Origin: r.Server, Tool: Tool{Name: r.Name, Title: r.Title,
				Description: r.Description, InputSchema: r.InputSchema, OutputSchema: r.OutputSchema, Annotations: r.Annotations}})
		}
		s.st.State, s.st.Listed = StateReady, true
		s.log.Info("catalog: MCP server READY", "tools", len(s.st.Tools), "path", cfg.Path)
		s.settle()
		close(s.done)
		return s
	}
	s.log.Info("catalog: MCP server CONNECTING", "init_timeout", cfg.InitTimeout().String())
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(ctx)
	return s
}

// setMasker builds the server's masker from its expanded configuration
// and the variables read, and registers the same values with the process's
// observability.Secrets (removed when the supervisor stops).
func (s *Supervisor) setMasker(cfg catalogconfig.Server, vars map[string]string) {
	var o *catalogconfig.OAuth
	if s.oauth != nil {
		o = s.oauth.cfg
	}
	s.mask = newMasker(cfg, vars, o)
	observability.Secrets.Set(s.maskOwner(), s.mask.fromEnv)
	base := s.opts.Logger
	if base == nil {
		base = slog.Default()
	}
	if mh, ok := base.Handler().(maskHandler); ok {
		base = slog.New(mh.inner) // re-init: not masked twice
	}
	s.opts.Logger = slog.New(maskHandler{inner: base.Handler(), m: s.mask})
	s.log = s.logger()
}

func (s *Supervisor) maskOwner() string {
	return fmt.Sprintf("catalog/mcp/%s#%d", s.raw.Name, s.st.Instance)
}

func (s *Supervisor) settle() { s.settleOn.Do(func() { close(s.settled) }) }

// Settled is closed once the first connection attempt has ended (READY or FAILED).
func (s *Supervisor) Settled() <-chan struct{} { return s.settled }

func (s *Supervisor) update(f func(st *Status)) {
	s.mu.Lock()
	prev, tools := s.st.State, s.st.Tools
	f(&s.st)
	if len(tools) != len(s.st.Tools) || (len(tools) > 0 && &tools[0] != &s.st.Tools[0]) {
		s.st.ToolsVersion++
	}
	if s.st.State != prev {
		s.st.ChangedAt = time.Now()
	}
	s.st.Generation++
	s.mu.Unlock()
	if s.emit != nil {
		s.emit()
	}
}

// Status returns a snapshot.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Tools = append([]ToolDef(nil), s.st.Tools...)
	return st
}

// Expanded returns the expanded configuration (zero if expansion failed).
func (s *Supervisor) Expanded() catalogconfig.Server { return s.cfg }

func (s *Supervisor) run(ctx context.Context) {
	defer close(s.done)
	backoff := BackoffInitial
	sleep := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(backoff*2, BackoffMax)
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for first := true; ; first = false {
		if !first {
			var n int
			s.update(func(st *Status) { st.State = StateConnecting; st.Restarts++; n = st.Restarts })
			s.log.Warn("catalog: MCP server restarting (CONNECTING)", "restart", n)
		}
		sess, tools, err := s.connect(ctx)
		if ctx.Err() != nil {
			if sess != nil {
				sess.Close(s.opts.grace())
			}
			return
		}
		if na := asNeedsAuth(s.raw.Name, err); na != nil && s.oauth != nil {
			// Retrying cannot help: wait for a login (oauth.go).
			s.update(func(st *Status) {
				st.State, st.LastError, st.Pid = StateNeedsAuth, na.Reason, 0
				if !st.Listed && len(s.oauth.declared) > 0 {
					st.Tools, st.Listed = s.oauth.declared, true
				}
			})
			s.log.Warn("catalog: MCP server NEEDS_AUTH", "reason", na.Reason)
			s.settle()
			if !s.oauth.waitAuthorized(ctx) {
				return
			}
			backoff = BackoffInitial
			continue
		}
		if err != nil {
			msg := s.mask.mask(err.Error())
			s.update(func(st *Status) { st.State, st.LastError, st.Pid = StateFailed, msg, 0 })
			what := "catalog: MCP server FAILED"
			if errors.Is(err, errInitTimeout) {
				what = "catalog: MCP server FAILED: session_init_timeout exceeded"
			}
			s.log.Warn(what, "err", msg, "retry_in", backoff.String())
			s.settle()
			if !sleep() {
				return
			}
			continue
		}
		up := time.Now()
		s.mu.Lock()
		s.sess = sess
		ready := s.ready
		s.ready = make(chan struct{})
		s.mu.Unlock()
		s.update(func(st *Status) {
			st.State, st.LastError, st.Tools, st.Listed = StateReady, "", tools, true
			st.ProtocolVersion, st.ServerInfo, st.Pid = sess.ProtocolVersion, sess.ServerInfo, sess.Pid()
		})
		close(ready)
		attrs := []any{"tools", len(tools), "protocol", sess.ProtocolVersion, "server_info", sess.ServerInfo.Name + " " + sess.ServerInfo.Version}
		if pid := sess.Pid(); pid != 0 {
			attrs = append(attrs, "pid", pid)
		}
		s.log.Info("catalog: MCP server READY", attrs...)
		s.settle()
		reason := s.serve(ctx, sess)
		s.mu.Lock()
		s.sess = nil
		s.mu.Unlock()
		sess.Close(s.opts.grace())
		if ctx.Err() != nil {
			return
		}
		msg := s.mask.mask(reason.Error())
		s.update(func(st *Status) { st.State, st.LastError, st.Pid = StateFailed, msg, 0 })
		if time.Since(up) >= stableAfter {
			backoff = BackoffInitial
		}
		if errors.Is(reason, errReconnect) {
			s.log.Info("catalog: MCP server session expired; reconnecting")
			continue
		}
		s.log.Warn("catalog: MCP server crashed (FAILED)", "err", msg, "up", time.Since(up).Round(time.Millisecond).String(), "retry_in", backoff.String())
		if !sleep() {
			return
		}
	}
}

var errReconnect = errors.New("session expired; reconnecting")

// errInitTimeout marks a connection attempt that exceeded session_init_timeout.
var errInitTimeout = errors.New("session_init_timeout")

// RelistInterval bounds how often one server's tools are re-listed after
// notifications/tools/list_changed: requests arriving within the interval
// after a re-list are coalesced into one trailing re-list at its end, so a
// server flooding list_changed costs at most one tools/list per interval
// and its last change is always read.
var RelistInterval = time.Second

func (s *Supervisor) serve(ctx context.Context, sess *Session) error {
	var last time.Time
	var trailing <-chan time.Time
	for {
		relist := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sess.Dead():
			return sess.Err()
		case old := <-s.reconnect:
			if old == sess {
				return errReconnect
			}
		case <-s.relist:
			if trailing != nil {
				continue // already scheduled
			}
			if wait := RelistInterval - time.Since(last); !last.IsZero() && wait > 0 {
				trailing = time.After(wait)
				continue
			}
			relist = true
		case <-trailing:
			trailing, relist = nil, true
		}
		if relist {
			last = time.Now()
			s.relists.Add(1)
			lctx, cancel := s.initCtx(ctx)
			tools, err := sess.ListTools(lctx)
			cancel()
			if err == nil {
				defs := make([]ToolDef, len(tools))
				for i, t := range tools {
					defs[i] = ToolDef{Tool: t, Origin: s.cfg.Name}
				}
				// Servers also send list_changed for an unchanged list: then
				// nothing is updated (no new tools version, no rebuild, no
				// event), so the catalog hash does not churn.
				s.mu.Lock()
				same := reflect.DeepEqual(s.st.Tools, defs)
				s.mu.Unlock()
				if !same {
					s.update(func(st *Status) { st.Tools = defs })
					s.log.Info("catalog: MCP server tool list changed", "tools", len(defs))
				}
			} else if ctx.Err() == nil {
				s.log.Warn("catalog: MCP server tools/list after list_changed failed; keeping the last list", "err", s.mask.mask(err.Error()))
			}
		}
	}
}

// scopedConfig returns the expanded configuration with `${TOOLPLANE_SCOPE_DIR}`
// bound to the directory of key's scope (the zero key: the server's shared
// directory, used by shared servers and by the discovery session of scoped
// ones), creating it.
func (s *Supervisor) scopedConfig(key ScopeKey) (catalogconfig.Server, error) {
	if !catalogconfig.UsesScopeDir(s.cfg) {
		return s.cfg, nil
	}
	scope := s.cfg.Scope()
	if key == (ScopeKey{}) {
		scope = catalogconfig.ScopeShared
	}
	dir, err := catalogconfig.ScopeDir(s.opts.ScopeDirRoot, s.raw.Name, scope, key.Tenant, key.Subject, key.Thread)
	if err != nil {
		return catalogconfig.Server{}, err
	}
	return catalogconfig.BindScopeDir(s.cfg, dir), nil
}

// Relists returns how many tools/list re-reads list_changed caused.
func (s *Supervisor) Relists() int64 { return s.relists.Load() }

func (s *Supervisor) initCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if d := s.cfg.InitTimeout(); d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

func (s *Supervisor) connect(ctx context.Context) (*Session, []ToolDef, error) {
	ictx, cancel := s.initCtx(ctx)
	defer cancel()
	opts := s.opts
	opts.featureRelist = s.onFeaturesListChanged
	if s.oauth != nil {
		var err error
		if opts, _, err = s.oauth.connectOptions(opts, s.cfg, "", ""); err != nil {
			return nil, nil, err
		}
	}
	cfg, err := s.scopedConfig(ScopeKey{})
	if err != nil {
		return nil, nil, err
	}
	sess, err := Connect(ictx, cfg, opts, s.RequestRelist)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w (%s) exceeded: %w", errInitTimeout, s.cfg.InitTimeout(), err)
		}
		return nil, nil, err
	}
	tools, err := sess.ListTools(ictx)
	if err != nil {
		tail := sess.StderrTail(stderrTailBytes)
		sess.Close(s.opts.grace())
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w (%s) exceeded: %w", errInitTimeout, s.cfg.InitTimeout(), err)
		}
		if tail != "" {
			return nil, nil, fmt.Errorf("tools/list: %w; stderr: %s", err, tail)
		}
		return nil, nil, fmt.Errorf("tools/list: %w", err)
	}
	defs := make([]ToolDef, len(tools))
	for i, t := range tools {
		defs[i] = ToolDef{Tool: t, Origin: s.cfg.Name}
	}
	s.refreshFeatures(ictx, sess)
	return sess, defs, nil
}

// RequestRelist asks for a tools/list re-read (notifications/tools/list_changed).
func (s *Supervisor) RequestRelist() {
	select {
	case s.relist <- struct{}{}:
	default:
	}
}

// RequestReconnect asks for a new session to replace old (e.g. its HTTP
// session expired); it is ignored once old is no longer the current session.
func (s *Supervisor) RequestReconnect(old *Session) {
	s.mu.Lock()
	cur := s.sess
	s.mu.Unlock()
	if cur != old {
		return
	}
	select {
	case s.reconnect <- old:
	default:
	}
}

// NotReadyError is returned for a call to a server that is not READY.
type NotReadyError struct {
	Server    string
	State     State
	LastError string
}

func (e *NotReadyError) Error() string {
	if e.LastError != "" {
		return fmt.Sprintf("server %s is %s: %s", e.Server, e.State, e.LastError)
	}
	return fmt.Sprintf("server %s is %s", e.Server, e.State)
}

// Session returns the shared session, or a *NotReadyError.
func (s *Supervisor) Session() (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil && s.st.State == StateReady {
		return s.sess, nil
	}
	if s.st.State == StateNeedsAuth {
		return nil, &NeedsAuthError{Server: s.st.Name, Reason: s.st.LastError}
	}
	return nil, &NotReadyError{Server: s.st.Name, State: s.st.State, LastError: s.st.LastError}
}

// waitReady waits until the server is READY with a session other than old.
func (s *Supervisor) waitReady(ctx context.Context, old *Session) (*Session, error) {
	for {
		s.mu.Lock()
		sess, ready := s.sess, s.ready
		ok := sess != nil && sess != old && s.st.State == StateReady
		s.mu.Unlock()
		if ok {
			return sess, nil
		}
		select {
		case <-ready:
		case <-s.done:
			return s.Session()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// stop ends the supervisor and its session; it returns when the child is gone.
func (s *Supervisor) stop() {
	if s.cancel != nil {
		s.cancel()
	}
	<-s.done
	observability.Secrets.Set(s.maskOwner(), nil)
	if s.cancel != nil {
		s.log.Info("catalog: MCP server stopped")
	}
}

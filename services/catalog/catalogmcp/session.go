// Package catalogmcp is the catalog's MCP client layer, built on mcp-go
// v1.2.1: one Session per connection (stdio child, SSE or streamable HTTP),
// a Supervisor per configured server (discovery, restart with backoff,
// list_changed), a Pool of per-user / per-thread sessions, and the Manager
// that reconciles them with the configuration.
//
// Tool definitions and call results are captured from the wire as raw JSON
// (a wrapper around the mcp-go transport records each response's `result`),
// never through mcp-go's typed schema: every keyword and value survives
// (docs/architecture.md §2).
package catalogmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// ClientName is the clientInfo.name the catalog announces.
const ClientName = "toolplane-catalog"

// Tool is one tool exactly as its server listed it.
type Tool struct {
	// Name is the original tool name.
	Name string
	// Title and Description as sent ("" when absent).
	Title, Description string
	// InputSchema, OutputSchema, Annotations and Meta are the raw JSON values
	// (nil when absent).
	InputSchema, OutputSchema, Annotations, Meta json.RawMessage
	// Raw is the whole tool object from tools/list.
	Raw json.RawMessage
}

// Result is a tools/call result, raw.
type Result struct {
	// Content holds the content blocks, each the raw JSON object sent.
	Content []json.RawMessage
	// IsError is the result's isError.
	IsError bool
	// StructuredContent is the raw structuredContent (nil when absent).
	StructuredContent json.RawMessage
	// Meta is the raw _meta (nil when absent).
	Meta json.RawMessage
	// Size is the byte length of the raw result.
	Size int
	// WorkDir is set for a workspace-bound server (working_dir: thread).
	WorkDir *WorkDir
	// SessionCreated: the call started the per-scope session it ran in
	// (the scope's first call in this process, or the previous session had
	// ended; docs/decisions/0086-session-placement.md).
	SessionCreated bool
}

// WorkDir is where a workspace-bound child ran, as the catalog sees it.
type WorkDir struct {
	// Path is the child's working directory (the thread's workspace).
	Path string
	// UserDataRoot is the thread's user-data folder.
	UserDataRoot string
}

// Notification is a progress or logging notification received during a call.
type Notification struct {
	// Method is notifications/progress or notifications/message.
	Method string
	// Params is the raw params object.
	Params json.RawMessage
}

// Options tune how sessions are made.
type Options struct {
	// Version is announced in clientInfo.version.
	Version string
	// CloseGrace bounds each step of closing a stdio child (stdin close,
	// SIGTERM, SIGKILL); default 2 s.
	CloseGrace time.Duration
	// LegacyOnly skips the server/discover probe (protocol 2026-07-28) and
	// uses the initialize handshake directly.
	LegacyOnly bool
	// BaseEnv is the environment every stdio child starts from (before the
	// server's env); nil = the safe default (HOME, LOGNAME, PATH, SHELL,
	// TERM, USER, LANG, LC_ALL, TMPDIR, TZ from the catalog's environment),
	// so the catalog's own secrets never leak into children.
	BaseEnv []string
	// HTTPClient is used for sse/http servers (nil = a default client).
	HTTPClient *http.Client
	// Logger receives the transports' own log lines (nil = slog.Default()).
	Logger *slog.Logger
	// CommandPolicy, when set, checks a stdio server's configuration before
	// it is started (catalogconfig.ValidateCommand); a refusal is a
	// configuration failure: FAILED, not retried until the entry changes.
	CommandPolicy func(*catalogconfig.Server) error
	// OAuth configures OAuth for sse/http servers (oauth.go; nil = tokens
	// in memory, no logins).
	OAuth *OAuthOptions
	// ScopeDirRoot holds the scope directories `${TOOLPLANE_SCOPE_DIR}`
	// expands to (catalogconfig.ScopeDir); "" = a server referencing it fails.
	ScopeDirRoot string

	// featuresChanged runs when a server's resources or prompts changed;
	// featureRelist on a session's resources or prompts list_changed
	// (features.go).
	featuresChanged, featureRelist func()
	// ThreadsDir is catalog.workspaces.dir, the folder holding one folder
	// per thread, for servers with working_dir: thread (workspace.go;
	// empty = such calls fail with ErrNoThreadWorkspace).
	ThreadsDir string
	// ListingDir is the working directory of a workspace-bound server's
	// own child (the one that lists its tools and is never called): an
	// empty folder, so the child never starts in the catalog's directory
	// (NewManager creates one when empty).
	ListingDir    string
	ownListingDir bool
}

func (o Options) grace() time.Duration {
	if o.CloseGrace <= 0 {
		return 2 * time.Second
	}
	return o.CloseGrace
}

// DefaultBaseEnv returns the safe default environment for stdio children.
func DefaultBaseEnv() []string {
	var env []string
	for _, k := range []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ", "SYSTEMROOT"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// stderrTailBytes is how much of a child's stderr an error carries.
const stderrTailBytes = 2048

// StderrTail returns up to n trailing bytes of a stdio child's stderr,
// trimmed ("" for other transports).
func (s *Session) StderrTail(n int) string {
	if s.proc == nil {
		return ""
	}
	return strings.TrimSpace(s.proc.StderrTail(n))
}

// Session is one initialised MCP connection.
type Session struct {
	server string
	client *client.Client
	proc   *Process // stdio only
	kind   string

	// ProtocolVersion is the negotiated protocol version.
	ProtocolVersion string
	// ServerInfo is the server's implementation info.
	ServerInfo mcp.Implementation
	// ListChangedCapable reports the tools.listChanged capability.
	ListChangedCapable bool

	dead chan struct{}
	// deadCtx is done when dead is closed: a call in flight is cancelled
	// by it (context.AfterFunc) instead of being waited for on a goroutine
	// of its own.
	deadCtx    context.Context
	deadCancel context.CancelFunc
	deadOnce   sync.Once
	deadErr    atomic.Value // error

	mu        sync.Mutex
	progress  map[string]func(Notification)
	listeners map[int]func(Notification)
	nextL     int
	tokenSeq  atomic.Int64

	onListChanged func()
	caps          mcp.ServerCapabilities
	feat          sessFeat // features.go
	closeOnce     sync.Once
	closeErr      error
}

// rawSink collects the raw results of the requests sent with its context.
type rawSink struct {
	mu      sync.Mutex
	results []json.RawMessage
}

type sinkKey struct{}

func withSink(ctx context.Context) (context.Context, *rawSink) {
	s := &rawSink{}
	return context.WithValue(ctx, sinkKey{}, s), s
}

// capture records resp.Result in the context's sink and, for an HTTP
// transport whose request was abandoned by the caller, tells the server with
// notifications/cancelled (mcp-go sends it itself only over stdio).
func capture(ctx context.Context, t transport.Interface, http bool, req transport.JSONRPCRequest, resp *transport.JSONRPCResponse, err error) {
	if err == nil && resp != nil && resp.Error == nil {
		if s, ok := ctx.Value(sinkKey{}).(*rawSink); ok {
			s.mu.Lock()
			s.results = append(s.results, append(json.RawMessage(nil), resp.Result...))
			s.mu.Unlock()
		}
	}
	if err != nil && http && ctx.Err() != nil && req.Method == string(mcp.MethodToolsCall) {
		n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": req.ID, "reason": ctx.Err().Error()}},
		}}
		go func() {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = t.SendNotification(c, n)
		}()
	}
}

type stdioRaw struct{ *transport.Stdio }

func (t stdioRaw) SendRequest(ctx context.Context, r transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.Stdio.SendRequest(ctx, r)
	capture(ctx, t.Stdio, false, r, resp, err)
	return resp, err
}

type httpRaw struct{ *transport.StreamableHTTP }

func (t httpRaw) SendRequest(ctx context.Context, r transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.StreamableHTTP.SendRequest(ctx, r)
	capture(ctx, t.StreamableHTTP, true, r, resp, err)
	return resp, err
}

type sseRaw struct{ *transport.SSE }

func (t sseRaw) SendRequest(ctx context.Context, r transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.SSE.SendRequest(ctx, r)
	capture(ctx, t.SSE, true, r, resp, err)
	return resp, err
}

// Connect starts the transport for an expanded server config, performs the
// MCP handshake (ctx bounds it) and returns the live session. stdio and SSE
// negotiate the newest version both sides offer (mcp-go probes
// server/discover, then falls back to initialize). Streamable HTTP keeps a
// standalone GET stream open for notifications/tools/list_changed, which
// protocol 2026-07-28 removed, so mcp-go negotiates 2025-11-25 there. onListChanged
// (may be nil) runs on notifications/tools/list_changed.
func Connect(ctx context.Context, cfg catalogconfig.Server, opts Options, onListChanged func()) (*Session, error) {
	s := &Session{server: cfg.Name, kind: cfg.EffectiveType(), dead: make(chan struct{}),
		progress: map[string]func(Notification){}, listeners: map[int]func(Notification){}, onListChanged: onListChanged}
	s.deadCtx, s.deadCancel = context.WithCancel(context.Background())
	s.feat.onChange = opts.featureRelist
	var tr transport.Interface
	switch s.kind {
	case catalogconfig.TypeStdio:
		env := opts.BaseEnv
		if env == nil {
			env = DefaultBaseEnv()
		}
		env = append([]string(nil), env...)
		for k, v := range cfg.Env {
			env = append(env, k+"="+v)
		}
		dir := cfg.Cwd
		if cfg.WorkingDir == catalogconfig.WorkingDirThread && dir == "" {
			if opts.ListingDir == "" {
				return nil, fmt.Errorf("%w: no folder for the listing child", ErrNoThreadWorkspace)
			}
			dir = opts.ListingDir
		}
		p, err := StartProcess(ProcessSpec{Command: cfg.Command, Args: cfg.Args, Env: env, Dir: dir})
		if err != nil {
			return nil, err
		}
		s.proc = p
		tr = stdioRaw{transport.NewIO(p.stdout, p.stdin, nil)}
	case catalogconfig.TypeHTTP:
		o := []transport.StreamableHTTPCOption{transport.WithContinuousListening(), transport.WithHTTPLogger(opts.Logger)}
		if len(cfg.Headers) > 0 {
			o = append(o, transport.WithHTTPHeaders(cfg.Headers))
		}
		if opts.HTTPClient != nil {
			o = append(o, transport.WithHTTPBasicClient(opts.HTTPClient))
		}
		t, err := transport.NewStreamableHTTP(cfg.URL, o...)
		if err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
		tr = httpRaw{t}
	case catalogconfig.TypeSSE:
		o := []transport.ClientOption{transport.WithResponseTimeout(24 * time.Hour), transport.WithSSELogger(opts.Logger)}
		if len(cfg.Headers) > 0 {
			o = append(o, transport.WithHeaders(cfg.Headers))
		}
		if opts.HTTPClient != nil {
			o = append(o, transport.WithHTTPClient(opts.HTTPClient))
		}
		t, err := transport.NewSSE(cfg.URL, o...)
		if err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
		tr = sseRaw{t}
	default:
		return nil, fmt.Errorf("type %q cannot be connected", s.kind)
	}
	var copts []client.ClientOption
	if opts.LegacyOnly {
		copts = append(copts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	}
	s.client = client.NewClient(tr, copts...)
	s.client.OnNotification(s.onNotification)
	s.client.OnConnectionLost(func(err error) { s.markDead(fmt.Errorf("connection lost: %w", err)) })
	if s.proc != nil {
		go func() {
			<-s.proc.Done()
			s.markDead(s.proc.ExitError())
		}()
	}
	fail := func(err error) (*Session, error) {
		if s.proc != nil {
			select {
			case <-s.proc.Done():
				if ee := s.proc.ExitError(); !strings.Contains(err.Error(), ee.Error()) {
					err = fmt.Errorf("%w (%v)", err, ee)
				}
			case <-time.After(50 * time.Millisecond):
				// Still running (e.g. an init timeout): what it printed
				// tells the operator why it does not answer.
				if tail := s.StderrTail(stderrTailBytes); tail != "" {
					err = fmt.Errorf("%w; stderr: %s", err, tail)
				}
			}
		}
		s.Close(opts.grace())
		return nil, err
	}
	// Start must not be bound to the handshake's context: the SSE stream and
	// the HTTP listener live as long as the session.
	if err := s.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fail(fmt.Errorf("start: %w", err))
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: ClientName, Version: opts.Version}
	initDone := make(chan struct{})
	var res *mcp.InitializeResult
	var err error
	go func() {
		defer close(initDone)
		res, err = s.client.Initialize(ctx, req)
	}()
	select {
	case <-initDone:
	case <-s.dead:
		return fail(fmt.Errorf("initialize: %v", s.Err()))
	case <-ctx.Done():
		return fail(fmt.Errorf("initialize: %w", ctx.Err()))
	}
	if err != nil {
		return fail(fmt.Errorf("initialize: %w", err))
	}
	if mcp.IsModernProtocol(res.ProtocolVersion) && !opts.LegacyOnly {
		// mcp-go takes any successful server/discover answer, even `{}`,
		// for the stateless protocol. Strict: the answer must list the
		// negotiated version in supportedVersions, else the server is
		// asked again with the initialize handshake only.
		d, derr := s.client.Discover(ctx, mcp.DiscoverRequest{})
		if derr != nil || !slices.Contains(d.SupportedVersions, res.ProtocolVersion) {
			s.Close(opts.grace())
			legacy := opts
			legacy.LegacyOnly = true
			if opts.Logger != nil {
				opts.Logger.Warn("catalog: MCP server's server/discover answer lacks supportedVersions; retrying with the initialize handshake",
					"server", cfg.Name, "protocol", res.ProtocolVersion)
			}
			return Connect(ctx, cfg, legacy, onListChanged)
		}
	}
	s.ProtocolVersion = res.ProtocolVersion
	s.ServerInfo = res.ServerInfo
	s.ListChangedCapable = res.Capabilities.Tools != nil && res.Capabilities.Tools.ListChanged
	s.caps = res.Capabilities
	if opts.featureRelist != nil {
		s.startFeatureListen()
	}
	return s, nil
}

func (s *Session) onNotification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationToolsListChanged):
		if s.onListChanged != nil {
			go s.onListChanged()
		}
	case string(mcp.MethodNotificationProgress), string(mcp.MethodNotificationMessage):
		note := Notification{Method: n.Method, Params: notificationParams(n.Params)}
		s.mu.Lock()
		var fns []func(Notification)
		if n.Method == string(mcp.MethodNotificationProgress) {
			tok := fmt.Sprint(n.Params.AdditionalFields["progressToken"])
			if f := s.progress[tok]; f != nil {
				fns = append(fns, f)
			}
		} else {
			for _, f := range s.listeners {
				fns = append(fns, f)
			}
		}
		s.mu.Unlock()
		for _, f := range fns {
			f(note)
		}
	default:
		s.onFeatureNotification(n)
	}
}

// notificationParams re-encodes params as received: mcp-go's typed
// NotificationParams adds an empty `_meta` the server did not send, which
// is dropped again.
func notificationParams(p mcp.NotificationParams) json.RawMessage {
	b, _ := json.Marshal(p)
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) == nil {
		if v, ok := m["_meta"]; ok && (string(v) == "{}" || string(v) == "null") {
			delete(m, "_meta")
			b, _ = json.Marshal(m)
		}
	}
	return b
}

func (s *Session) markDead(err error) {
	s.deadOnce.Do(func() {
		if err == nil {
			err = errors.New("session closed")
		}
		s.deadErr.Store(err)
		close(s.dead)
		s.deadCancel()
	})
}

// Dead is closed when the session can no longer serve (child exited,
// connection lost, closed).
func (s *Session) Dead() <-chan struct{} { return s.dead }

// Err is why the session died (nil while alive).
func (s *Session) Err() error {
	if e, ok := s.deadErr.Load().(error); ok {
		return e
	}
	return nil
}

// Pid returns the stdio child's pid, or 0.
func (s *Session) Pid() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}

// ListTools reads every page of tools/list and returns the raw tools.
func (s *Session) ListTools(ctx context.Context) ([]Tool, error) {
	ctx, sink := withSink(ctx)
	if _, err := s.client.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		return nil, s.wrap(err)
	}
	var tools []Tool
	for _, page := range sink.results {
		var p struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(page, &p); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, raw := range p.Tools {
			t, err := parseTool(raw)
			if err != nil {
				return nil, err
			}
			tools = append(tools, t)
		}
	}
	return tools, nil
}

func parseTool(raw json.RawMessage) (Tool, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return Tool{}, fmt.Errorf("tools/list: tool: %w", err)
	}
	t := Tool{Raw: raw, InputSchema: nonNull(f["inputSchema"]), OutputSchema: nonNull(f["outputSchema"]),
		Annotations: nonNull(f["annotations"]), Meta: nonNull(f["_meta"])}
	if err := json.Unmarshal(f["name"], &t.Name); err != nil || t.Name == "" {
		return Tool{}, fmt.Errorf("tools/list: tool without a string name: %.200s", raw)
	}
	if v := f["title"]; v != nil {
		_ = json.Unmarshal(v, &t.Title)
	}
	if v := f["description"]; v != nil {
		_ = json.Unmarshal(v, &t.Description)
	}
	return t, nil
}

func nonNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || string(bytes.TrimSpace(r)) == "null" {
		return nil
	}
	return r
}

// CallTool calls tool with raw JSON arguments (nil = none). ctx bounds the
// call; its cancellation sends notifications/cancelled. When notify is not
// nil it receives the call's progress notifications (a progress token is
// attached) and every logging notification of this session while the call
// runs.
func (s *Session) CallTool(ctx context.Context, tool string, args json.RawMessage, notify func(Notification)) (*Result, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	if len(args) > 0 {
		req.Params.Arguments = args
	}
	if notify != nil {
		tok := "tp-" + strconv.FormatInt(s.tokenSeq.Add(1), 10)
		req.Params.Meta = &mcp.Meta{ProgressToken: tok}
		s.mu.Lock()
		s.progress[tok] = notify
		id := s.nextL
		s.nextL++
		s.listeners[id] = notify
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.progress, tok)
			delete(s.listeners, id)
			s.mu.Unlock()
		}()
	}
	ctx, sink := withSink(ctx)
	// The call runs on the caller's goroutine; the session dying cancels
	// it (a goroutine per call cost a stack and two hand-offs,
	// docs/performance.md).
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.deadCtx, cancel)()
	_, err := s.client.CallTool(cctx, req)
	if err != nil && s.deadCtx.Err() != nil && ctx.Err() == nil {
		return nil, &SessionError{Err: s.Err()}
	}
	sink.mu.Lock()
	results := sink.results
	sink.mu.Unlock()
	if len(results) == 0 {
		if err == nil {
			err = errors.New("tools/call: no result")
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.wrap(err)
	}
	// mcp-go's typed parse may reject content it does not know; the raw
	// result is what counts.
	return parseResult(results[len(results)-1])
}

func parseResult(raw json.RawMessage) (*Result, error) {
	var f struct {
		Content           []json.RawMessage `json:"content"`
		IsError           bool              `json:"isError"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		Meta              json.RawMessage   `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("tools/call: result: %w", err)
	}
	return &Result{Content: f.Content, IsError: f.IsError, StructuredContent: nonNull(f.StructuredContent), Meta: nonNull(f.Meta), Size: len(raw)}, nil
}

// SessionError is a failure of the connection itself (not of the tool): the
// child exited, the connection dropped, or an HTTP session expired. The
// caller may reconnect and retry.
type SessionError struct{ Err error }

func (e *SessionError) Error() string { return "mcp session: " + fmt.Sprint(e.Err) }

// Unwrap returns the cause.
func (e *SessionError) Unwrap() error { return e.Err }

// RPCError is a JSON-RPC error returned by the server.
type RPCError struct {
	Code    int
	Message string
}

func (e *RPCError) Error() string { return fmt.Sprintf("mcp error %d: %s", e.Code, e.Message) }

func (s *Session) wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, transport.ErrSessionTerminated) || errors.Is(err, transport.ErrTransportClosed) ||
		(s.kind != catalogconfig.TypeStdio && staleSession.MatchString(err.Error())) {
		s.markDead(err)
		return &SessionError{Err: err}
	}
	select {
	case <-s.dead:
		return &SessionError{Err: s.Err()}
	default:
	}
	switch {
	case errors.Is(err, mcp.ErrInvalidParams):
		return &RPCError{Code: mcp.INVALID_PARAMS, Message: err.Error()}
	case errors.Is(err, mcp.ErrMethodNotFound):
		return &RPCError{Code: mcp.METHOD_NOT_FOUND, Message: err.Error()}
	case errors.Is(err, mcp.ErrInternalError):
		return &RPCError{Code: mcp.INTERNAL_ERROR, Message: err.Error()}
	}
	return err
}

// staleSession matches the errors HTTP servers give for a session they no
// longer know when they answer 400 instead of the 404 the spec asks for
// (e.g. the TypeScript SDK's examples: "Bad Request: No valid session ID
// provided").
var staleSession = regexp.MustCompile(`(?i)(no valid session|session (id )?(not found|unknown|expired|invalid)|(unknown|invalid|expired) session)`)

// Close ends the session: closes the transport and stops the child (see
// Process.Close); never hangs longer than about 3 × grace.
func (s *Session) Close(grace time.Duration) error {
	s.closeOnce.Do(func() {
		s.markDead(errors.New("session closed"))
		s.stopFeatures()
		done := make(chan struct{})
		go func() {
			if s.client != nil {
				_ = s.client.Close()
			}
			close(done)
		}()
		if s.proc != nil {
			s.closeErr = s.proc.Close(grace)
		}
		select {
		case <-done:
		case <-time.After(grace):
		}
	})
	return s.closeErr
}

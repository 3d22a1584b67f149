package runtimemcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/version"
)

// Names a client uses to steer the front door (documented in the package doc).
const (
	// HeaderThread is the HTTP header naming the thread of a request.
	HeaderThread = "Toolplane-Thread"
	// HeaderAgent is the HTTP header naming the agent profile of new threads.
	HeaderAgent = "Toolplane-Agent"
	// MetaThreadKey is the request `_meta` key naming the thread; it wins over HeaderThread.
	MetaThreadKey = "toolplane.dev/thread"
	// MetaErrorKind is the result `_meta` key carrying the runtime's error kind
	// ("BUSINESS", "POLICY", "RUNTIME") of a failed call.
	MetaErrorKind = "toolplane.dev/error_kind"
	// MetaReasonCode is the result `_meta` key carrying the reason code of a POLICY error.
	MetaReasonCode = "toolplane.dev/reason_code"
	// MetaPromoted is the result `_meta` key listing the names a call promoted.
	MetaPromoted = "toolplane.dev/promoted"
	// MetadataBinding is the thread metadata key marking a front-door thread:
	// "session" (one MCP session) or "stable" (the sessionless thread of a
	// credential and agent).
	MetadataBinding = "mcp_binding"
	// MetadataAgent is the thread metadata key recording the agent a stable
	// thread was bound for ("" = default agent).
	MetadataAgent = "mcp_agent"
)

// dispatchTool is the one tool registered in mcp-go's registry: every
// tools/call is renamed to it (the requested name kept in _meta) so that any
// name, including deferred and unknown ones, reaches ExecuteToolCall and gets
// the runtime's own answer. It is never listed.
const (
	dispatchTool    = "toolplane.frontdoor.dispatch"
	metaRequestName = "toolplane.dev/requested_tool"
)

// Options configure the front door.
type Options struct {
	// Agent is the agent profile of new threads when the request names none;
	// "" = the runtime's default agent.
	Agent string
	// Name is the serverInfo name (default "toolplane").
	Name string
	// Instructions is prepended to the server instructions; the deferred
	// tools section of the thread follows it.
	Instructions string
	// Logger receives errors the protocol cannot carry (default: discard).
	Logger *slog.Logger
	// CallTimeout bounds each runtime RPC except tool calls (default 30 s).
	CallTimeout time.Duration
	// Catalog, when set, is followed (WatchCatalog) so that a change
	// upstream that alters what a subscriber's thread binds sends
	// notifications/tools/list_changed (notify.go). Its connection carries
	// a credential that may watch (the suite's service token); each
	// subscriber's thread is re-assembled with the subscriber's own.
	Catalog catalogv1.CatalogServiceClient
	// Authz, with Catalog, turns on resources, resource templates, prompts
	// and completion (features.go): listed from the catalog and filtered and
	// authorized per principal here. Its connection carries the same
	// credential as Catalog's.
	Authz authzv1.AuthzServiceClient
	// SessionIdleTTL ends an HTTP MCP session idle this long (default 30 min);
	// its thread stays in the runtime.
	SessionIdleTTL time.Duration
	// Context, when set, ends the handler's background work (idle-session
	// sweeping, open sessions) when it is done, like Close.
	Context context.Context
	// RequireAuthorization answers an HTTP request without an Authorization
	// header with 401 and `WWW-Authenticate: Bearer` (MCP authorization for
	// HTTP transports) instead of a JSON-RPC error from the runtime. Set it
	// when the suite's auth is on.
	RequireAuthorization bool
	// Verifier, when set, verifies the bearer credential of every HTTP
	// request (POST, GET, DELETE) before mcp-go sees it and binds each MCP
	// session to the principal that created it (guard.go). internal/app sets
	// it to the suite's authenticator when auth is on.
	Verifier Verifier
	// AllowedOrigins are the browser origins ("https://app.example") whose
	// requests are served (server.http.mcp_allowed_origins); a request with
	// any other Origin header is 403. Default none: only clients that send
	// no Origin (CLI and IDE tools, loopback agents).
	AllowedOrigins []string
	// ResourceMetadataURL, when set, is announced in the 401 challenge as
	// RFC 9728 protected-resource metadata (resource_metadata).
	ResourceMetadataURL string
	// MaxBodyBytes bounds a POST body (default DefaultMaxBodyBytes;
	// server.http.mcp_max_body_bytes).
	MaxBodyBytes int64
	// MaxSessionsPerPrincipal caps the live HTTP MCP sessions of one
	// principal (default DefaultMaxSessionsPerPrincipal;
	// server.http.mcp_max_sessions_per_principal; sessioncap.go).
	MaxSessionsPerPrincipal int
	// OnRefusal, when set, is told of every request the guard refuses
	// (status and reason), for logs and metrics.
	OnRefusal func(r *http.Request, code int, reason string)
	// DisableLocalhostProtection turns off the DNS-rebinding check (a loopback
	// connection must carry a loopback Host header). Only for a reverse proxy
	// on the same host that keeps the original Host header.
	DisableLocalhostProtection bool
}

func (o *Options) setDefaults() {
	if o.Name == "" {
		o.Name = "toolplane"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.SessionIdleTTL <= 0 {
		o.SessionIdleTTL = 30 * time.Minute
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxSessionsPerPrincipal <= 0 {
		o.MaxSessionsPerPrincipal = DefaultMaxSessionsPerPrincipal
	}
}

// Server is the MCP front door over one RuntimeService client. It is safe
// for concurrent use; one Server may serve HTTP and stdio at once.
type Server struct {
	rt   runtimev1.RuntimeServiceClient
	opts Options
	mcp  *server.MCPServer
	sf   singleflight.Group

	// notes holds the tool-list subscribers (notify.go); bg counts the
	// background work bgCtx ends (catalog watches, re-checks).
	notes    *notifier
	feat     featureState // resources and prompts (features.go)
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	mu    sync.Mutex
	https []*server.StreamableHTTPServer
	// sessions maps an MCP session id and credential to its thread, stable a credential and
	// agent key to the sessionless thread. Both are bounded LRUs (bindingCap
	// entries): past that many live sessions the least recently used binding
	// is forgotten (its next request gets a new thread; the old thread stays
	// in the runtime), so abandoned sessions cannot grow memory.
	sessions *lru.Cache[string, string]
	stable   *lru.Cache[string, string]
	// levels holds the logging/setLevel a session asked for explicitly.
	levels *lru.Cache[string, mcp.LoggingLevel]
	// owners maps an MCP session id to the key of the principal (or, without
	// a Verifier, the credential) that created it (guard.go).
	owners *lru.Cache[string, string]
	// caps counts each owner's sessions (sessioncap.go).
	caps *sessionCap
}

// bindingCap bounds each of the thread-binding caches.
const bindingCap = 65536

// reqInfo is what the transport knows about one request.
type reqInfo struct {
	authorization string // forwarded verbatim
	agent         string
	thread        string // HeaderThread
}

type reqInfoKey struct{}

func infoFrom(ctx context.Context) reqInfo {
	ri, _ := ctx.Value(reqInfoKey{}).(reqInfo)
	return ri
}

// New builds the front door over rt.
func New(rt runtimev1.RuntimeServiceClient, opts Options) *Server {
	opts.setDefaults()
	sessions, _ := lru.New[string, string](bindingCap)
	stable, _ := lru.New[string, string](bindingCap)
	levels, _ := lru.New[string, mcp.LoggingLevel](bindingCap)
	s := &Server{rt: rt, opts: opts, sessions: sessions, stable: stable, levels: levels, owners: newOwners(), caps: newSessionCap(opts.MaxSessionsPerPrincipal)}
	s.notes = newNotifier()
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	hooks := &server.Hooks{}
	hooks.AddBeforeSubscriptionsListen(s.onListen)
	hooks.AddOnRequestInitialization(s.onRequest)
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, res *mcp.InitializeResult) {
		res.Instructions = s.instructions(ctx)
	})
	hooks.AddAfterDiscover(func(ctx context.Context, _ any, _ *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
		res.Instructions = s.instructions(ctx)
	})
	hooks.AddAfterListTools(s.afterListTools)
	hooks.AddAfterSetLevel(func(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil && sess.SessionID() != "" {
			s.levels.Add(sess.SessionID(), req.Params.Level)
		}
	})
	hooks.AddBeforeCallTool(func(_ context.Context, _ any, req *mcp.CallToolRequest) {
		if req.Params.Meta == nil {
			req.Params.Meta = &mcp.Meta{}
		}
		if req.Params.Meta.AdditionalFields == nil {
			req.Params.Meta.AdditionalFields = map[string]any{}
		}
		req.Params.Meta.AdditionalFields[metaRequestName] = req.Params.Name
		req.Params.Name = dispatchTool
	})
	s.registerFeatureHooks(hooks) // before the hook below forgets the session's thread
	hooks.AddOnUnregisterSession(func(_ context.Context, sess server.ClientSession) {
		s.unsubscribeID(sess.SessionID())
		prefix := sess.SessionID() + "\x00"
		for _, k := range s.sessions.Keys() {
			if strings.HasPrefix(k, prefix) {
				s.sessions.Remove(k)
			}
		}
		s.levels.Remove(sess.SessionID())
		s.owners.Remove(sess.SessionID())
		s.caps.remove(sess.SessionID())
	})
	s.mcp = server.NewMCPServer(opts.Name, version.String(), append([]server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithLogging(),
		server.WithHooks(hooks),
		server.WithInstructions("Toolplane front door"),
	}, s.featureServerOptions()...)...)
	s.mcp.AddTool(mcp.NewTool(dispatchTool, mcp.WithDescription("internal dispatch; never listed")), s.callTool)
	s.registerFeatureHandlers()
	if opts.Catalog != nil {
		s.bg.Add(1)
		go func() { defer s.bg.Done(); s.watchCatalog(s.bgCtx) }()
	}
	return s
}

// NewHandler returns the streamable HTTP handler of a new front door over
// rt (mounted at /mcp by internal/app). It forwards each request's
// Authorization header to the runtime.
func NewHandler(rt runtimev1.RuntimeServiceClient, opts Options) http.Handler {
	s := New(rt, opts)
	h := s.HTTPHandler()
	if opts.Context != nil {
		go func() {
			<-opts.Context.Done()
			_ = s.Close()
		}()
	}
	return h
}

// Close ends the HTTP transports' background work and open sessions.
func (s *Server) Close() error {
	s.mu.Lock()
	hs := s.https
	s.https = nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, h := range hs {
		errs = append(errs, h.Shutdown(ctx))
	}
	s.bgCancel()
	s.bg.Wait()
	return errors.Join(errs...)
}

// HTTPHandler serves streamable HTTP: stateful sessions (Mcp-Session-Id)
// for session-based protocol versions, sessionless 2026-07-28 requests, an
// in-memory event store so notifications sent during a call are delivered
// in order before its result (and resumable), and DNS-rebinding protection.
func (s *Server) HTTPHandler() http.Handler {
	h := server.NewStreamableHTTPServer(s.mcp,
		server.WithStateful(true),
		server.WithEventStore(server.NewInMemoryEventStore()),
		server.WithSessionIdleTTL(s.opts.SessionIdleTTL),
		server.WithDisableLocalhostProtection(s.opts.DisableLocalhostProtection),
		server.WithStreamableHTTPLogger(s.opts.Logger),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			agent := r.Header.Get(HeaderAgent)
			if agent == "" {
				agent = r.URL.Query().Get("agent")
			}
			return context.WithValue(ctx, reqInfoKey{}, reqInfo{
				authorization: r.Header.Get("Authorization"),
				agent:         agent,
				thread:        r.Header.Get(HeaderThread),
			})
		}),
	)
	s.mu.Lock()
	s.https = append(s.https, h)
	s.mu.Unlock()
	return s.guard(s.sessionRules(h))
}

// ServeStdio serves one MCP session over in/out (newline-delimited JSON-RPC)
// until ctx ends or in is closed. The runtime credential is the one rt was
// dialled with.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ss := server.NewStdioServer(s.mcp)
	ss.SetErrorLogger(slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelError))
	err := ss.Listen(ctx, in, out)
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, io.EOF)) {
		return nil
	}
	return err
}

// MCPServer returns the underlying mcp-go server (for in-process tests).
func (s *Server) MCPServer() *server.MCPServer { return s.mcp }

// outgoing returns ctx carrying the caller's Authorization header for the runtime.
func outgoing(ctx context.Context) context.Context {
	if a := infoFrom(ctx).authorization; a != "" {
		return metadata.AppendToOutgoingContext(ctx, "authorization", a)
	}
	return ctx
}

// rpcCtx is outgoing(ctx) with the per-RPC timeout.
func (s *Server) rpcCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(outgoing(ctx), s.opts.CallTimeout)
}

// onRequest runs before every request: it resolves (creating if needed) the
// request's thread so that a failure reaches the client as a JSON-RPC error.
func (s *Server) onRequest(ctx context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	switch mcp.MCPMethod(m.Method) {
	case mcp.MethodInitialize, mcp.MethodToolsList, mcp.MethodToolsCall, mcp.MethodServerDiscover:
	default:
		return nil
	}
	explicit, _ := m.Params.Meta[MetaThreadKey].(string)
	if _, err := s.thread(ctx, explicit); err != nil {
		return err
	}
	return nil
}

// thread resolves the thread of a request (package doc, "Threads").
func (s *Server) thread(ctx context.Context, explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	ri := infoFrom(ctx)
	if ri.thread != "" {
		return ri.thread, nil
	}
	agent := ri.agent
	if agent == "" {
		agent = s.opts.Agent
	}
	if sess := server.ClientSessionFromContext(ctx); sess != nil && sess.SessionID() != "" {
		// Keyed by session and credential: a session id presented with
		// another credential never reaches (or resets) the owner's binding.
		id := sess.SessionID() + "\x00" + s.ownerOf(ctx)
		if t, ok := s.sessions.Get(id); ok {
			return t, nil
		}
		v, err, _ := s.sf.Do("session\x00"+id, func() (any, error) {
			if t, ok := s.sessions.Get(id); ok {
				return t, nil
			}
			t, err := s.createThread(ctx, agent, map[string]string{MetadataBinding: "session", MetadataAgent: agent})
			if err != nil {
				return "", err
			}
			s.sessions.Add(id, t)
			return t, nil
		})
		if err != nil {
			return "", err
		}
		return v.(string), nil
	}
	key := s.ownerOf(ctx) + "\x00" + agent
	if t, ok := s.stable.Get(key); ok {
		return t, nil
	}
	v, err, _ := s.sf.Do("stable\x00"+key, func() (any, error) {
		if t, ok := s.stable.Get(key); ok {
			return t, nil
		}
		t, err := s.findStable(ctx, agent)
		if err != nil {
			return "", err
		}
		if t == "" {
			t, err = s.createThread(ctx, agent, map[string]string{MetadataBinding: "stable", MetadataAgent: agent})
			if err != nil {
				return "", err
			}
		}
		s.stable.Add(key, t)
		return t, nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// ownerOf is the key of the request's caller: the verified principal (or
// credential) the guard recorded, else the Authorization value's hash
// (stdio: one credential per process).
func (s *Server) ownerOf(ctx context.Context) string {
	if o := ownerFrom(ctx); o != "" {
		return o
	}
	return credentialKey(infoFrom(ctx).authorization)
}

func (s *Server) createThread(ctx context.Context, agent string, md map[string]string) (string, error) {
	cctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	res, err := s.rt.CreateThread(cctx, &runtimev1.CreateThreadRequest{Agent: agent, Metadata: md})
	if err != nil {
		return "", rpcError("create thread", err)
	}
	return res.GetThread().GetThreadId(), nil
}

// findStable pages through the caller's threads (newest first) for the
// stable front-door thread of agent; "" when there is none. At most 20
// pages of 500 are read.
func (s *Server) findStable(ctx context.Context, agent string) (string, error) {
	token := ""
	for range 20 {
		cctx, cancel := s.rpcCtx(ctx)
		res, err := s.rt.ListThreads(cctx, &runtimev1.ListThreadsRequest{PageSize: 500, PageToken: token})
		cancel()
		if err != nil {
			return "", rpcError("list threads", err)
		}
		for _, t := range res.GetThreads() {
			md := t.GetMetadata()
			if md[MetadataBinding] == "stable" && md[MetadataAgent] == agent {
				return t.GetThreadId(), nil
			}
		}
		token = res.GetNextPageToken()
		if token == "" {
			break
		}
	}
	return "", nil
}

// forget drops cached bindings to thread (it no longer exists for this caller).
func (s *Server) forget(thread string) {
	for _, c := range []*lru.Cache[string, string]{s.sessions, s.stable} {
		for _, k := range c.Keys() {
			if v, ok := c.Peek(k); ok && v == thread {
				c.Remove(k)
			}
		}
	}
}

// assemble runs AssembleTools for the request's thread.
func (s *Server) assemble(ctx context.Context, explicit string) (*runtimev1.AssembleToolsResponse, error) {
	for attempt := 0; ; attempt++ {
		t, err := s.thread(ctx, explicit)
		if err != nil {
			return nil, err
		}
		cctx, cancel := s.rpcCtx(ctx)
		res, err := s.rt.AssembleTools(cctx, &runtimev1.AssembleToolsRequest{ThreadId: t, Profile: runtimev1.ToolProfile_TOOL_PROFILE_MCP})
		cancel()
		if status.Code(err) == codes.NotFound && s.implicit(ctx, explicit) {
			// The bound thread is gone (deleted, retention): bind a new one once.
			s.forget(t)
			if attempt == 0 {
				continue
			}
		}
		if err != nil {
			return nil, rpcError("assemble tools", err)
		}
		return res, nil
	}
}

// implicit reports whether the request's thread is the front door's binding
// (session or stable) rather than one the client named.
func (s *Server) implicit(ctx context.Context, explicit string) bool {
	return explicit == "" && infoFrom(ctx).thread == ""
}

// afterListTools replaces mcp-go's registry listing (the hidden dispatch tool)
// with the thread's assembled tools. An assembly failure lists nothing and is
// logged (the hook cannot fail the request; onRequest already resolved the
// thread, so failures here are rare).
func (s *Server) afterListTools(ctx context.Context, _ any, req *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
	explicit := ""
	if req.Params.Meta != nil {
		explicit, _ = req.Params.Meta.AdditionalFields[MetaThreadKey].(string)
	}
	res.Tools = []mcp.Tool{}
	res.NextCursor = ""
	a, err := s.assemble(ctx, explicit)
	if err != nil {
		s.opts.Logger.Error("mcp tools/list: assembly failed; listing no tools", "error", err)
		return
	}
	res.Tools = toolsFrom(a)
	// A session-based session that listed its tools is told when they
	// change (notify.go); a 2026-07-28 client subscribes through
	// subscriptions/listen instead.
	if sess := server.ClientSessionFromContext(ctx); sess != nil && sess.SessionID() != "" {
		if info := server.RequestProtocolInfoFromContext(ctx); info == nil || !info.Modern {
			if t, err := s.thread(ctx, explicit); err == nil {
				s.subscribe(sess, false, t, infoFrom(ctx).authorization, fingerprint(a))
			}
		}
	}
}

// instructions are the server instructions for the request's thread: the
// configured text, how deferral works, and the deferred-tools section.
func (s *Server) instructions(ctx context.Context) string {
	var b strings.Builder
	if s.opts.Instructions != "" {
		b.WriteString(s.opts.Instructions)
		b.WriteString("\n\n")
	}
	b.WriteString("Toolplane: the tools listed are those bound for your thread. ")
	a, err := s.assemble(ctx, "")
	if err != nil {
		s.opts.Logger.Error("mcp instructions: assembly failed", "error", err)
		return b.String()
	}
	if len(a.GetDeferred()) > 0 {
		b.WriteString("More tools are available but deferred: call tool_search with a query (or \"select:name1,name2\") to load them; after it returns, the tool list changes and the found tools can be called.")
		for _, ps := range a.GetPromptSections() {
			if ps.GetName() == "deferred_tools" && ps.GetText() != "" {
				b.WriteString("\n\n")
				b.WriteString(ps.GetText())
			}
		}
	}
	return b.String()
}

// callTool is the dispatch handler: the requested tool runs through
// ExecuteToolCallStream (ExecuteToolCall when the runtime has no stream).
func (s *Server) callTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var (
		name     string
		explicit string
		token    mcp.ProgressToken
	)
	if m := req.Params.Meta; m != nil {
		name, _ = m.AdditionalFields[metaRequestName].(string)
		explicit, _ = m.AdditionalFields[MetaThreadKey].(string)
		token = m.ProgressToken
	}
	t, err := s.thread(ctx, explicit)
	if err != nil {
		return nil, err
	}
	call := &runtimev1.ToolCall{Id: "mcp-" + uuid.NewString(), Name: name}
	args, raw, err := toolArguments(req)
	if err != nil {
		return nil, err
	}
	call.Arguments, call.RawArguments = args, raw

	octx := outgoing(ctx)
	var result *runtimev1.ToolResult
	stream, err := s.rt.ExecuteToolCallStream(octx, &runtimev1.ExecuteToolCallStreamRequest{ThreadId: t, ToolCall: call, Profile: runtimev1.ToolProfile_TOOL_PROFILE_MCP})
	if err == nil {
		result, err = s.drain(ctx, stream, token)
	}
	if status.Code(err) == codes.Unimplemented {
		var res *runtimev1.ExecuteToolCallResponse
		res, err = s.rt.ExecuteToolCall(octx, &runtimev1.ExecuteToolCallRequest{ThreadId: t, ToolCall: call, Profile: runtimev1.ToolProfile_TOOL_PROFILE_MCP})
		result = res.GetResult()
	}
	if err != nil {
		if status.Code(err) == codes.NotFound && s.implicit(ctx, explicit) {
			s.forget(t) // the next request binds a new thread
		}
		return nil, rpcError("execute tool call", err)
	}
	settle(ctx)
	if len(result.GetPromoted().GetNames()) > 0 {
		if sess := server.ClientSessionFromContext(ctx); sess != nil && sess.SessionID() != "" {
			if err := s.mcp.SendNotificationToClient(ctx, string(mcp.MethodNotificationToolsListChanged), nil); err != nil {
				s.opts.Logger.Debug("mcp: list_changed not sent", "error", err)
			}
		}
		// Every other subscriber of the thread (2026-07-28 listen streams,
		// other sessions naming it) is told too (notify.go).
		s.promoted(ctx, t)
	}
	return resultFrom(result)
}

// settle waits (at most ~200 ms) until the notifications relayed to the
// session have been taken by its writer. mcp-go v1.2.1's stdio server writes
// notifications from a goroutine of its own, so a result returned at once
// could overtake the last progress or log notification on stdout. Over HTTP
// (with the event store) ordering is already guaranteed and this returns at
// once.
func settle(ctx context.Context) {
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil || sess.SessionID() != "stdio" {
		return
	}
	ch := sess.NotificationChannel()
	for i := 0; i < 100 && len(ch) > 0; i++ {
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
}

// drain relays the stream's notifications and returns its final result.
func (s *Server) drain(ctx context.Context, stream interface {
	Recv() (*runtimev1.ExecuteToolCallStreamResponse, error)
}, token mcp.ProgressToken) (*runtimev1.ToolResult, error) {
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, status.Error(codes.Internal, "runtime stream ended without a result")
			}
			return nil, err
		}
		if r := ev.GetResult(); r != nil {
			return r, nil
		}
		n := ev.GetNotification()
		if n == nil {
			continue
		}
		params := n.GetParams().AsMap()
		switch n.GetMethod() {
		case string(mcp.MethodNotificationProgress):
			if token == nil {
				continue // the client asked for no progress
			}
			params["progressToken"] = token
		case string(mcp.MethodNotificationMessage):
			lvl, _ := params["level"].(string)
			if !s.wantsLog(ctx, mcp.LoggingLevel(lvl)) {
				continue
			}
		default:
			continue
		}
		if err := s.mcp.SendNotificationToClient(ctx, n.GetMethod(), params); err != nil {
			s.opts.Logger.Debug("mcp: notification not relayed", "method", n.GetMethod(), "error", err)
		}
	}
}

// wantsLog applies the client's logging level to a relayed log message:
// with protocol 2026-07-28 only a request that declared a level gets log
// notifications, at or above it (SEP-2575); with session-based versions a
// session that called logging/setLevel gets messages at or above that
// level, and one that did not gets every message the tool sent.
func (s *Server) wantsLog(ctx context.Context, level mcp.LoggingLevel) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.LogLevel != "" && level.ShouldSendTo(info.LogLevel)
	}
	if sess := server.ClientSessionFromContext(ctx); sess != nil {
		if min, ok := s.levels.Get(sess.SessionID()); ok {
			return level.ShouldSendTo(min)
		}
	}
	return true
}

// rpcError turns a runtime RPC error into the error a JSON-RPC client sees.
func rpcError(what string, err error) error {
	if st, ok := status.FromError(err); ok {
		return fmt.Errorf("toolplane runtime: %s: %s: %s", what, strings.ToLower(strings.ReplaceAll(st.Code().String(), "Code(", "")), st.Message())
	}
	return fmt.Errorf("toolplane runtime: %s: %w", what, err)
}

// Path is where the suite's HTTP listener serves the front door.
const Path = "/mcp"

// Mount returns next with the front door added at Path, over a
// RuntimeService client of conn (the process's in-memory connection: each
// request's Authorization header is forwarded, not replaced).
func Mount(next http.Handler, conn grpc.ClientConnInterface, opts Options) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, NewHandler(runtimev1.NewRuntimeServiceClient(conn), opts))
	mux.Handle("/", next)
	return mux
}

package runtimemcp

// Resources, resource templates, prompts and completion on the front door
// (docs/decisions/0161-front-door-resources-and-prompts.md): listed from the
// catalog (ListResources, ListResourceTemplates, ListPrompts), filtered per
// principal by authz (resource types mcp_server, then resource / prompt,
// action list), and read, got, completed and subscribed through the
// catalog after an authz decision (action call). The front door reaches
// both only over gRPC, with the suite's service credential acting for the
// request's principal, and the request's thread as the trusted CallContext
// (per-thread MCP sessions).
//
// mcp-go serves these methods from its registries; as with tools/call (the
// dispatch tool), one dispatch resource and one dispatch prompt are
// registered and every request is renamed to them (the requested URI or
// name kept in the request's arguments), and the list results are replaced
// by the principal's lists in after-hooks.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
)

// The dispatch entries of mcp-go's registries (never listed).
const (
	dispatchResourceURI = "toolplane-frontdoor://dispatch"
	dispatchPrompt      = "toolplane.frontdoor.dispatch"
	// argRequested carries the requested URI or prompt name through mcp-go.
	argRequested = "toolplane.dev/requested"
)

// featureState is the front door's state of resources and prompts.
type featureState struct {
	// principals maps an MCP session id to the principal first seen on it
	// (for the catalog call that ends the session's per-thread sessions).
	principals *lru.Cache[string, *typev1.Principal]
	mu         sync.Mutex
	subs       map[string]map[string]context.CancelFunc // session id -> exposed URI -> subscription
	open       atomic.Int64                             // open catalog subscriptions
	deniedOnce sync.Once                                // logFeatureErr
}

// featuresOn reports whether resources and prompts are served (a catalog
// and an authz client are configured).
func (s *Server) featuresOn() bool { return s.opts.Catalog != nil && s.opts.Authz != nil }

// featureServerOptions are the mcp-go options of resources, prompts and completion.
func (s *Server) featureServerOptions() []server.ServerOption {
	if !s.featuresOn() {
		return nil
	}
	return []server.ServerOption{
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(promptCompleter{s}),
		server.WithResourceCompletionProvider(resourceCompleter{s}),
	}
}

// registerFeatureHooks adds the hooks; it runs before the front door's own
// session-unregister hook, which forgets the session's thread binding.
func (s *Server) registerFeatureHooks(hooks *server.Hooks) {
	s.feat.principals, _ = lru.New[string, *typev1.Principal](bindingCap)
	s.feat.subs = map[string]map[string]context.CancelFunc{}
	if !s.featuresOn() {
		return
	}
	hooks.AddOnRequestInitialization(s.onFeatureRequest)
	hooks.AddAfterListResources(func(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		res.Resources, res.NextCursor = s.listResources(ctx), ""
	})
	hooks.AddAfterListResourceTemplates(func(ctx context.Context, _ any, _ *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
		res.ResourceTemplates, res.NextCursor = s.listTemplates(ctx), ""
	})
	hooks.AddAfterListPrompts(func(ctx context.Context, _ any, _ *mcp.ListPromptsRequest, res *mcp.ListPromptsResult) {
		res.Prompts, res.NextCursor = s.listPrompts(ctx), ""
	})
	hooks.AddBeforeReadResource(func(_ context.Context, _ any, req *mcp.ReadResourceRequest) {
		if req.Params.Arguments == nil {
			req.Params.Arguments = map[string]any{}
		}
		req.Params.Arguments[argRequested] = req.Params.URI
		req.Params.URI = dispatchResourceURI
	})
	hooks.AddBeforeGetPrompt(func(_ context.Context, _ any, req *mcp.GetPromptRequest) {
		if req.Params.Arguments == nil {
			req.Params.Arguments = map[string]string{}
		}
		req.Params.Arguments[argRequested] = req.Params.Name
		req.Params.Name = dispatchPrompt
	})
	hooks.AddOnUnregisterSession(s.onFeatureSessionEnd)
}

// registerFeatureHandlers registers the dispatch entries and starts the
// catalog's feature watch.
func (s *Server) registerFeatureHandlers() {
	if !s.featuresOn() {
		return
	}
	s.mcp.AddResource(mcp.Resource{URI: dispatchResourceURI, Name: "dispatch"}, s.readResource)
	s.mcp.AddPrompt(mcp.Prompt{Name: dispatchPrompt, Description: "internal dispatch; never listed"}, s.getPrompt)
	s.bg.Add(1)
	go func() { defer s.bg.Done(); s.watchFeatures(s.bgCtx) }()
}

// principal is the request's principal: the verified credential's (with a
// Verifier), else the suite's default principal (auth off; or a front door
// whose catalog connection carries the user's own credential, which the
// catalog refuses for these service-class calls: fail closed).
func (s *Server) principal(ctx context.Context) (*typev1.Principal, error) {
	if s.opts.Verifier == nil {
		return auth.DefaultPrincipal(), nil
	}
	md := metadata.Pairs("authorization", infoFrom(ctx).authorization)
	id, err := s.opts.Verifier.Credential(metadata.NewIncomingContext(ctx, md))
	if err != nil {
		return nil, err
	}
	return id.Principal, nil
}

// actingFor returns ctx for an upstream call on behalf of p (with a
// Verifier only: the catalog and authz connections then carry the suite's
// service credential).
func (s *Server) actingFor(ctx context.Context, p *typev1.Principal) context.Context {
	if s.opts.Verifier == nil {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, auth.PrincipalHeader, string(auth.EncodePrincipal(p)))
}

// featureCall is what every resource or prompt request needs: the
// principal, the upstream context and the thread.
type featureCall struct {
	p      *typev1.Principal
	ctx    context.Context
	cancel context.CancelFunc
	cc     *typev1.CallContext
}

func (s *Server) newFeatureCall(ctx context.Context) (*featureCall, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if sess := server.ClientSessionFromContext(ctx); sess != nil && sess.SessionID() != "" {
		s.feat.principals.ContainsOrAdd(sess.SessionID(), p)
	}
	thread, err := s.thread(ctx, "")
	if err != nil {
		return nil, err
	}
	if !s.implicit(ctx, "") {
		// A thread the client named (Toolplane-Thread) must be the
		// caller's: the runtime answers GetThread with the caller's own
		// credential, as it does for a tool call, before the thread is
		// sent under the service credential as the trusted CallContext.
		if err := s.checkOwnThread(ctx, thread); err != nil {
			return nil, err
		}
	}
	c, cancel := context.WithTimeout(s.actingFor(context.WithoutCancel(ctx), p), s.opts.CallTimeout)
	// The request's own end cancels the upstream call too.
	stop := context.AfterFunc(ctx, cancel)
	return &featureCall{p: p, ctx: c, cancel: func() { stop(); cancel() },
		cc: &typev1.CallContext{ThreadId: thread}}, nil
}

// checkOwnThread refuses a thread the caller does not own with the
// runtime's answer for an unknown thread.
func (s *Server) checkOwnThread(ctx context.Context, thread string) error {
	cctx, cancel := s.rpcCtx(ctx)
	defer cancel()
	_, err := s.rt.GetThread(cctx, &runtimev1.GetThreadRequest{ThreadId: thread})
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.NotFound, codes.PermissionDenied:
		return status.Errorf(codes.NotFound, "thread %q not found", thread)
	default:
		return rpcError("thread", err)
	}
}

// filter returns the allowed subset of names (authz FilterResources) with
// their servers as attributes; servers the principal may not use are
// removed first, as the assembly does for tools.
func (s *Server) filter(fc *featureCall, rt authzv1.ResourceType, names, servers []string) (map[string]bool, error) {
	srvSet := map[string]bool{}
	var srvs []string
	for _, sv := range servers {
		if !srvSet[sv] {
			srvSet[sv] = true
			srvs = append(srvs, sv)
		}
	}
	okSrv := map[string]bool{}
	if len(srvs) > 0 {
		res, err := s.opts.Authz.FilterResources(fc.ctx, &authzv1.FilterResourcesRequest{Principal: fc.p,
			ResourceType: authzv1.ResourceType_RESOURCE_TYPE_MCP_SERVER, Candidates: srvs, Action: authzv1.Action_ACTION_LIST})
		if err != nil {
			return nil, err
		}
		for _, a := range res.GetAllowed() {
			okSrv[a] = true
		}
	}
	var cands []string
	attrs := map[string]*authzv1.ResourceAttributes{}
	for i, n := range names {
		if okSrv[servers[i]] {
			cands = append(cands, n)
			attrs[n] = &authzv1.ResourceAttributes{Server: servers[i]}
		}
	}
	allowed := map[string]bool{}
	for start := 0; start < len(cands); start += 10000 {
		part := cands[start:min(start+10000, len(cands))]
		res, err := s.opts.Authz.FilterResources(fc.ctx, &authzv1.FilterResourcesRequest{Principal: fc.p, ResourceType: rt,
			Candidates: part, Action: authzv1.Action_ACTION_LIST, CallContext: fc.cc, ResourceAttributes: attrs})
		if err != nil {
			return nil, err
		}
		for _, a := range res.GetAllowed() {
			allowed[a] = true
		}
	}
	return allowed, nil
}

// authorize decides one call (read, subscribe, get, complete) of target
// owned by server: the server with action call, then the target.
func (s *Server) authorize(fc *featureCall, rt authzv1.ResourceType, target, server string) error {
	for _, q := range []*authzv1.AuthorizeRequest{
		{Principal: fc.p, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_MCP_SERVER, Action: authzv1.Action_ACTION_CALL, Target: server, CallContext: fc.cc},
		{Principal: fc.p, ResourceType: rt, Action: authzv1.Action_ACTION_CALL, Target: target, CallContext: fc.cc,
			ResourceAttributes: &authzv1.ResourceAttributes{Server: server}},
	} {
		res, err := s.opts.Authz.Authorize(fc.ctx, q)
		if err != nil {
			return err
		}
		if d := res.GetDecision(); !d.GetAllow() {
			var why []string
			for _, r := range d.GetReasons() {
				why = append(why, r.GetCode())
			}
			kind := "resource"
			if rt == authzv1.ResourceType_RESOURCE_TYPE_PROMPT {
				kind = "prompt"
			}
			return fmt.Errorf("%s %q: denied by policy (%s)", kind, target, strings.Join(why, ", "))
		}
	}
	return nil
}

// logFeatureErr logs a failure; a refusal of the front door's credential
// (`toolplane mcp` with a user token: the catalog's and authz's RPCs are
// service-class) is logged once, then at debug level.
func (s *Server) logFeatureErr(what string, err error) {
	if status.Code(err) == codes.PermissionDenied {
		first := false
		s.feat.deniedOnce.Do(func() { first = true })
		if !first {
			s.opts.Logger.Debug("mcp front door: "+what, "error", err)
			return
		}
		s.opts.Logger.Warn("mcp front door: resources and prompts are unavailable: the catalog or authz refused this front door's credential (a service credential is needed)", "during", what, "error", err)
		return
	}
	s.opts.Logger.Warn("mcp front door: "+what, "error", err)
}

// listResources is the principal's resources.
func (s *Server) listResources(ctx context.Context) []mcp.Resource {
	fc, err := s.newFeatureCall(ctx)
	if err != nil {
		s.logFeatureErr("resources/list", err)
		return []mcp.Resource{}
	}
	defer fc.cancel()
	res, err := s.opts.Catalog.ListResources(fc.ctx, &catalogv1.ListResourcesRequest{})
	if err != nil {
		s.logFeatureErr("resources/list", err)
		return []mcp.Resource{}
	}
	var names, servers []string
	for _, r := range res.GetResources() {
		names, servers = append(names, r.GetUri()), append(servers, r.GetServer())
	}
	allowed, err := s.filter(fc, authzv1.ResourceType_RESOURCE_TYPE_RESOURCE, names, servers)
	if err != nil {
		s.logFeatureErr("resources/list: authz", err)
		return []mcp.Resource{}
	}
	out := []mcp.Resource{}
	for _, r := range res.GetResources() {
		var m mcp.Resource
		if allowed[r.GetUri()] && json.Unmarshal([]byte(r.GetJson()), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// listTemplates is the principal's resource templates.
func (s *Server) listTemplates(ctx context.Context) []mcp.ResourceTemplate {
	fc, err := s.newFeatureCall(ctx)
	if err != nil {
		s.logFeatureErr("resources/templates/list", err)
		return []mcp.ResourceTemplate{}
	}
	defer fc.cancel()
	res, err := s.opts.Catalog.ListResourceTemplates(fc.ctx, &catalogv1.ListResourceTemplatesRequest{})
	if err != nil {
		s.logFeatureErr("resources/templates/list", err)
		return []mcp.ResourceTemplate{}
	}
	var names, servers []string
	for _, t := range res.GetResourceTemplates() {
		names, servers = append(names, t.GetUriTemplate()), append(servers, t.GetServer())
	}
	allowed, err := s.filter(fc, authzv1.ResourceType_RESOURCE_TYPE_RESOURCE, names, servers)
	if err != nil {
		s.logFeatureErr("resources/templates/list: authz", err)
		return []mcp.ResourceTemplate{}
	}
	out := []mcp.ResourceTemplate{}
	for _, t := range res.GetResourceTemplates() {
		var m mcp.ResourceTemplate
		if allowed[t.GetUriTemplate()] && json.Unmarshal([]byte(t.GetJson()), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// listPrompts is the principal's prompts.
func (s *Server) listPrompts(ctx context.Context) []mcp.Prompt {
	fc, err := s.newFeatureCall(ctx)
	if err != nil {
		s.logFeatureErr("prompts/list", err)
		return []mcp.Prompt{}
	}
	defer fc.cancel()
	res, err := s.opts.Catalog.ListPrompts(fc.ctx, &catalogv1.ListPromptsRequest{})
	if err != nil {
		s.logFeatureErr("prompts/list", err)
		return []mcp.Prompt{}
	}
	var names, servers []string
	for _, p := range res.GetPrompts() {
		names, servers = append(names, p.GetName()), append(servers, p.GetServer())
	}
	allowed, err := s.filter(fc, authzv1.ResourceType_RESOURCE_TYPE_PROMPT, names, servers)
	if err != nil {
		s.logFeatureErr("prompts/list: authz", err)
		return []mcp.Prompt{}
	}
	out := []mcp.Prompt{}
	for _, p := range res.GetPrompts() {
		var m mcp.Prompt
		if allowed[p.GetName()] && json.Unmarshal([]byte(p.GetJson()), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// upstreamErr turns a catalog or authz error into the client's error text
// (the gRPC message only; never a credential).
func upstreamErr(what string, err error) error {
	if st, ok := status.FromError(err); ok {
		if st.Code() == codes.NotFound {
			return fmt.Errorf("%s: %w: %s", what, mcp.ErrResourceNotFound, st.Message())
		}
		return fmt.Errorf("%s: %s", what, st.Message())
	}
	return fmt.Errorf("%s: %v", what, err)
}

// ownerOfURI finds the server of an exposed URI among the listed resources
// and templates (the catalog resolves it the same way; the server is
// needed for the authz decision).
func (s *Server) ownerOfURI(fc *featureCall, uri string) (string, error) {
	res, err := s.opts.Catalog.ListResources(fc.ctx, &catalogv1.ListResourcesRequest{})
	if err != nil {
		return "", err
	}
	for _, r := range res.GetResources() {
		if r.GetUri() == uri {
			return r.GetServer(), nil
		}
	}
	tres, err := s.opts.Catalog.ListResourceTemplates(fc.ctx, &catalogv1.ListResourceTemplatesRequest{})
	if err != nil {
		return "", err
	}
	for _, t := range tres.GetResourceTemplates() {
		if templateMatches(t.GetUriTemplate(), uri) {
			return t.GetServer(), nil
		}
	}
	return "", fmt.Errorf("%w: %s", mcp.ErrResourceNotFound, uri)
}

// templateMatches reports whether uri is an expansion of an RFC 6570
// template: the literal parts in order, each expression any text (the
// same rule as the catalog's).
func templateMatches(tmpl, uri string) bool {
	rest := uri
	first := true
	for {
		i := strings.IndexByte(tmpl, '{')
		lit := tmpl
		if i >= 0 {
			lit = tmpl[:i]
		}
		if first {
			if !strings.HasPrefix(rest, lit) {
				return false
			}
			rest = rest[len(lit):]
			first = false
		} else if i < 0 {
			return strings.HasSuffix(rest, lit)
		} else {
			k := strings.Index(rest, lit)
			if k < 0 {
				return false
			}
			rest = rest[k+len(lit):]
		}
		if i < 0 {
			return rest == ""
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			return false
		}
		tmpl = tmpl[i+j+1:]
		if tmpl == "" {
			return true
		}
	}
}

// readResource serves resources/read (renamed to the dispatch resource).
func (s *Server) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri, _ := req.Params.Arguments[argRequested].(string)
	if uri == "" {
		return nil, errors.New("resources/read: uri is required")
	}
	uri, err := normaliseURI(uri)
	if err != nil {
		return nil, fmt.Errorf("resources/read: %v", err)
	}
	fc, err := s.newFeatureCall(ctx)
	if err != nil {
		return nil, upstreamErr("resources/read", err)
	}
	defer fc.cancel()
	srv, err := s.ownerOfURI(fc, uri)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(fc, authzv1.ResourceType_RESOURCE_TYPE_RESOURCE, uri, srv); err != nil {
		return nil, err
	}
	res, err := s.opts.Catalog.ReadResource(fc.ctx, &catalogv1.ReadResourceRequest{Uri: uri, CallContext: fc.cc})
	if err != nil {
		return nil, upstreamErr("resources/read", err)
	}
	raw := json.RawMessage(res.GetResultJson())
	out, err := mcp.ParseReadResourceResult(&raw)
	if err != nil {
		return nil, fmt.Errorf("resources/read: the server's result: %v", err)
	}
	return s.policeContents(fc, srv, uri, out.Contents), nil
}

// getPrompt serves prompts/get (renamed to the dispatch prompt).
func (s *Server) getPrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	name := req.Params.Arguments[argRequested]
	delete(req.Params.Arguments, argRequested)
	if name == "" {
		return nil, errors.New("prompts/get: name is required")
	}
	fc, err := s.newFeatureCall(ctx)
	if err != nil {
		return nil, upstreamErr("prompts/get", err)
	}
	defer fc.cancel()
	srv, err := s.promptServer(fc, name)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(fc, authzv1.ResourceType_RESOURCE_TYPE_PROMPT, name, srv); err != nil {
		return nil, err
	}
	res, err := s.opts.Catalog.GetPrompt(fc.ctx, &catalogv1.GetPromptRequest{Name: name, Arguments: req.Params.Arguments, CallContext: fc.cc})
	if err != nil {
		return nil, upstreamErr("prompts/get", err)
	}
	raw := json.RawMessage(res.GetResultJson())
	out, err := mcp.ParseGetPromptResult(&raw)
	if err != nil {
		return nil, fmt.Errorf("prompts/get: the server's result: %v", err)
	}
	s.policeMessages(fc, srv, out.Messages)
	return out, nil
}

func (s *Server) promptServer(fc *featureCall, name string) (string, error) {
	res, err := s.opts.Catalog.ListPrompts(fc.ctx, &catalogv1.ListPromptsRequest{})
	if err != nil {
		return "", upstreamErr("prompts", err)
	}
	for _, p := range res.GetPrompts() {
		if p.GetName() == name {
			return p.GetServer(), nil
		}
	}
	return "", fmt.Errorf("prompt %q: not found", name)
}

type promptCompleter struct{ s *Server }

// CompletePromptArgument relays completion/complete of a prompt argument.
func (c promptCompleter) CompletePromptArgument(ctx context.Context, name string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	fc, err := c.s.newFeatureCall(ctx)
	if err != nil {
		return nil, upstreamErr("completion/complete", err)
	}
	defer fc.cancel()
	srv, err := c.s.promptServer(fc, name)
	if err != nil {
		return nil, err
	}
	if err := c.s.authorize(fc, authzv1.ResourceType_RESOURCE_TYPE_PROMPT, name, srv); err != nil {
		return nil, err
	}
	return c.s.complete(fc, &catalogv1.CompleteRequest{Prompt: name, ArgumentName: arg.Name, ArgumentValue: arg.Value,
		ContextArguments: cctx.Arguments, CallContext: fc.cc})
}

type resourceCompleter struct{ s *Server }

// CompleteResourceArgument relays completion/complete of a resource template argument.
func (c resourceCompleter) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	uri, err := normaliseURI(uri)
	if err != nil {
		return nil, fmt.Errorf("completion/complete: %v", err)
	}
	fc, err := c.s.newFeatureCall(ctx)
	if err != nil {
		return nil, upstreamErr("completion/complete", err)
	}
	defer fc.cancel()
	tres, err := c.s.opts.Catalog.ListResourceTemplates(fc.ctx, &catalogv1.ListResourceTemplatesRequest{})
	if err != nil {
		return nil, upstreamErr("completion/complete", err)
	}
	srv := ""
	for _, t := range tres.GetResourceTemplates() {
		if t.GetUriTemplate() == uri {
			srv = t.GetServer()
		}
	}
	if srv == "" {
		if srv, err = c.s.ownerOfURI(fc, uri); err != nil {
			return nil, err
		}
	}
	if err := c.s.authorize(fc, authzv1.ResourceType_RESOURCE_TYPE_RESOURCE, uri, srv); err != nil {
		return nil, err
	}
	return c.s.complete(fc, &catalogv1.CompleteRequest{UriTemplate: uri, ArgumentName: arg.Name, ArgumentValue: arg.Value,
		ContextArguments: cctx.Arguments, CallContext: fc.cc})
}

func (s *Server) complete(fc *featureCall, req *catalogv1.CompleteRequest) (*mcp.Completion, error) {
	res, err := s.opts.Catalog.Complete(fc.ctx, req)
	if err != nil {
		return nil, upstreamErr("completion/complete", err)
	}
	var out mcp.CompleteResult
	if err := json.Unmarshal([]byte(res.GetResultJson()), &out); err != nil {
		return nil, fmt.Errorf("completion/complete: the server's result: %v", err)
	}
	return &out.Completion, nil
}

// onFeatureRequest handles resources/subscribe and resources/unsubscribe
// before mcp-go acknowledges them (its own handler only records the URI on
// the session), so that a refusal reaches the client as an error.
func (s *Server) onFeatureRequest(ctx context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	var m struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
		Params struct {
			URI           string `json:"uri"`
			Notifications struct {
				ResourceSubscriptions []string `json:"resourceSubscriptions"`
			} `json:"notifications"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	// Remember the principal of every session (not only those that use
	// resources): its end closes the per-thread sessions its tool calls
	// started.
	if sess := server.ClientSessionFromContext(ctx); sess != nil && sess.SessionID() != "" && !s.feat.principals.Contains(sess.SessionID()) {
		if p, err := s.principal(ctx); err == nil {
			s.feat.principals.ContainsOrAdd(sess.SessionID(), p)
		}
	}
	switch mcp.MCPMethod(m.Method) {
	case mcp.MethodResourcesSubscribe:
		if m.Params.URI == "" {
			return nil // mcp-go answers invalid params
		}
		return s.subscribeResource(ctx, m.Params.URI)
	case mcp.MethodSubscriptionsListen:
		if len(m.Params.Notifications.ResourceSubscriptions) > 0 {
			return s.listenResources(ctx, m.ID, m.Params.Notifications.ResourceSubscriptions)
		}
	case mcp.MethodResourcesUnsubscribe:
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			s.unsubscribeResource(sess.SessionID(), m.Params.URI)
		}
	}
	return nil
}

// subscribeWait bounds the wait for the catalog's confirmation,
// closeThreadWait the CloseThreadSessions call at a session's end.
const (
	subscribeWait   = 15 * time.Second
	closeThreadWait = 5 * time.Second
)

// maxSubscriptionsPerSession bounds a session's (or a listen request's)
// open subscriptions, maxOpenSubscriptions the front door's.
const (
	maxSubscriptionsPerSession = 64
	maxOpenSubscriptions       = 4096
)

func (s *Server) subscribeResource(ctx context.Context, uri string) error {
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil || sess.SessionID() == "" {
		return errors.New("resources/subscribe needs a session (protocol 2026-07-28: subscriptions/listen with resourceSubscriptions)")
	}
	id := sess.SessionID()
	s.feat.mu.Lock()
	_, dup := s.feat.subs[id][uri]
	n := len(s.feat.subs[id])
	s.feat.mu.Unlock()
	if dup {
		return nil
	}
	if n >= maxSubscriptionsPerSession {
		return fmt.Errorf("resources/subscribe: at most %d subscriptions per session", maxSubscriptionsPerSession)
	}
	// The stream outlives the request: it ends on unsubscribe, at the
	// session's end or when the front door closes.
	stream, cancel, err := s.openSubscription(ctx, s.bgCtx, uri)
	if err != nil {
		return err
	}
	s.feat.mu.Lock()
	if s.feat.subs[id] == nil {
		s.feat.subs[id] = map[string]context.CancelFunc{}
	}
	if _, raced := s.feat.subs[id][uri]; raced { // a concurrent subscribe won
		s.feat.mu.Unlock()
		cancel()
		s.feat.open.Add(-1)
		return nil
	}
	s.feat.subs[id][uri] = cancel
	s.feat.mu.Unlock()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.feat.open.Add(-1)
		defer cancel()
		s.relayUpdates(id, uri, stream, func(u string) error {
			return s.mcp.SendNotificationToSpecificClient(id, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": u})
		})
	}()
	return nil
}

// openSubscription authorizes uri for the request's principal and opens the
// catalog's subscription, bound to life (confirmed before it returns).
func (s *Server) openSubscription(ctx, life context.Context, uri string) (_ grpc.ServerStreamingClient[catalogv1.SubscribeResourceResponse], _ context.CancelFunc, err error) {
	if s.feat.open.Add(1) > maxOpenSubscriptions {
		s.feat.open.Add(-1)
		return nil, nil, fmt.Errorf("resources/subscribe: the front door holds %d subscriptions, its limit; try later", maxOpenSubscriptions)
	}
	defer func() {
		if err != nil {
			s.feat.open.Add(-1)
		}
	}()
	if uri, err = normaliseURI(uri); err != nil {
		return nil, nil, fmt.Errorf("resources/subscribe: %v", err)
	}
	fc, err := s.newFeatureCall(ctx)
	if err != nil {
		return nil, nil, upstreamErr("resources/subscribe", err)
	}
	defer fc.cancel()
	srv, err := s.ownerOfURI(fc, uri)
	if err != nil {
		return nil, nil, err
	}
	if err := s.authorize(fc, authzv1.ResourceType_RESOURCE_TYPE_RESOURCE, uri, srv); err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(s.actingFor(life, fc.p))
	stream, err := s.opts.Catalog.SubscribeResource(sctx, &catalogv1.SubscribeResourceRequest{Uri: uri, CallContext: fc.cc})
	if err != nil {
		cancel()
		return nil, nil, upstreamErr("resources/subscribe", err)
	}
	first := make(chan error, 1)
	go func() {
		m, err := stream.Recv()
		if err == nil && !m.GetSubscribed() {
			err = errors.New("unexpected first message")
		}
		first <- err
	}()
	select {
	case err = <-first:
	case <-time.After(subscribeWait):
		err = errors.New("the catalog did not confirm in time")
	}
	if err != nil {
		cancel()
		return nil, nil, upstreamErr("resources/subscribe", err)
	}
	return stream, cancel, nil
}

// listenResources serves the resourceSubscriptions of a 2026-07-28
// subscriptions/listen request: each URI is authorized and subscribed
// before mcp-go acknowledges the stream (a refusal fails the request), and
// its updates are written to the listen stream until the request ends.
func (s *Server) listenResources(ctx context.Context, id any, uris []string) error {
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil {
		return errors.New("subscriptions/listen: no session")
	}
	if len(uris) > maxSubscriptionsPerSession {
		return fmt.Errorf("subscriptions/listen: at most %d resource subscriptions", maxSubscriptionsPerSession)
	}
	type open struct {
		uri    string
		stream grpc.ServerStreamingClient[catalogv1.SubscribeResourceResponse]
		cancel context.CancelFunc
	}
	var opened []open
	seen := map[string]bool{}
	for _, u := range uris {
		if u == "" || seen[u] {
			continue
		}
		seen[u] = true
		st, cancel, err := s.openSubscription(ctx, s.bgCtx, u)
		if err != nil {
			for _, o := range opened {
				o.cancel()
				s.feat.open.Add(-1)
			}
			return err
		}
		opened = append(opened, open{u, st, cancel})
	}
	for _, o := range opened {
		stop := context.AfterFunc(ctx, o.cancel) // the listen request's end
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			defer s.feat.open.Add(-1)
			defer stop()
			defer o.cancel()
			s.relayUpdates("", o.uri, o.stream, func(u string) error {
				n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
					Method: string(mcp.MethodNotificationResourceUpdated),
					Params: mcp.NotificationParams{Meta: map[string]any{mcp.MetaKeySubscriptionID: id}, AdditionalFields: map[string]any{"uri": u}},
				}}
				select {
				case sess.NotificationChannel() <- n:
					return nil
				default:
					return errors.New("listen stream full")
				}
			})
		}()
	}
	return nil
}

// relayUpdates sends notifications/resources/updated to the session for
// every update the catalog streams.
func (s *Server) relayUpdates(id, uri string, stream grpc.ServerStreamingClient[catalogv1.SubscribeResourceResponse], send func(uri string) error) {
	for {
		m, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && status.Code(err) != codes.Canceled {
				s.logFeatureErr("resource subscription ended", err)
			}
			s.feat.mu.Lock()
			delete(s.feat.subs[id], uri)
			s.feat.mu.Unlock()
			return
		}
		if m.GetUpdatedUri() == "" {
			continue
		}
		if err := send(m.GetUpdatedUri()); err != nil {
			s.opts.Logger.Debug("mcp front door: resources/updated not delivered", "error", err)
		}
	}
}

func (s *Server) unsubscribeResource(id, uri string) {
	s.feat.mu.Lock()
	cancel := s.feat.subs[id][uri]
	delete(s.feat.subs[id], uri)
	s.feat.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// onFeatureSessionEnd ends the session's subscriptions and, through the
// catalog, the per-thread MCP sessions of its thread (DELETE or idle expiry).
func (s *Server) onFeatureSessionEnd(_ context.Context, sess server.ClientSession) {
	id := sess.SessionID()
	s.feat.mu.Lock()
	subs := s.feat.subs[id]
	delete(s.feat.subs, id)
	s.feat.mu.Unlock()
	for _, c := range subs {
		c()
	}
	p, ok := s.feat.principals.Get(id)
	s.feat.principals.Remove(id)
	if !ok {
		return
	}
	var threads []string
	prefix := id + "\x00"
	for _, k := range s.sessions.Keys() {
		if strings.HasPrefix(k, prefix) {
			if t, ok := s.sessions.Peek(k); ok {
				threads = append(threads, t)
			}
		}
	}
	for _, t := range threads {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			// Not bound to the front door's life: a session that ends as the
			// front door closes (stdio) still has its sessions closed, within
			// closeThreadWait.
			ctx, cancel := context.WithTimeout(s.actingFor(context.Background(), p), min(s.opts.CallTimeout, closeThreadWait))
			defer cancel()
			_, err := s.opts.Catalog.CloseThreadSessions(ctx, &catalogv1.CloseThreadSessionsRequest{ThreadId: t})
			switch {
			case err == nil:
			case status.Code(err) == codes.PermissionDenied:
				// `toolplane mcp` with a user token: the catalog refuses this
				// service-class call; the catalog's idle TTL closes them.
				s.opts.Logger.Info("mcp front door: the catalog refused closing the thread's MCP sessions", "error", err)
			default:
				s.logFeatureErr("closing the thread's MCP sessions", err)
			}
		}()
	}
}

// watchFeatures follows the catalog's resource and prompt list changes and
// sends list_changed to every session (reconnecting with a backoff).
func (s *Server) watchFeatures(ctx context.Context) {
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		stream, err := s.opts.Catalog.WatchFeatures(ctx, &catalogv1.WatchFeaturesRequest{})
		if err == nil {
			for {
				m, err := stream.Recv()
				if err != nil {
					break
				}
				backoff = 500 * time.Millisecond
				switch m.GetEvent() {
				case catalogv1.FeatureEvent_FEATURE_EVENT_RESOURCES_CHANGED:
					s.mcp.SendNotificationToAllClients(string(mcp.MethodNotificationResourcesListChanged), nil)
				case catalogv1.FeatureEvent_FEATURE_EVENT_PROMPTS_CHANGED:
					s.mcp.SendNotificationToAllClients(string(mcp.MethodNotificationPromptsListChanged), nil)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

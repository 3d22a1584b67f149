package catalog

// Resources, resource templates, prompts and completion re-exported for the
// runtime's MCP front door (docs/decisions/0161-front-door-resources-and-prompts.md).
//
// Exposed URIs: a resource of a server without tool_name_prefix keeps its
// URI; any other is `toolplane+mcp://<server, percent-encoded>/<original
// URI>` (also the fallback when an unprefixed URI is already taken by an
// earlier server in config order). The form is reversible without state
// (ParseExposedURI), keeps a URI template a template (the original's
// `{var}` expressions stay in the path) and never collides across servers.
// Prompts get names by the tool-name rules (catalognames.Assign over the
// prompts alone, config order): their own namespace.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
)

// ExposedScheme is the scheme of a namespaced resource URI.
const ExposedScheme = "toolplane+mcp"

const exposedPrefix = ExposedScheme + "://"

// maxURIBytes bounds a URI, template or prompt name in a request.
const maxURIBytes = 8 << 10

// ExposeURI returns the namespaced form of a server's original URI (or URI template).
func ExposeURI(server, original string) string {
	return exposedPrefix + url.PathEscape(server) + "/" + original
}

// ParseExposedURI reverses ExposeURI; ok is false for a URI not in that form.
func ParseExposedURI(uri string) (server, original string, ok bool) {
	rest, found := strings.CutPrefix(uri, exposedPrefix)
	if !found {
		return "", "", false
	}
	enc, orig, found := strings.Cut(rest, "/")
	if !found || enc == "" || orig == "" {
		return "", "", false
	}
	srv, err := url.PathUnescape(enc)
	if err != nil || srv == "" {
		return "", "", false
	}
	return srv, orig, true
}

// featView is the exposed resources, templates and prompts at one moment.
type featView struct {
	resources []*catalogv1.Resource
	templates []*catalogv1.ResourceTemplate
	prompts   []*catalogv1.Prompt
	// byURI maps an exposed URI to its resource; unprefixed the servers in
	// config order whose URIs are kept as written (for templates).
	byURI      map[string]*catalogv1.Resource
	unprefixed []unprefixedTemplate
	byPrompt   map[string]*catalogv1.Prompt
	byTemplate map[string]*catalogv1.ResourceTemplate
}

type unprefixedTemplate struct {
	server, template string
	re               *regexp.Regexp
}

// templateRE turns an RFC 6570 template into a matcher: literal text as
// is, each `{...}` expression any run of characters (reserved and fragment
// expansions included). It decides only which server owns an expanded URI.
func templateRE(t string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(t))
			break
		}
		j := strings.IndexByte(t[i:], '}')
		if j < 0 {
			b.WriteString(regexp.QuoteMeta(t))
			break
		}
		b.WriteString(regexp.QuoteMeta(t[:i]))
		b.WriteString(".*")
		t = t[i+j+1:]
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return regexp.MustCompile(`^$`)
	}
	return re
}

// replaceField returns raw (a JSON object) with key set to v.
func replaceField(raw json.RawMessage, key, v string) (string, map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", nil, err
	}
	b, _ := json.Marshal(v)
	m[key] = b
	out, err := json.Marshal(m)
	return string(out), m, err
}

func stringField(m map[string]json.RawMessage, key string) string {
	var s string
	_ = json.Unmarshal(m[key], &s)
	return s
}

// view builds the exposed lists of every server (featureState).
func (s *Server) view() *featView { return s.viewAs(viewer{all: true}) }

// viewAs builds the exposed lists in the namespace of the viewer
// (docs/decisions/0106-per-tenant-name-namespaces.md): from the READY
// servers it sees, those of scope `*` (every tenant or several) first, then
// the tenant's own, each group in config order. Collisions between exposed
// URIs, templates and prompt names are settled among these servers only:
// a tenant's server is never renamed, nor its URI prefixed, because another
// tenant's server holds the name, and a server of scope `*` wins over a
// tenant's.
func (s *Server) viewAs(vw viewer) *featView {
	statuses := s.mgr.Statuses()
	ordered := make([]catalogmcp.Status, 0, len(statuses))
	for _, own := range []bool{false, true} {
		for _, st := range statuses {
			if (st.Config.NameScope() != globalScope) == own && vw.sees(st.Config.Tenants) {
				ordered = append(ordered, st)
			}
		}
	}
	v := &featView{byURI: map[string]*catalogv1.Resource{}, byPrompt: map[string]*catalogv1.Prompt{},
		byTemplate: map[string]*catalogv1.ResourceTemplate{}}
	type promptSrc struct {
		server, original string
		raw              json.RawMessage
	}
	var prompts []promptSrc
	var originals []catalognames.Original
	takenTemplates := map[string]bool{}
	for _, st := range ordered {
		sup, ok := s.mgr.Supervisor(st.Name)
		if !ok {
			continue
		}
		f := sup.Features()
		cfg := st.Config
		prefixed := cfg.Prefixed()
		for _, raw := range f.Resources {
			var m map[string]json.RawMessage
			if json.Unmarshal(raw, &m) != nil {
				continue
			}
			orig := stringField(m, "uri")
			if orig == "" || len(orig) > maxURIBytes {
				continue
			}
			exp := orig
			if prefixed || v.byURI[orig] != nil || strings.HasPrefix(orig, exposedPrefix) {
				exp = ExposeURI(st.Name, orig)
			}
			if v.byURI[exp] != nil {
				continue // the server listed the URI twice
			}
			js, m2, err := replaceField(raw, "uri", exp)
			if err != nil {
				continue
			}
			r := &catalogv1.Resource{Uri: exp, Server: st.Name, OriginalUri: orig, Name: stringField(m2, "name"), Json: js}
			v.resources = append(v.resources, r)
			v.byURI[exp] = r
		}
		for _, raw := range f.Templates {
			var m map[string]json.RawMessage
			if json.Unmarshal(raw, &m) != nil {
				continue
			}
			orig := stringField(m, "uriTemplate")
			if orig == "" || len(orig) > maxURIBytes {
				continue
			}
			exp := orig
			if prefixed || takenTemplates[orig] || strings.HasPrefix(orig, exposedPrefix) {
				exp = ExposeURI(st.Name, orig)
			}
			if takenTemplates[exp] {
				continue
			}
			takenTemplates[exp] = true
			if exp == orig {
				v.unprefixed = append(v.unprefixed, unprefixedTemplate{server: st.Name, template: orig, re: templateRE(orig)})
			}
			js, m2, err := replaceField(raw, "uriTemplate", exp)
			if err != nil {
				continue
			}
			t := &catalogv1.ResourceTemplate{UriTemplate: exp, Server: st.Name, OriginalUriTemplate: orig, Name: stringField(m2, "name"), Json: js}
			v.templates = append(v.templates, t)
			v.byTemplate[exp] = t
		}
		for _, raw := range f.Prompts {
			var m map[string]json.RawMessage
			if json.Unmarshal(raw, &m) != nil {
				continue
			}
			name := stringField(m, "name")
			if name == "" || len(name) > maxURIBytes {
				continue
			}
			prompts = append(prompts, promptSrc{st.Name, name, raw})
			originals = append(originals, catalognames.Original{Server: st.Name, Tool: name, Prefixed: prefixed})
		}
	}
	for i, a := range catalognames.Assign(originals) {
		p := prompts[i]
		js, _, err := replaceField(p.raw, "name", a.Name)
		if err != nil {
			continue
		}
		pr := &catalogv1.Prompt{Name: a.Name, Server: p.server, OriginalName: p.original, Json: js}
		v.prompts = append(v.prompts, pr)
		v.byPrompt[a.Name] = pr
	}
	return v
}

// resolveURI finds the server and original URI of an exposed URI: the
// namespaced form, a listed unprefixed URI, or an expansion of an
// unprefixed template (first server in config order).
func (v *featView) resolveURI(uri string) (server, original string, ok bool) {
	if r := v.byURI[uri]; r != nil {
		return r.Server, r.OriginalUri, true
	}
	if srv, orig, ok := ParseExposedURI(uri); ok {
		return srv, orig, true
	}
	for _, t := range v.unprefixed {
		if t.re.MatchString(uri) {
			return t.server, uri, true
		}
	}
	return "", "", false
}

// exposeContentURIs rewrites the `uri` of every resource content of a
// server's result (contents[], and messages[].content.resource / resource
// links) to the exposed form, so that the client can read it again.
func (s *Server) exposeContentURIs(v *featView, server string, raw json.RawMessage) (json.RawMessage, error) {
	sup, ok := s.mgr.Supervisor(server)
	if !ok {
		return raw, nil
	}
	cfg := sup.Status().Config
	expose := func(orig string) string {
		if orig == "" {
			return orig
		}
		// A URI already in the exposed form is wrapped again, so that a
		// server cannot pass another server's URI off as its own.
		if !cfg.Prefixed() && !strings.HasPrefix(orig, exposedPrefix) {
			if r := v.byURI[orig]; r == nil || r.Server == server {
				return orig
			}
		}
		return ExposeURI(server, orig)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var walkContent func(c any)
	walkContent = func(c any) {
		m, ok := c.(map[string]any)
		if !ok {
			return
		}
		if t, _ := m["type"].(string); t == "resource_link" {
			if u, ok := m["uri"].(string); ok {
				m["uri"] = expose(u)
			}
		}
		if r, ok := m["resource"].(map[string]any); ok {
			if u, ok := r["uri"].(string); ok {
				r["uri"] = expose(u)
			}
		}
	}
	if top, ok := doc.(map[string]any); ok {
		if cs, ok := top["contents"].([]any); ok {
			for _, c := range cs {
				if m, ok := c.(map[string]any); ok {
					if u, ok := m["uri"].(string); ok {
						m["uri"] = expose(u)
					}
				}
			}
		}
		if ms, ok := top["messages"].([]any); ok {
			for _, msg := range ms {
				if m, ok := msg.(map[string]any); ok {
					walkContent(m["content"])
				}
			}
		}
	}
	return json.Marshal(doc)
}

// visibleFeatures keeps the items of servers the caller sees: a
// tenant-scoped server's resources and prompts exist only for its tenants
// (docs/decisions/0105-tenant-scoped-servers.md).
func visibleFeatures[T interface{ GetServer() string }](s *Server, ctx context.Context, in []T) []T {
	v := viewerOf(ctx)
	if v.all {
		return in
	}
	snap := s.snap.Load()
	out := make([]T, 0, len(in))
	for _, x := range in {
		if v.seesServer(snap, x.GetServer()) {
			out = append(out, x)
		}
	}
	return out
}

// seesFeatureServer reports whether the caller sees server (visibility.go).
func (s *Server) seesFeatureServer(ctx context.Context, server string) bool {
	return viewerOf(ctx).seesServer(s.snap.Load(), server)
}

// ListResources lists every READY server's resources with exposed URIs.
func (s *Server) ListResources(ctx context.Context, _ *catalogv1.ListResourcesRequest) (*catalogv1.ListResourcesResponse, error) {
	return &catalogv1.ListResourcesResponse{Resources: visibleFeatures(s, ctx, s.viewAs(viewerOf(ctx)).resources)}, nil
}

// ListResourceTemplates lists every READY server's resource templates.
func (s *Server) ListResourceTemplates(ctx context.Context, _ *catalogv1.ListResourceTemplatesRequest) (*catalogv1.ListResourceTemplatesResponse, error) {
	return &catalogv1.ListResourceTemplatesResponse{ResourceTemplates: visibleFeatures(s, ctx, s.viewAs(viewerOf(ctx)).templates)}, nil
}

// ListPrompts lists every READY server's prompts with exposed names.
func (s *Server) ListPrompts(ctx context.Context, _ *catalogv1.ListPromptsRequest) (*catalogv1.ListPromptsResponse, error) {
	return &catalogv1.ListPromptsResponse{Prompts: visibleFeatures(s, ctx, s.viewAs(viewerOf(ctx)).prompts)}, nil
}

// scopeKey is the per-scope session key of the caller (see call in tools.go).
func scopeKey(ctx context.Context, cc *typev1.CallContext) catalogmcp.ScopeKey {
	key := catalogmcp.ScopeKey{}
	if pr := auth.EffectivePrincipal(ctx); pr != nil {
		key.Tenant, key.Subject = pr.GetTenant(), pr.GetSubject()
		if key.Tenant == "" {
			key.Tenant = "default"
		}
	}
	key.Thread = auth.TrustedCallContext(ctx, cc).GetThreadId()
	return key
}

func checkRef(field, v string) error {
	if v == "" {
		return invalid(field, grpcx.ViolationRequired, "%s is required", field)
	}
	if len(v) > maxURIBytes {
		return invalid(field, grpcx.ViolationInvalid, "%s is %d bytes; at most %d", field, len(v), maxURIBytes)
	}
	return nil
}

// featureTimeout is the server's call timeout, else the request's, else the default.
func (s *Server) featureTimeout(server string, d *durationpb.Duration) time.Duration {
	if d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	if sup, ok := s.mgr.Supervisor(server); ok {
		exp := sup.Expanded()
		if t := exp.CallTimeout(); t > 0 {
			return t
		}
	}
	return s.cfg.DefaultToolCallTimeout
}

var errFeatureTimeout = errors.New("resource or prompt call timeout")

// featureError maps a failure of kind ("resource", "prompt") what.
func featureError(ctx, cctx context.Context, kind, what string, err error) error {
	var nr *catalogmcp.NotReadyError
	var rpc *catalogmcp.RPCError
	var na *catalogmcp.NeedsAuthError
	switch {
	case errors.As(err, &na):
		return statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_NEEDS_AUTH, map[string]string{"server": na.Server},
			"%s %q: server %s needs authorization: ask the user to connect %s", kind, what, na.Server, na.Server)
	case errors.As(err, &nr):
		return statusErr(codes.Unavailable, catalogv1.ErrorReason_ERROR_REASON_SERVER_UNAVAILABLE,
			map[string]string{"server": nr.Server, "state": "SERVER_STATE_" + nr.State.String()}, "%s %q: server %s is %s", kind, what, nr.Server, nr.State)
	case errors.Is(err, catalogmcp.ErrUnknownServer):
		return statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_SERVER_NOT_FOUND, nil, "%s %q: no such server", kind, what)
	case errors.Is(err, catalogmcp.ErrNoFeature), errors.Is(err, catalogmcp.ErrStatic):
		return statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_CALLABLE, nil, "%s %q: %v", kind, what, err)
	case errors.Is(context.Cause(cctx), errFeatureTimeout) && ctx.Err() == nil:
		return statusErr(codes.DeadlineExceeded, catalogv1.ErrorReason_ERROR_REASON_CALL_TIMEOUT, nil, "%s %q: timed out", kind, what)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s %q: cancelled", kind, what)
	case errors.As(err, &rpc) && (rpc.Code == mcp.RESOURCE_NOT_FOUND || rpc.Code == -32002):
		return statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR, nil, "%s %q: %s", kind, what, rpc.Message)
	case errors.As(err, &rpc) && rpc.Code == mcp.INVALID_PARAMS:
		return statusErr(codes.InvalidArgument, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR, nil, "%s %q: %s", kind, what, rpc.Message)
	case errors.As(err, &rpc):
		return statusErr(codes.Unavailable, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR, nil, "%s %q: %v", kind, what, rpc)
	}
	return grpcx.WithCause(grpcx.Status(codes.Unavailable, errorDomain, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR.String(), nil,
		fmt.Sprintf("%s %q: the MCP server failed; the cause is in the server log", kind, what)), err)
}

func resourceNotFound(uri string) error {
	return statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_FOUND, map[string]string{"uri": uri},
		"resource %q: no MCP server offers it", uri)
}

// checkSize refuses a result that would not fit in a message.
func (s *Server) checkSize(kind, what string, raw []byte) error {
	if len(raw) > s.maxMsg-4096 {
		return tooLarge(kind+" "+what, len(raw), s.maxMsg)
	}
	return nil
}

// ReadResource reads one resource on its server.
func (s *Server) ReadResource(ctx context.Context, req *catalogv1.ReadResourceRequest) (*catalogv1.ReadResourceResponse, error) {
	if err := checkRef("uri", req.GetUri()); err != nil {
		return nil, err
	}
	v := s.viewAs(viewerOf(ctx))
	server, orig, ok := v.resolveURI(req.GetUri())
	if !ok || !s.seesFeatureServer(ctx, server) {
		return nil, resourceNotFound(req.GetUri())
	}
	cctx, cancel := context.WithTimeoutCause(ctx, s.featureTimeout(server, req.GetTimeout()), errFeatureTimeout)
	defer cancel()
	var raw json.RawMessage
	err := s.mgr.WithSession(cctx, server, scopeKey(ctx, req.GetCallContext()), func(sess *catalogmcp.Session) error {
		var err error
		raw, err = sess.ReadResource(cctx, orig)
		return err
	})
	if err != nil {
		return nil, featureError(ctx, cctx, "resource", req.GetUri(), err)
	}
	raw = s.mgr.MaskResult(server, raw) // docs/decisions/0117-one-masking-facility.md
	if err := s.checkSize("resource", req.GetUri(), raw); err != nil {
		return nil, err
	}
	out, err := s.exposeContentURIs(v, server, raw)
	if err != nil {
		return nil, featureError(ctx, cctx, "resource", req.GetUri(), err)
	}
	return &catalogv1.ReadResourceResponse{Server: server, ResultJson: string(out)}, nil
}

// GetPrompt gets one prompt on its server.
func (s *Server) GetPrompt(ctx context.Context, req *catalogv1.GetPromptRequest) (*catalogv1.GetPromptResponse, error) {
	if err := checkRef("name", req.GetName()); err != nil {
		return nil, err
	}
	v := s.viewAs(viewerOf(ctx))
	p := v.byPrompt[req.GetName()]
	if p == nil || !s.seesFeatureServer(ctx, p.Server) {
		return nil, statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_FOUND, map[string]string{"prompt": req.GetName()},
			"prompt %q: no MCP server offers it", req.GetName())
	}
	cctx, cancel := context.WithTimeoutCause(ctx, s.featureTimeout(p.Server, req.GetTimeout()), errFeatureTimeout)
	defer cancel()
	var raw json.RawMessage
	err := s.mgr.WithSession(cctx, p.Server, scopeKey(ctx, req.GetCallContext()), func(sess *catalogmcp.Session) error {
		var err error
		raw, err = sess.GetPrompt(cctx, p.OriginalName, req.GetArguments())
		return err
	})
	if err != nil {
		return nil, featureError(ctx, cctx, "prompt", req.GetName(), err)
	}
	raw = s.mgr.MaskResult(p.Server, raw) // docs/decisions/0117-one-masking-facility.md
	if err := s.checkSize("prompt", req.GetName(), raw); err != nil {
		return nil, err
	}
	out, err := s.exposeContentURIs(v, p.Server, raw)
	if err != nil {
		return nil, featureError(ctx, cctx, "prompt", req.GetName(), err)
	}
	return &catalogv1.GetPromptResponse{Server: p.Server, ResultJson: string(out)}, nil
}

// Complete relays completion/complete to the server owning the reference.
func (s *Server) Complete(ctx context.Context, req *catalogv1.CompleteRequest) (*catalogv1.CompleteResponse, error) {
	if (req.GetPrompt() == "") == (req.GetUriTemplate() == "") {
		return nil, invalid("prompt", grpcx.ViolationInvalid, "name exactly one of prompt and uri_template")
	}
	if err := checkRef("argument_name", req.GetArgumentName()); err != nil {
		return nil, err
	}
	v := s.viewAs(viewerOf(ctx))
	var server, what string
	var ref any
	if req.GetPrompt() != "" {
		what = req.GetPrompt()
		p := v.byPrompt[what]
		if p == nil || !s.seesFeatureServer(ctx, p.Server) {
			return nil, statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_FOUND, map[string]string{"prompt": what}, "prompt %q: no MCP server offers it", what)
		}
		server, ref = p.Server, mcp.PromptReference{Type: "ref/prompt", Name: p.OriginalName}
	} else {
		what = req.GetUriTemplate()
		if err := checkRef("uri_template", what); err != nil {
			return nil, err
		}
		var orig string
		if t := v.byTemplate[what]; t != nil {
			server, orig = t.Server, t.OriginalUriTemplate
		} else if srv, o, ok := v.resolveURI(what); ok {
			server, orig = srv, o
		} else {
			return nil, resourceNotFound(what)
		}
		if !s.seesFeatureServer(ctx, server) {
			return nil, resourceNotFound(what)
		}
		ref = mcp.ResourceReference{Type: "ref/resource", URI: orig}
	}
	cctx, cancel := context.WithTimeoutCause(ctx, s.featureTimeout(server, nil), errFeatureTimeout)
	defer cancel()
	var raw json.RawMessage
	arg := mcp.CompleteArgument{Name: req.GetArgumentName(), Value: req.GetArgumentValue()}
	cc := mcp.CompleteContext{Arguments: req.GetContextArguments()}
	err := s.mgr.WithSession(cctx, server, scopeKey(ctx, req.GetCallContext()), func(sess *catalogmcp.Session) error {
		var err error
		raw, err = sess.Complete(cctx, ref, arg, cc)
		return err
	})
	if err != nil {
		return nil, featureError(ctx, cctx, "completion", what, err)
	}
	raw = s.mgr.MaskResult(server, raw) // docs/decisions/0117-one-masking-facility.md
	if err := s.checkSize("completion", what, raw); err != nil {
		return nil, err
	}
	return &catalogv1.CompleteResponse{Server: server, ResultJson: string(raw)}, nil
}

// SubscribeResource keeps a subscription open while the stream lives.
func (s *Server) SubscribeResource(req *catalogv1.SubscribeResourceRequest, stream grpc.ServerStreamingServer[catalogv1.SubscribeResourceResponse]) error {
	ctx := stream.Context()
	if err := checkRef("uri", req.GetUri()); err != nil {
		return err
	}
	v := s.viewAs(viewerOf(ctx))
	server, orig, ok := v.resolveURI(req.GetUri())
	if !ok || !s.seesFeatureServer(ctx, server) {
		return resourceNotFound(req.GetUri())
	}
	hctx, cancel := context.WithTimeoutCause(ctx, s.featureTimeout(server, nil), errFeatureTimeout)
	defer cancel()
	sess, release, err := s.mgr.Hold(hctx, server, scopeKey(ctx, req.GetCallContext()))
	if err != nil {
		return featureError(ctx, hctx, "resource", req.GetUri(), err)
	}
	defer release()
	updates := make(chan struct{}, 1)
	unsub, err := sess.SubscribeResource(hctx, orig, func() {
		select {
		case updates <- struct{}{}:
		default: // coalesced: one pending notice says "changed"
		}
	})
	if err != nil {
		return featureError(ctx, hctx, "resource", req.GetUri(), err)
	}
	defer unsub()
	if err := stream.Send(&catalogv1.SubscribeResourceResponse{Subscribed: true}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Dead():
			return statusErr(codes.Unavailable, catalogv1.ErrorReason_ERROR_REASON_SERVER_UNAVAILABLE, map[string]string{"server": server},
				"resource %q: the server's session ended; subscribe again", req.GetUri())
		case <-updates:
			if err := stream.Send(&catalogv1.SubscribeResourceResponse{UpdatedUri: req.GetUri()}); err != nil {
				return err
			}
		}
	}
}

// featureHub fans feature changes out to WatchFeatures streams; a change
// is announced only when the exposed lists actually differ.
type featureHub struct {
	mu        sync.Mutex
	watchers  map[chan catalogv1.FeatureEvent]struct{}
	resources string
	prompts   string
}

func (s *Server) featureState() (resources, prompts string) {
	v := s.view() // every namespace: a change in any is announced
	var rb, pb strings.Builder
	for _, r := range v.resources {
		rb.WriteString(r.Json)
		rb.WriteByte(0)
	}
	rb.WriteByte(1)
	for _, t := range v.templates {
		rb.WriteString(t.Json)
		rb.WriteByte(0)
	}
	for _, p := range v.prompts {
		pb.WriteString(p.Json)
		pb.WriteByte(0)
	}
	return rb.String(), pb.String()
}

// featuresChanged recomputes the exposed lists and tells every watcher
// what changed (called on any server change; cheap when nothing did).
func (s *Server) featuresChanged() {
	r, p := s.featureState()
	h := &s.feats
	h.mu.Lock()
	defer h.mu.Unlock()
	var evs []catalogv1.FeatureEvent
	if r != h.resources {
		evs = append(evs, catalogv1.FeatureEvent_FEATURE_EVENT_RESOURCES_CHANGED)
	}
	if p != h.prompts {
		evs = append(evs, catalogv1.FeatureEvent_FEATURE_EVENT_PROMPTS_CHANGED)
	}
	h.resources, h.prompts = r, p
	for ch := range h.watchers {
		for _, ev := range evs {
			select {
			case ch <- ev:
			default: // a slow watcher misses nothing that matters: it re-lists
			}
		}
	}
}

// WatchFeatures streams resource and prompt list changes.
func (s *Server) WatchFeatures(_ *catalogv1.WatchFeaturesRequest, stream grpc.ServerStreamingServer[catalogv1.WatchFeaturesResponse]) error {
	ch := make(chan catalogv1.FeatureEvent, 8)
	h := &s.feats
	h.mu.Lock()
	if h.watchers == nil {
		h.watchers = map[chan catalogv1.FeatureEvent]struct{}{}
	}
	h.watchers[ch] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.watchers, ch)
		h.mu.Unlock()
	}()
	if err := stream.Send(&catalogv1.WatchFeaturesResponse{Event: catalogv1.FeatureEvent_FEATURE_EVENT_SNAPSHOT}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-ch:
			if err := stream.Send(&catalogv1.WatchFeaturesResponse{Event: ev}); err != nil {
				return err
			}
		}
	}
}

// CloseThreadSessions closes the per-thread sessions of a thread of the
// effective principal.
func (s *Server) CloseThreadSessions(ctx context.Context, req *catalogv1.CloseThreadSessionsRequest) (*catalogv1.CloseThreadSessionsResponse, error) {
	if err := checkRef("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	key := scopeKey(ctx, nil)
	n := s.mgr.CloseThread(key.Tenant, key.Subject, req.GetThreadId())
	return &catalogv1.CloseThreadSessionsResponse{Closed: int32(n)}, nil
}

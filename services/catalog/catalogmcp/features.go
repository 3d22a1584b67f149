package catalogmcp

// Resources, resource templates, prompts and completion of an MCP server
// (docs/decisions/0161-front-door-resources-and-prompts.md): discovered on
// the supervisor's discovery session at connect and on
// notifications/{resources,prompts}/list_changed, read through the same
// session routing as tool calls (shared, per_user, per_thread), and
// subscribed with reference counts per session. Objects and results are
// kept as the raw JSON the server sent.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// ErrNoFeature is returned when the server does not offer what was asked
// (no resources, prompts, completions or subscriptions capability).
var ErrNoFeature = errors.New("not offered by the server")

// sessFeat is the per-session state of resources and prompts.
type sessFeat struct {
	mu       sync.Mutex
	onChange func() // list_changed of resources or prompts (discovery sessions)
	subs     map[string]map[int]func()
	next     int
	listen   func() // stops the current subscriptions/listen (modern protocol)
	listenTo mcp.SubscriptionFilter
}

// Capabilities returns the capabilities the server announced.
func (s *Session) Capabilities() mcp.ServerCapabilities { return s.caps }

// onFeatureNotification handles the notifications of resources and prompts.
func (s *Session) onFeatureNotification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationResourcesListChanged), string(mcp.MethodNotificationPromptsListChanged):
		s.feat.mu.Lock()
		f := s.feat.onChange
		s.feat.mu.Unlock()
		if f != nil {
			go f()
		}
	case string(mcp.MethodNotificationResourceUpdated):
		uri, _ := n.Params.AdditionalFields["uri"].(string)
		s.feat.mu.Lock()
		var fns []func()
		for _, f := range s.feat.subs[uri] {
			fns = append(fns, f)
		}
		s.feat.mu.Unlock()
		for _, f := range fns {
			f()
		}
	}
}

// listRaw collects the raw items under key of every page a typed list call
// received (the sink captures each page's result).
func (s *Session) listRaw(ctx context.Context, key string, call func(context.Context) error) ([]json.RawMessage, error) {
	ctx, sink := withSink(ctx)
	if err := call(ctx); err != nil {
		return nil, s.wrap(err)
	}
	sink.mu.Lock()
	pages := sink.results
	sink.mu.Unlock()
	var out []json.RawMessage
	for _, page := range pages {
		var p map[string]json.RawMessage
		if err := json.Unmarshal(page, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		var items []json.RawMessage
		if v, ok := p[key]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
		out = append(out, items...)
	}
	return out, nil
}

// ListResources reads every page of resources/list (raw Resource objects).
func (s *Session) ListResources(ctx context.Context) ([]json.RawMessage, error) {
	if s.caps.Resources == nil {
		return nil, nil
	}
	return s.listRaw(ctx, "resources", func(ctx context.Context) error {
		_, err := s.client.ListResources(ctx, mcp.ListResourcesRequest{})
		return err
	})
}

// ListResourceTemplates reads every page of resources/templates/list.
func (s *Session) ListResourceTemplates(ctx context.Context) ([]json.RawMessage, error) {
	if s.caps.Resources == nil {
		return nil, nil
	}
	return s.listRaw(ctx, "resourceTemplates", func(ctx context.Context) error {
		_, err := s.client.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
		return err
	})
}

// ListPrompts reads every page of prompts/list.
func (s *Session) ListPrompts(ctx context.Context) ([]json.RawMessage, error) {
	if s.caps.Prompts == nil {
		return nil, nil
	}
	return s.listRaw(ctx, "prompts", func(ctx context.Context) error {
		_, err := s.client.ListPrompts(ctx, mcp.ListPromptsRequest{})
		return err
	})
}

// rawCall runs one typed request and returns the raw result the server
// sent (mcp-go's typed parse may drop fields or reject content it does not
// know; the raw result is what counts).
func (s *Session) rawCall(ctx context.Context, what string, call func(context.Context) error) (json.RawMessage, error) {
	ctx, sink := withSink(ctx)
	ch := make(chan error, 1)
	go func() { ch <- call(ctx) }()
	var err error
	select {
	case err = <-ch:
	case <-s.dead:
		return nil, &SessionError{Err: s.Err()}
	}
	sink.mu.Lock()
	results := sink.results
	sink.mu.Unlock()
	if len(results) == 0 {
		if err == nil {
			err = errors.New(what + ": no result")
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.wrapFeature(err)
	}
	return results[len(results)-1], nil
}

// wrapFeature is wrap with the JSON-RPC codes of resources and prompts kept.
func (s *Session) wrapFeature(err error) error {
	if errors.Is(err, mcp.ErrResourceNotFound) {
		return &RPCError{Code: mcp.RESOURCE_NOT_FOUND, Message: err.Error()}
	}
	return s.wrap(err)
}

// ReadResource runs resources/read of an original URI.
func (s *Session) ReadResource(ctx context.Context, uri string) (json.RawMessage, error) {
	if s.caps.Resources == nil {
		return nil, ErrNoFeature
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	return s.rawCall(ctx, "resources/read", func(ctx context.Context) error {
		_, err := s.client.ReadResource(ctx, req)
		return err
	})
}

// GetPrompt runs prompts/get of an original prompt name.
func (s *Session) GetPrompt(ctx context.Context, name string, args map[string]string) (json.RawMessage, error) {
	if s.caps.Prompts == nil {
		return nil, ErrNoFeature
	}
	req := mcp.GetPromptRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	return s.rawCall(ctx, "prompts/get", func(ctx context.Context) error {
		_, err := s.client.GetPrompt(ctx, req)
		return err
	})
}

// Complete runs completion/complete; ref is an mcp.PromptReference or
// mcp.ResourceReference with original names.
func (s *Session) Complete(ctx context.Context, ref any, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (json.RawMessage, error) {
	if s.caps.Completions == nil {
		return nil, ErrNoFeature
	}
	req := mcp.CompleteRequest{}
	req.Params.Ref, req.Params.Argument, req.Params.Context = ref, arg, cctx
	return s.rawCall(ctx, "completion/complete", func(ctx context.Context) error {
		_, err := s.client.Complete(ctx, req)
		return err
	})
}

// modern reports a 2026-07-28 (sessionless) session.
func (s *Session) modern() bool { return mcp.IsModernProtocol(s.ProtocolVersion) }

// SubscribeResource subscribes to an original URI: fn runs on every
// notifications/resources/updated of it until cancel is called. The first
// subscriber of a URI sends resources/subscribe (or, on protocol
// 2026-07-28, re-opens subscriptions/listen with the URI in its filter);
// the last cancel unsubscribes.
func (s *Session) SubscribeResource(ctx context.Context, uri string, fn func()) (cancel func(), err error) {
	if s.caps.Resources == nil || !s.caps.Resources.Subscribe {
		return nil, ErrNoFeature
	}
	s.feat.mu.Lock()
	first := len(s.feat.subs[uri]) == 0
	if s.feat.subs == nil {
		s.feat.subs = map[string]map[int]func(){}
	}
	if s.feat.subs[uri] == nil {
		s.feat.subs[uri] = map[int]func(){}
	}
	id := s.feat.next
	s.feat.next++
	s.feat.subs[uri][id] = fn
	s.feat.mu.Unlock()
	remove := func() (last bool) {
		s.feat.mu.Lock()
		defer s.feat.mu.Unlock()
		delete(s.feat.subs[uri], id)
		if len(s.feat.subs[uri]) == 0 {
			delete(s.feat.subs, uri)
			return true
		}
		return false
	}
	if first {
		if err := s.syncSubscription(ctx, uri, true); err != nil {
			remove()
			return nil, s.wrapFeature(err)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if remove() {
				c, done := context.WithTimeout(context.Background(), 5*time.Second)
				defer done()
				_ = s.syncSubscription(c, uri, false)
			}
		})
	}, nil
}

// syncSubscription tells the server that uri is (on) or no longer (off)
// subscribed.
func (s *Session) syncSubscription(ctx context.Context, uri string, on bool) error {
	if !s.modern() {
		if on {
			return s.client.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}})
		}
		return s.client.Unsubscribe(ctx, mcp.UnsubscribeRequest{Params: mcp.UnsubscribeParams{URI: uri}})
	}
	s.feat.mu.Lock()
	f := s.feat.listenTo
	f.ResourceSubscriptions = nil
	for u := range s.feat.subs {
		f.ResourceSubscriptions = append(f.ResourceSubscriptions, u)
	}
	slices.Sort(f.ResourceSubscriptions)
	s.feat.mu.Unlock()
	return s.relisten(f)
}

// relisten (re)opens the subscriptions/listen stream of a 2026-07-28
// session with filter f (closes it when f is empty).
func (s *Session) relisten(f mcp.SubscriptionFilter) error {
	s.feat.mu.Lock()
	defer s.feat.mu.Unlock()
	if s.feat.listen != nil {
		s.feat.listen()
		s.feat.listen = nil
	}
	if f.IsEmpty() {
		return nil
	}
	stop, err := s.client.ListenAsync(context.Background(), f, nil)
	if err != nil {
		return err
	}
	s.feat.listen = stop
	return nil
}

// startFeatureListen opens the list-change stream of a discovery session on
// protocol 2026-07-28 (older versions deliver list_changed unasked).
func (s *Session) startFeatureListen() {
	if !s.modern() {
		return
	}
	f := mcp.SubscriptionFilter{
		ToolsListChanged:     s.caps.Tools != nil && s.caps.Tools.ListChanged,
		ResourcesListChanged: s.caps.Resources != nil && s.caps.Resources.ListChanged,
		PromptsListChanged:   s.caps.Prompts != nil && s.caps.Prompts.ListChanged,
	}
	s.feat.mu.Lock()
	s.feat.listenTo = f
	s.feat.mu.Unlock()
	_ = s.relisten(f)
}

// stopFeatures closes the listen stream (on Close).
func (s *Session) stopFeatures() {
	s.feat.mu.Lock()
	stop := s.feat.listen
	s.feat.listen = nil
	s.feat.mu.Unlock()
	if stop != nil {
		go stop()
	}
}

// Features are a server's resources, templates and prompts as listed.
type Features struct {
	// Resources, Templates and Prompts are the raw MCP objects.
	Resources, Templates, Prompts []json.RawMessage
	// Subscribe and Completions report the capabilities.
	Subscribe, Completions bool
	// Version increases whenever the lists change.
	Version uint64
}

// featState is a supervisor's discovered features.
type featState struct {
	mu  sync.Mutex
	cur Features
}

// Features returns the last discovered features, or none when the server is
// not READY (a down server's resources cannot be read).
func (s *Supervisor) Features() Features {
	s.mu.Lock()
	ready := s.st.State == StateReady
	s.mu.Unlock()
	if !ready {
		return Features{}
	}
	s.feat.mu.Lock()
	defer s.feat.mu.Unlock()
	return s.feat.cur
}

// Bounds of a server's features: listing waits at most featureListTimeout
// (a server that hangs on resources/list does not hold its tools back), and
// at most maxFeatureItems objects of each kind of at most maxFeatureBytes
// each are kept (the rest is dropped and logged).
const (
	featureListTimeout = 10 * time.Second
	maxFeatureItems    = 10000
	maxFeatureBytes    = 64 << 10
)

// capItems applies the bounds to one kind.
func (s *Supervisor) capItems(kind string, items []json.RawMessage) []json.RawMessage {
	out := items[:0:0]
	dropped := 0
	for _, it := range items {
		if len(it) > maxFeatureBytes || len(out) >= maxFeatureItems {
			dropped++
			continue
		}
		out = append(out, it)
	}
	if dropped > 0 {
		s.log.Warn("catalog: MCP server lists too many or too large "+kind+"; some are not exposed", "dropped", dropped,
			"max_items", maxFeatureItems, "max_bytes", maxFeatureBytes)
	}
	return out
}

// refreshFeatures lists the features on sess and stores them; a failure
// keeps the last lists (logged).
func (s *Supervisor) refreshFeatures(ctx context.Context, sess *Session) {
	ctx, cancel := context.WithTimeout(ctx, featureListTimeout)
	defer cancel()
	s.feat.mu.Lock()
	last := s.feat.cur
	s.feat.mu.Unlock()
	// Each kind is listed on its own: one failing method keeps only its own
	// last list, and a method the server does not implement (-32601, common
	// for resources/templates/list although resources are declared) lists
	// nothing of that kind rather than hiding the others.
	list := func(kind string, fn func(context.Context) ([]json.RawMessage, error), prev []json.RawMessage) []json.RawMessage {
		items, err := fn(ctx)
		switch {
		case err == nil:
			return items
		case isMethodNotFound(err):
			return nil
		default:
			s.log.Warn("catalog: MCP server "+kind+" listing failed; keeping the last list", "err", s.mask.mask(err.Error()))
			return prev
		}
	}
	var f Features
	f.Resources = list("resources/list", sess.ListResources, last.Resources)
	f.Templates = list("resources/templates/list", sess.ListResourceTemplates, last.Templates)
	f.Prompts = list("prompts/list", sess.ListPrompts, last.Prompts)
	f.Resources, f.Templates, f.Prompts = s.capItems("resources", f.Resources), s.capItems("resource templates", f.Templates), s.capItems("prompts", f.Prompts)
	caps := sess.Capabilities()
	f.Subscribe = caps.Resources != nil && caps.Resources.Subscribe
	f.Completions = caps.Completions != nil
	s.feat.mu.Lock()
	old := s.feat.cur
	same := reflect.DeepEqual(old.Resources, f.Resources) && reflect.DeepEqual(old.Templates, f.Templates) &&
		reflect.DeepEqual(old.Prompts, f.Prompts) && old.Subscribe == f.Subscribe && old.Completions == f.Completions
	f.Version = old.Version
	if !same {
		f.Version++
	}
	s.feat.cur = f
	s.feat.mu.Unlock()
	if !same {
		if len(f.Resources)+len(f.Templates)+len(f.Prompts) > 0 {
			s.log.Info("catalog: MCP server resources and prompts listed", "resources", len(f.Resources), "templates", len(f.Templates), "prompts", len(f.Prompts))
		}
		if s.opts.featuresChanged != nil {
			s.opts.featuresChanged()
		}
	}
}

// onFeaturesListChanged re-lists the features of the current session after
// a list_changed notification.
func (s *Supervisor) onFeaturesListChanged() {
	s.mu.Lock()
	sess := s.sess
	s.mu.Unlock()
	if sess == nil {
		return
	}
	ctx, cancel := s.initCtx(context.Background())
	defer cancel()
	s.refreshFeatures(ctx, sess)
}

// WithSession runs fn on the session a call of server with key would use
// (the shared session, or the per-user / per-thread one; see Call), retrying
// once on a new session when the first one failed as a connection.
func (m *Manager) WithSession(ctx context.Context, server string, key ScopeKey, fn func(*Session) error) (err error) {
	sup, ok := m.Supervisor(server)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	defer func() { err = sup.maskErr(err) }()
	if sup.st.Type == catalogconfig.TypeStatic {
		return ErrStatic
	}
	cfg := sup.Expanded()
	if cfg.Scope() == catalogconfig.ScopeShared {
		sess, err := sup.Session()
		if err != nil {
			return err
		}
		err = fn(sess)
		var se *SessionError
		if errors.As(err, &se) && ctx.Err() == nil && sup.st.Type != catalogconfig.TypeStdio {
			sup.RequestReconnect(sess)
			if sess, err = sup.waitReady(ctx, sess); err != nil {
				return err
			}
			return fn(sess)
		}
		return err
	}
	if _, err := sup.Session(); err != nil && (sup.oauth == nil || !sup.oauth.perPrincipal(cfg)) {
		return err
	}
	key.Server = server
	if cfg.Scope() == catalogconfig.ScopePerUser {
		key.Thread = ""
	}
	dial := func(dctx context.Context) (*Session, error) {
		ictx, cancel := sup.initCtx(dctx)
		defer cancel()
		opts := m.opts.Options
		opts.featuresChanged = nil
		if sup.oauth != nil {
			var err error
			if opts, _, err = sup.oauth.connectOptions(opts, cfg, key.Tenant, key.Subject); err != nil {
				return nil, err
			}
		}
		return Connect(ictx, cfg, opts, nil)
	}
	for attempt := 0; ; attempt++ {
		sess, release, err := m.pool.Acquire(ctx, key, dial)
		if err != nil {
			return err
		}
		err = fn(sess)
		release()
		var se *SessionError
		if errors.As(err, &se) {
			m.pool.Drop(key, sess)
			if attempt == 0 && ctx.Err() == nil {
				continue
			}
		}
		return err
	}
}

// Hold acquires key's session of a per-scope server (as WithSession) and
// keeps it out of eviction until release is called: a subscription lives on
// the session it was made on. For a shared server it returns the shared
// session and a no-op release.
func (m *Manager) Hold(ctx context.Context, server string, key ScopeKey) (*Session, func(), error) {
	var held *Session
	var release func()
	sup, ok := m.Supervisor(server)
	if !ok {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	cfg := sup.Expanded()
	if cfg.Scope() == catalogconfig.ScopeShared {
		sess, err := sup.Session()
		if err != nil {
			return nil, nil, sup.maskErr(err)
		}
		return sess, func() {}, nil
	}
	err := m.WithSession(ctx, server, key, func(s *Session) error { held = s; return nil })
	if err != nil {
		return nil, nil, err
	}
	key.Server = server
	if cfg.Scope() == catalogconfig.ScopePerUser {
		key.Thread = ""
	}
	// Take a reference that outlives WithSession's.
	sess, rel, err := m.pool.Acquire(ctx, key, func(context.Context) (*Session, error) { return held, nil })
	if err != nil {
		return nil, nil, err
	}
	release = rel
	return sess, release, nil
}

// CloseThread closes the per-thread sessions of (tenant, subject, thread)
// on every server and returns how many were closed (busy ones are closed
// when their calls end).
func (m *Manager) CloseThread(tenant, subject, thread string) int {
	if thread == "" {
		return 0
	}
	return m.pool.removeWhere(func(k ScopeKey) bool {
		return k.Thread == thread && k.Tenant == tenant && k.Subject == subject
	})
}

// removeWhere removes (closing idle ones, detaching busy ones) every entry
// whose key matches and returns how many matched.
func (p *Pool) removeWhere(match func(ScopeKey) bool) int {
	p.mu.Lock()
	var victims []*Session
	n := 0
	for k, pe := range p.entries {
		if !match(k) {
			continue
		}
		n++
		p.lru.Remove(pe.elem)
		delete(p.entries, k)
		if pe.refs == 0 {
			victims = append(victims, pe.sess)
		}
	}
	p.mu.Unlock()
	p.closeAll(victims)
	return n
}

// isMethodNotFound reports a JSON-RPC -32601 answer.
func isMethodNotFound(err error) bool {
	return errors.Is(err, mcp.ErrMethodNotFound) || strings.Contains(strings.ToLower(err.Error()), "method not found")
}

package runtimemcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// Tool-list change notices (docs/architecture.md §1, "MCP front door").
//
// A subscriber is a client that can be told its tool list changed: a
// session-based MCP session that listed its tools, or a 2026-07-28
// subscriptions/listen stream (SEP-2575) while it is open. Each remembers
// the fingerprint of the tools its thread bound when it last looked; the
// notice notifications/tools/list_changed is sent when
//
//   - a tools/call on the subscriber's thread promoted tools (tool_search),
//     and
//   - the catalog changed upstream (one WatchCatalog stream over
//     Options.Catalog, the suite's service credential: the event only says
//     that something changed) and re-assembling the subscriber's thread
//     with the subscriber's own credential gives another fingerprint — a server that lost tools, went away or came
//     back; a catalog change that leaves the thread's tools as they were
//     sends nothing.

// recheckDelays are when, after a catalog event, the subscribers' threads
// are re-assembled: the runtime drops its assembly cache on the same event
// through its own watch, so a first look may still see the old tools.
var recheckDelays = []time.Duration{150 * time.Millisecond, 1500 * time.Millisecond}

// watchRetry is the pause before a failed catalog watch is opened again.
var watchRetry = 2 * time.Second

// subscriber is one client that receives tool-list change notices.
type subscriber struct {
	sess   server.ClientSession
	modern bool // a subscriptions/listen stream (2026-07-28)
	thread string
	authz  string // the Authorization value the runtime is called with

	mu sync.Mutex
	fp string // fingerprint of the tools last seen ("" = unknown)
}

// notifier holds the subscribers.
type notifier struct {
	mu   sync.Mutex
	subs map[server.ClientSession]*subscriber
}

func newNotifier() *notifier {
	return &notifier{subs: map[server.ClientSession]*subscriber{}}
}

// fingerprint identifies a tool list: the names, descriptions and schemas
// the client would see, in order.
func fingerprint(a *runtimev1.AssembleToolsResponse) string {
	h := sha256.New()
	for _, t := range toolsFrom(a) {
		b, _ := json.Marshal(t)
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// subscribe registers (or refreshes) sess as a subscriber of thread with
// the tools fingerprint fp. Past bindingCap subscribers a new one is
// refused (logged): notices are a convenience, memory is bounded.
func (s *Server) subscribe(sess server.ClientSession, modern bool, thread, authz, fp string) *subscriber {
	n := s.notes
	n.mu.Lock()
	defer n.mu.Unlock()
	if sub, ok := n.subs[sess]; ok && sub.thread == thread && sub.authz == authz {
		sub.mu.Lock()
		sub.fp = fp
		sub.mu.Unlock()
		return sub
	} else if ok {
		s.dropLocked(sess)
	}
	if len(n.subs) >= bindingCap {
		s.opts.Logger.Warn("mcp: too many tool-list subscribers; no list_changed for this one", "limit", bindingCap)
		return nil
	}
	sub := &subscriber{sess: sess, modern: modern, thread: thread, authz: authz, fp: fp}
	n.subs[sess] = sub
	return sub
}

// unsubscribe removes sess (a session that ended, a listen stream closed).
func (s *Server) unsubscribe(sess server.ClientSession) {
	s.notes.mu.Lock()
	defer s.notes.mu.Unlock()
	s.dropLocked(sess)
}

func (s *Server) dropLocked(sess server.ClientSession) {
	delete(s.notes.subs, sess)
}

// unsubscribeID removes the subscriber of a session-based session id.
func (s *Server) unsubscribeID(id string) {
	s.notes.mu.Lock()
	defer s.notes.mu.Unlock()
	for sess, sub := range s.notes.subs {
		if !sub.modern && sess.SessionID() == id {
			s.dropLocked(sess)
		}
	}
}

// subscribers returns the subscribers matching keep.
func (s *Server) subscribers(keep func(*subscriber) bool) []*subscriber {
	s.notes.mu.Lock()
	defer s.notes.mu.Unlock()
	var out []*subscriber
	for _, sub := range s.notes.subs {
		if keep(sub) {
			out = append(out, sub)
		}
	}
	return out
}

// onListen registers a 2026-07-28 subscriptions/listen stream for the
// request's thread; it is removed when the stream's request ends.
func (s *Server) onListen(ctx context.Context, _ any, req *mcp.SubscriptionsListenRequest) {
	if !req.Params.Notifications.ToolsListChanged {
		return
	}
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil {
		return
	}
	explicit := ""
	if req.Params.Meta != nil {
		explicit, _ = req.Params.Meta.AdditionalFields[MetaThreadKey].(string)
	}
	t, err := s.thread(ctx, explicit)
	if err != nil {
		s.opts.Logger.Debug("mcp subscriptions/listen: no thread; no list_changed", "error", err)
		return
	}
	authz := infoFrom(ctx).authorization
	fp := ""
	if a, err := s.assembleThread(ctx, t, authz); err == nil {
		fp = fingerprint(a)
	}
	if s.subscribe(sess, true, t, authz, fp) == nil {
		return
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-s.bgCtx.Done():
		}
		s.unsubscribe(sess)
	}()
}

// assembleThread runs AssembleTools for thread with the credential authz
// (background work has no request of its own).
func (s *Server) assembleThread(ctx context.Context, thread, authz string) (*runtimev1.AssembleToolsResponse, error) {
	ctx = context.WithoutCancel(ctx)
	if authz != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", authz)
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	return s.rt.AssembleTools(cctx, &runtimev1.AssembleToolsRequest{ThreadId: thread})
}

// promoted tells every other subscriber of thread that its tools changed
// (the calling session itself is told by callTool, on its own stream),
// and refreshes the calling session's fingerprint.
func (s *Server) promoted(ctx context.Context, thread string) {
	self := server.ClientSessionFromContext(ctx)
	for _, sub := range s.subscribers(func(sub *subscriber) bool { return sub.thread == thread }) {
		sub := sub
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			s.recheck(sub, sub.sess != self)
		}()
	}
}

// recheck re-assembles sub's thread and sends the notice when the tools
// changed (or always, with force); the fingerprint is updated either way.
func (s *Server) recheck(sub *subscriber, force bool) {
	a, err := s.assembleThread(s.bgCtx, sub.thread, sub.authz)
	if err != nil {
		if status.Code(err) == codes.NotFound {
			// The thread is gone; the client's next request binds a new one
			// and lists again.
			s.unsubscribe(sub.sess)
		}
		return
	}
	fp := fingerprint(a)
	sub.mu.Lock()
	changed := fp != sub.fp
	sub.fp = fp
	sub.mu.Unlock()
	if changed || force {
		s.sendListChanged(sub)
	}
}

// sendListChanged delivers notifications/tools/list_changed to sub: on a
// listen stream only when its filter asked for it (SEP-2575), to a
// session-based session through its session.
func (s *Server) sendListChanged(sub *subscriber) {
	if !sub.modern {
		if err := s.mcp.SendNotificationToSpecificClient(sub.sess.SessionID(), string(mcp.MethodNotificationToolsListChanged), nil); err != nil {
			s.opts.Logger.Debug("mcp: list_changed not sent", "error", err)
		}
		return
	}
	if f, ok := sub.sess.(server.SessionWithSubscriptionFilter); ok {
		if filter, active := f.SubscriptionFilter(); !active || !filter.ToolsListChanged {
			return
		}
	}
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: string(mcp.MethodNotificationToolsListChanged)}}
	select {
	case sub.sess.NotificationChannel() <- n:
	default:
		s.opts.Logger.Debug("mcp: list_changed not sent: the listen stream's queue is full")
	}
}

// watchCatalog follows Options.Catalog's WatchCatalog until ctx ends,
// re-checking every subscriber after each change. A catalog that does not
// serve the watch (Unimplemented) or refuses the credential
// (PermissionDenied, Unauthenticated: `toolplane mcp` with a user token) is
// logged once and not retried: only promotions send notices then.
func (s *Server) watchCatalog(ctx context.Context) {
	for ctx.Err() == nil {
		stream, err := s.opts.Catalog.WatchCatalog(ctx, &catalogv1.WatchCatalogRequest{})
		for err == nil {
			var ev *catalogv1.WatchCatalogResponse
			ev, err = stream.Recv()
			if err != nil {
				break
			}
			if ev.GetEvent().GetType() == catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_SNAPSHOT {
				continue
			}
			s.catalogChanged(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		switch status.Code(err) {
		case codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
			s.opts.Logger.Info("mcp: no catalog watch; list_changed only after promotions", "error", err)
			return
		}
		if !errors.Is(err, io.EOF) {
			s.opts.Logger.Warn("mcp: catalog watch failed; reopening", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(watchRetry):
		}
	}
}

// catalogChanged re-checks every subscriber after recheckDelays.
func (s *Server) catalogChanged(ctx context.Context) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		start := time.Now()
		for _, d := range recheckDelays {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(d))):
			}
			for _, sub := range s.subscribers(func(*subscriber) bool { return true }) {
				s.recheck(sub, false)
			}
		}
	}()
}

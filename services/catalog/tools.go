package catalog

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

const (
	defaultPageSize = 200
	maxPageSize     = 1000
)

// pageToken encodes an offset into the filtered list, bound to the filter
// so a token cannot be replayed against another one.
func pageToken(offset int, filter string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(offset) + "|" + filter))
}

func parseToken(tok, filter string) (int, error) {
	if tok == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, errors.New("page_token: malformed")
	}
	var off int
	var f string
	if i := indexByte(b, '|'); i >= 0 {
		off, err = strconv.Atoi(string(b[:i]))
		f = string(b[i+1:])
	} else {
		err = errors.New("no separator")
	}
	if err != nil || off < 0 {
		return 0, errors.New("page_token: malformed")
	}
	if f != filter {
		return 0, errors.New("page_token: issued for a different filter")
	}
	return off, nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// ListTools lists tools in config-file order of their servers (tools of
// failed servers flagged unavailable), filtered and paged.
func (s *Server) ListTools(ctx context.Context, req *catalogv1.ListToolsRequest) (*catalogv1.ListToolsResponse, error) {
	snap := s.snap.Load()
	v := viewerOf(ctx)
	avail := "any"
	if req.Available != nil {
		avail = strconv.FormatBool(req.GetAvailable())
	}
	held := req.GetIncludeHeld() && auth.IsService(ctx)
	filter := fmt.Sprintf("%s|%d|%s|%t", req.GetServer(), req.GetSource(), avail, held)
	off, err := parseToken(req.GetPageToken(), filter)
	if err != nil {
		field, desc := grpcx.SplitField(err.Error())
		return nil, invalid(field, grpcx.ViolationInvalid, "%s", desc)
	}
	size := int(req.GetPageSize())
	if size <= 0 {
		size = defaultPageSize
	}
	size = min(size, maxPageSize)
	var match []*entry
	list := snap.tools
	if held {
		list = append(slices.Clone(snap.tools), snap.held...)
	}
	for _, e := range list {
		if !v.seesEntry(e) {
			continue
		}
		if req.GetServer() != "" && e.server != req.GetServer() && e.tool.Server != req.GetServer() {
			continue
		}
		if req.GetSource() != catalogv1.ToolSource_TOOL_SOURCE_UNSPECIFIED && e.tool.Source != req.GetSource() {
			continue
		}
		if req.Available != nil && e.tool.Available != req.GetAvailable() {
			continue
		}
		match = append(match, e)
	}
	out := &catalogv1.ListToolsResponse{TotalSize: int32(len(match))}
	if off < len(match) {
		// Pages are bounded by count and by bytes (at least one tool per
		// page; one tool is at most catalog.max_definition_bytes, a quarter
		// of the message limit).
		budget, used := s.pageBudget(), 0
		end := off
		for ; end < len(match) && end-off < size; end++ {
			t := v.tool(snap, match[end])
			n := proto.Size(t)
			if end > off && used+n > budget {
				break
			}
			used += n
			out.Tools = append(out.Tools, t)
		}
		if end < len(match) {
			out.NextPageToken = pageToken(end, filter)
		}
	}
	return out, nil
}

// pageBudget is the byte budget of one listing page: the message limit less
// a margin for the envelope.
func (s *Server) pageBudget() int { return max(s.maxMsg-64<<10, 1) }

// notFound is the NOT_FOUND of a name the viewer cannot resolve. For a
// viewer of every tenant (a global admin, a service credential acting for
// nobody) a name several tenants hold says so: it names no one tool there
// (docs/decisions/0106-per-tenant-name-namespaces.md). Tenants' viewers
// get the plain answer, whatever other tenants hold.
func (snap *snapshot) notFound(v viewer, name string) error {
	if v.all && (snap.active.shared(name) || snap.heldIdx.shared(name)) {
		return statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_FOUND, map[string]string{"name": name},
			"tool %q: the name is held in several tenants' namespaces and names no one tool for a caller that sees every tenant; act for a user of the tenant (or use select:server/tool)", name)
	}
	return toolNotFound(name)
}

// GetTool returns one tool by exposed name.
func (s *Server) GetTool(ctx context.Context, req *catalogv1.GetToolRequest) (*catalogv1.GetToolResponse, error) {
	snap := s.snap.Load()
	v := viewerOf(ctx)
	e, ok := snap.lookup(v, req.GetName())
	if !ok {
		// A tool held for review is shown to its reviewers only: global
		// admins, and a tenant admin for its own tenant's servers (review.go).
		if h, held := snap.lookupHeld(v, req.GetName()); held && mayReview(ctx, h) {
			return &catalogv1.GetToolResponse{Tool: v.tool(snap, h)}, nil
		}
		return nil, snap.notFound(v, req.GetName())
	}
	return &catalogv1.GetToolResponse{Tool: v.tool(snap, e)}, nil
}

// GetCatalog returns the hash over the candidate set (or every tool), counts
// per server and server states (docs/architecture.md §8).
func (s *Server) GetCatalog(ctx context.Context, req *catalogv1.GetCatalogRequest) (*catalogv1.GetCatalogResponse, error) {
	snap := s.snap.Load()
	v := viewerOf(ctx)
	out := &catalogv1.GetCatalogResponse{}
	counts := map[string]int32{}
	if !v.all {
		// A tenant's view: the hash and counts of what it sees, names
		// resolved in its namespace, so the tools of servers of other
		// tenants do not show (visibility.go); a name only another tenant
		// holds is unknown, as any unknown name.
		names := req.GetCandidates().GetValues()
		if req.GetCandidates() == nil {
			names = snap.visibleNames(v)
		}
		hash, n, unknown, picked := snap.subsetHash(v, names)
		out.CatalogHash, out.ToolCount, out.Unknown = hash, int32(n), unknown
		for _, e := range picked {
			counts[e.server]++
			if e.tool.Renamed {
				out.Renamed = append(out.Renamed, e.tool.Name)
			}
		}
	} else if req.GetCandidates() == nil {
		out.CatalogHash = snap.hash
		out.ToolCount = int32(len(snap.tools))
		for _, e := range snap.tools {
			counts[e.server]++
			if e.tool.Renamed {
				out.Renamed = append(out.Renamed, e.tool.Name)
			}
		}
	} else {
		hash, n, unknown, picked := snap.subsetHash(v, req.GetCandidates().GetValues())
		out.CatalogHash, out.ToolCount, out.Unknown = hash, int32(n), unknown
		for _, e := range picked {
			counts[e.server]++
			if e.tool.Renamed {
				out.Renamed = append(out.Renamed, e.tool.Name)
			}
		}
	}
	for _, st := range snap.statuses {
		if !v.sees(st.Config.Tenants) {
			continue
		}
		out.Servers = append(out.Servers, &catalogv1.ServerCount{Server: st.Name, Tools: counts[st.Name], State: stateEnum(st.State)})
	}
	return out, nil
}

// WatchCatalog streams a SNAPSHOT event, then every change, until the
// client cancels or the service closes.
func (s *Server) WatchCatalog(_ *catalogv1.WatchCatalogRequest, stream grpc.ServerStreamingServer[catalogv1.WatchCatalogResponse]) error {
	ch, snap := s.subscribe()
	defer s.unsubscribe(ch)
	v := viewerOf(stream.Context())
	first := &catalogv1.CatalogEvent{Type: catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_SNAPSHOT, CatalogHash: snap.viewerHash(v), Time: timestamppb.New(snap.at),
		DefinitionHashes: make(map[string]string, len(snap.tools))}
	for _, e := range snap.tools {
		// A name several tenants hold is left out for a viewer of every
		// tenant (it names no one tool there, diff).
		if v.seesEntry(e) && (!v.all || !snap.active.shared(e.tool.Name)) {
			first.DefinitionHashes[e.tool.Name] = e.tool.DefinitionHash
		}
	}
	for _, st := range snap.statuses {
		if v.sees(st.Config.Tenants) {
			first.NameCollisions = append(first.NameCollisions, v.collisions(snap, snap.collisions[st.Name])...)
		}
	}
	if err := stream.Send(&catalogv1.WatchCatalogResponse{Event: first}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		case c, ok := <-ch:
			if !ok {
				return status.Error(codes.Unavailable, "catalog: shutting down")
			}
			if err := stream.Send(&catalogv1.WatchCatalogResponse{Event: v.event(c)}); err != nil {
				return err
			}
		}
	}
}

// callParams are the parts of CallTool and CallToolStream requests.
type callParams struct {
	name    string
	args    *structpb.Struct
	cc      *typev1.CallContext
	timeout *durationpb.Duration
}

// call runs one tool call: routing, scope key, timeout, error mapping and
// the message-size check.
func (s *Server) call(ctx context.Context, p callParams, notify func(catalogmcp.Notification)) (*catalogv1.CallToolResponse, error) {
	snap := s.snap.Load()
	// A tool of a server of other tenants does not exist for the caller
	// (the same NOT_FOUND as an unknown name: fail closed, nothing leaks).
	v := viewerOf(ctx)
	e, ok := snap.lookup(v, p.name)
	if !ok {
		if h, held := snap.lookupHeld(v, p.name); held {
			return nil, heldError(h)
		}
		return nil, snap.notFound(v, p.name)
	}
	if e.static {
		return nil, callError(ctx, p.name, false, catalogmcp.ErrStatic)
	}
	timeout := p.timeout.AsDuration()
	if p.timeout == nil || timeout <= 0 {
		timeout = 0
		if sup, ok := s.mgr.Supervisor(e.server); ok {
			exp := sup.Expanded()
			timeout = exp.CallTimeout()
		}
		if timeout <= 0 {
			timeout = s.cfg.DefaultToolCallTimeout
		}
	}
	args := []byte(`{}`)
	if p.args != nil {
		b, err := argsJSON(p.args)
		if err != nil {
			return nil, invalid("arguments", grpcx.ViolationInvalid, "%v", err)
		}
		args = b
	}
	// The scope key comes from the authenticated, acting-for principal and
	// a CallContext trusted only from a service credential (docs/architecture.md §5).
	key := catalogmcp.ScopeKey{}
	if pr := auth.EffectivePrincipal(ctx); pr != nil {
		key.Tenant, key.Subject = pr.GetTenant(), pr.GetSubject()
		if key.Tenant == "" {
			key.Tenant = "default"
		}
	}
	key.Thread = auth.TrustedCallContext(ctx, p.cc).GetThreadId()
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	start := time.Now()
	res, err := s.mgr.Call(cctx, e.server, e.original, args, key, notify)
	if err != nil {
		timedOut := errors.Is(context.Cause(cctx), errCallTimeout) && ctx.Err() == nil
		err = callError(ctx, p.name, timedOut, err)
		s.met.observeCall(e.server, start, err)
		return nil, err
	}
	s.met.observeCall(e.server, start, nil)
	if res.SessionCreated {
		// Said to the caller, which reports a session re-created on
		// another replica (docs/decisions/0086-session-placement.md).
		_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcx.SessionHeader, grpcx.SessionCreated))
	}
	// Cheap pre-check on the raw size, then the exact check on the message.
	if res.Size > s.maxMsg {
		return nil, tooLarge(p.name, res.Size, s.maxMsg)
	}
	out := resultProto(res, e.server, e.original)
	if n := proto.Size(out); n > s.maxMsg-1024 {
		return nil, tooLarge(p.name, n, s.maxMsg)
	}
	return out, nil
}

var errCallTimeout = errors.New("tool call timeout")

func tooLarge(name string, n, max int) error {
	return statusErr(codes.ResourceExhausted, catalogv1.ErrorReason_ERROR_REASON_RESULT_TOO_LARGE,
		map[string]string{"size": strconv.Itoa(n), "max": strconv.Itoa(max)},
		"tool %q: result of %d bytes exceeds the maximum message size of %d bytes", name, n, max)
}

// CallTool calls a tool on its server and returns the MCP result faithfully.
func (s *Server) CallTool(ctx context.Context, req *catalogv1.CallToolRequest) (*catalogv1.CallToolResponse, error) {
	return s.call(ctx, callParams{req.GetName(), req.GetArguments(), req.GetCallContext(), req.GetTimeout()}, nil)
}

// CallToolStream streams the server's progress and logging notifications,
// then the result as the last message.
func (s *Server) CallToolStream(req *catalogv1.CallToolStreamRequest, stream grpc.ServerStreamingServer[catalogv1.CallToolStreamResponse]) error {
	var mu sync.Mutex
	done := false
	notify := func(n catalogmcp.Notification) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		_ = stream.Send(&catalogv1.CallToolStreamResponse{Event: &catalogv1.CallToolStreamResponse_Notification{Notification: notificationProto(n)}})
	}
	res, err := s.call(stream.Context(), callParams{req.GetName(), req.GetArguments(), req.GetCallContext(), req.GetTimeout()}, notify)
	mu.Lock()
	done = true
	mu.Unlock()
	if err != nil {
		return err
	}
	return stream.Send(&catalogv1.CallToolStreamResponse{Event: &catalogv1.CallToolStreamResponse_Result{Result: res}})
}

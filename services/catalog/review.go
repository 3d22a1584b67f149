package catalog

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// Definition pinning (docs/architecture.md §7, docs/decisions/0101): admins
// list the tools waiting for review and approve or reject one exact
// definition, named by its hash, so a definition that changed after it was
// reviewed is never approved by accident. Every decision is an audit record
// with both hashes and the structured diff.
//
// Reviewers (docs/decisions/0107-tenant-admins-review-their-tools.md): a
// global admin reviews every tool; a tenant admin the tools of the servers
// its tenant owns (`tenants` exactly its tenant), and nothing else: other
// tools are left out of its ListPendingTools and are NOT_FOUND to its
// Approve/Reject, the answer of an unknown name, so nothing of other
// tenants' or shared servers leaks. The audit record names the actor.

// mayReview reports whether the caller reviews e.
func mayReview(ctx context.Context, e *entry) bool { return writerOf(ctx).mayReview(e) }

// mayReview reports whether the writer reviews e: a global admin any tool,
// a tenant admin those of servers its tenant owns.
func (w writer) mayReview(e *entry) bool {
	switch {
	case w.denied:
		return false
	case !w.tenantAdmin:
		return true
	}
	ts := e.tool.GetTenants()
	return len(ts) == 1 && ts[0] == w.tenant
}

// refuseReview is the PERMISSION_DENIED of a caller that reviews nothing.
func (w writer) refuseReview() error {
	if w.denied {
		return w.refuse("reviewing pinned tools needs a global admin or a tenant admin (a user credential with the admin role)")
	}
	return nil
}

// ListPendingTools lists the held tools (PENDING, CHANGED, REJECTED) with
// the diff from their pinned definition, paged by count and bytes.
func (s *Server) ListPendingTools(ctx context.Context, req *catalogv1.ListPendingToolsRequest) (*catalogv1.ListPendingToolsResponse, error) {
	w := writerOf(ctx)
	if err := w.refuseReview(); err != nil {
		return nil, err
	}
	snap := s.snap.Load()
	filter := "pending|" + req.GetServer()
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
	for _, e := range snap.held {
		if !w.mayReview(e) {
			continue
		}
		if req.GetServer() == "" || e.server == req.GetServer() || e.tool.Server == req.GetServer() {
			match = append(match, e)
		}
	}
	out := &catalogv1.ListPendingToolsResponse{}
	budget := s.pageBudget()
	used := 0
	i := off
	for ; i < len(match) && i-off < size; i++ {
		e := match[i]
		pt := &catalogv1.PendingTool{Tool: e.full()}
		if p, ok := s.ids.pin(catalognames.Key{Server: e.tool.Server, Tool: e.original}); ok {
			pt.PinnedDefinitionHash = p.ApprovedHash
			cur, _ := e.b.definition(e.tool.Name)
			pt.Diff = changesProto(diffDefinitions(p.ApprovedDefinition, cur))
		}
		n := proto.Size(pt)
		if i > off && used+n > budget {
			break
		}
		used += n
		out.Tools = append(out.Tools, pt)
	}
	if i < len(match) {
		out.NextPageToken = pageToken(i, filter)
	}
	return out, nil
}

// ApproveTool pins the current definition of a tool.
func (s *Server) ApproveTool(ctx context.Context, req *catalogv1.ApproveToolRequest) (*catalogv1.ApproveToolResponse, error) {
	t, a, err := s.review(ctx, "approve", req.GetName(), req.GetDefinitionHash())
	if err != nil {
		return nil, err
	}
	return &catalogv1.ApproveToolResponse{Tool: t, Audit: a}, nil
}

// RejectTool rejects the current definition of a tool.
func (s *Server) RejectTool(ctx context.Context, req *catalogv1.RejectToolRequest) (*catalogv1.RejectToolResponse, error) {
	t, a, err := s.review(ctx, "reject", req.GetName(), req.GetDefinitionHash())
	if err != nil {
		return nil, err
	}
	return &catalogv1.RejectToolResponse{Tool: t, Audit: a}, nil
}

// review records one decision. The tool must be a tool of a pinned server
// whose current definition hash is the one named. Approving sets the pin to
// that definition (clearing a rejection of it); rejecting records the hash
// (a rejected definition that was the approved one loses its approval). A
// decision that changes nothing writes no audit record and returns none.
func (s *Server) review(ctx context.Context, action, name, hash string) (*catalogv1.Tool, *catalogv1.ToolAuditRecord, error) {
	s.writeMu.Lock() // one review at a time, never interleaved with a reload
	defer s.writeMu.Unlock()
	w := writerOf(ctx)
	if err := w.refuseReview(); err != nil {
		return nil, nil, err
	}
	snap := s.snap.Load()
	e, err := snap.reviewed(w, name, hash)
	if err != nil {
		return nil, nil, err
	}
	if !e.pinned {
		return nil, nil, statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_PINNED,
			map[string]string{"name": name, "server": e.server}, "tool %q: server %q is not pinned (set \"pin\": true)", name, e.server)
	}
	if e.tool.DefinitionHash != hash {
		return nil, nil, statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_DEFINITION_CHANGED,
			map[string]string{"name": name, "current": e.tool.DefinitionHash},
			"definition_hash: %s is not the current definition of tool %q (%s); it changed since it was reviewed, review it again", hash, name, e.tool.DefinitionHash)
	}
	k := catalognames.Key{Server: e.tool.Server, Tool: e.original}
	canon, _ := e.b.definition(e.tool.Name)
	now := time.Now().UTC()
	p, _ := s.ids.pin(k)
	p.PairKey = s.ids.storeKey(k)
	prev := p.ApprovedHash
	next := p
	next.UpdatedAt = now
	switch action {
	case "approve":
		if p.ApprovedHash == hash && p.RejectedHash != hash {
			return e.full(), nil, nil
		}
		next.ApprovedHash, next.ApprovedDefinition = hash, canon
		if next.RejectedHash == hash {
			next.RejectedHash = ""
		}
	case "reject":
		if p.RejectedHash == hash && p.ApprovedHash != hash {
			return e.full(), nil, nil
		}
		next.RejectedHash = hash
		if next.ApprovedHash == hash {
			next.ApprovedHash, next.ApprovedDefinition = "", nil
		}
	}
	changes := diffDefinitions(p.ApprovedDefinition, canon)
	actor := "unknown"
	if id, ok := auth.Caller(ctx); ok {
		actor = id.Principal.GetTenant() + "/" + id.Principal.GetSubject()
	}
	rec := catalogstore.AuditRow{At: now, Actor: actor, Action: action, PairKey: p.PairKey, Name: name,
		PreviousHash: prev, DefinitionHash: hash, Diff: changesJSON(changes)}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := s.ids.review(sctx, next, &rec); err != nil {
		return nil, nil, grpcx.WithCause(grpcx.Status(codes.Unavailable, errorDomain, catalogv1.ErrorReason_ERROR_REASON_INTERNAL.String(), nil,
			"the "+action+" decision could not be recorded; nothing changed; the cause is in the server log"), err)
	}
	s.log.Info("catalog: tool definition "+action+"d", "tool", name, "server", e.tool.Server, "original", e.original,
		"actor", actor, "previous_hash", prev, "definition_hash", hash, "changes", len(changes), "audit_id", rec.ID)
	s.rebuild()
	cur := s.snap.Load()
	t, ok := cur.active.exact(e.key())
	if !ok {
		t, ok = cur.heldIdx.exact(e.key())
	}
	var tool *catalogv1.Tool
	if ok {
		tool = t.full()
	}
	return tool, auditProto(rec), nil
}

// reviewed returns the tool a review by w of name (at definition hash) is
// about, resolved in w's namespace; a tool w may not review is NOT_FOUND,
// as an unknown name. A global admin sees every tenant: a name several
// tenants hold is settled by the definition hash named (the one tool of
// that name serving it), and is FAILED_PRECONDITION when several do.
func (snap *snapshot) reviewed(w writer, name, hash string) (*entry, error) {
	v := w.viewer()
	e, ok := snap.heldIdx.get(v, name)
	if !ok {
		e, ok = snap.active.get(v, name)
	}
	if !ok && v.all && (snap.heldIdx.shared(name) || snap.active.shared(name)) {
		var match []*entry
		for _, ni := range []nameIndex{snap.heldIdx, snap.active} {
			for k, c := range ni.scoped {
				if k.name == name && c.tool.DefinitionHash == hash {
					match = append(match, c)
				}
			}
		}
		switch len(match) {
		case 0:
			return nil, statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_DEFINITION_CHANGED,
				map[string]string{"name": name},
				"definition_hash: %s is the current definition of no tool %q; the name is held in several tenants' namespaces, review the definition ListPendingTools shows", hash, name)
		case 1:
			e, ok = match[0], true
		default:
			return nil, statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_DEFINITION_CHANGED,
				map[string]string{"name": name},
				"tool %q: several tenants' tools of this name serve definition %s; a tenant admin of each reviews its own", name, hash)
		}
	}
	if !ok || !w.mayReview(e) {
		return nil, toolNotFound(name)
	}
	return e, nil
}

// review writes a decision to the store, then to memory.
func (id *identity) review(ctx context.Context, p catalogstore.PinRow, rec *catalogstore.AuditRow) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	n, err := id.store.Review(ctx, p, *rec)
	if err != nil {
		return err
	}
	rec.ID = n
	id.pins[catalognames.Key{Server: p.Server, Tool: p.Tool}] = p
	return nil
}

func auditProto(r catalogstore.AuditRow) *catalogv1.ToolAuditRecord {
	return &catalogv1.ToolAuditRecord{Id: r.ID, Time: timestamppb.New(r.At), Actor: r.Actor, Action: r.Action,
		Tool:         &catalogv1.ToolRef{Server: r.Server, OriginalName: r.Tool, Name: r.Name},
		PreviousHash: r.PreviousHash, DefinitionHash: r.DefinitionHash, Diff: changesProto(changesFromJSON(r.Diff))}
}

// heldError is the error of a call to a tool held for review.
func heldError(e *entry) error {
	what := map[catalogv1.ToolState]string{
		catalogv1.ToolState_TOOL_STATE_PENDING:  "is new and waits for an admin's approval",
		catalogv1.ToolState_TOOL_STATE_CHANGED:  "changed its definition and waits for an admin's approval",
		catalogv1.ToolState_TOOL_STATE_REJECTED: "serves a definition an admin rejected",
	}[e.tool.State]
	return statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_CALLABLE,
		map[string]string{"state": e.tool.State.String(), "definition_hash": e.tool.DefinitionHash},
		"tool %q %s (server %q is pinned; toolplane tools pending)", e.tool.Name, what, e.server)
}

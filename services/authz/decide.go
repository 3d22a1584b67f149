package authz

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/google/uuid"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// principalFor applies the PDP rule (docs/architecture.md §5): a service or admin
// credential may ask about any principal (absent = its effective principal);
// a user credential may only ask about itself — the body's principal, when
// given, must be the caller's own (same subject and tenant, same roles and
// attributes), else PERMISSION_DENIED. For a user the credential's principal
// is what is decided about, never the body's.
func principalFor(ctx context.Context, p *typev1.Principal) (*typev1.Principal, error) {
	id, ok := auth.Caller(ctx)
	if !ok {
		return nil, forgedPrincipal("no authenticated caller")
	}
	// Service credentials and global admins may ask about anyone; a tenant
	// admin about the principals of its own tenant.
	if own, scoped := id.TenantAdmin(); id.Service() || scoped {
		if scoped && p != nil && tenantOf(p) != own {
			return nil, forgedPrincipal("an admin of tenant %q may only ask about principals of that tenant, not of %q", own, tenantOf(p))
		}
		if p != nil {
			return p, nil
		}
		return auth.EffectivePrincipal(ctx), nil
	}
	own := auth.EffectivePrincipal(ctx)
	if p == nil {
		return own, nil
	}
	if !auth.SamePrincipal(p, own) {
		return nil, forgedPrincipal("a user credential may only ask about itself, not about %q in tenant %q", p.GetSubject(), p.GetTenant())
	}
	r1, r2 := slices.Clone(p.GetRoles()), slices.Clone(own.GetRoles())
	slices.Sort(r1)
	slices.Sort(r2)
	if !slices.Equal(slices.Compact(r1), slices.Compact(r2)) || !maps.Equal(p.GetAttributes(), own.GetAttributes()) {
		return nil, forgedPrincipal("the principal's roles or attributes differ from the caller's credential")
	}
	return own, nil
}

func coreRequest(p *typev1.Principal, cc *typev1.CallContext) authzcasbin.Request {
	return authzcasbin.Request{
		Subject: p.GetSubject(),
		Tenant:  p.GetTenant(),
		Roles:   p.GetRoles(),
		Cond: authzcasbin.CondInput{
			Attributes: p.GetAttributes(),
			Agent:      cc.GetAgent(),
			IsSubagent: cc.GetIsSubagent(),
		},
	}
}

// resourceAttributes fills the resource's server and MCP annotations into a
// condition input: from a service credential as given (absent hints take
// authz.annotation_defaults), from anyone else ignored — an unannotated
// resource with no server (docs/architecture.md §5).
func (s *Server) resourceAttributes(ctx context.Context, in *authzcasbin.CondInput, ra *authzv1.ResourceAttributes) {
	if ra == nil || !auth.IsService(ctx) {
		in.Server, in.Annotations = "", s.unannotatedInput()
		return
	}
	in.Server = ra.GetServer()
	if len(ra.GetAnnotations().GetFields()) == 0 {
		in.Annotations = s.unannotatedInput()
		return
	}
	in.Annotations = authzcasbin.ResolveAnnotations(ra.GetAnnotations().AsMap(), s.cfg.AnnotationDefaults)
}

// unannotatedInput is the resolved annotations of a resource without any
// (the defaults), computed once; callers only read it.
func (s *Server) unannotatedInput() map[string]string {
	s.unannotatedOnce.Do(func() { s.unannotated = authzcasbin.ResolveAnnotations(nil, s.cfg.AnnotationDefaults) })
	return s.unannotated
}

func tenantOf(p *typev1.Principal) string { return auth.TenantOf(p) }

// Authorize decides one action (docs/deerflow.md §3.7, layer 2). A deny —
// and an allow when audit_allows is on — is committed to the decision log
// before the answer; if that fails the answer is a deny with an
// authz.audit_error reason (first for an audited allow, after the deny's own
// reasons otherwise).
func (s *Server) Authorize(ctx context.Context, req *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, error) {
	p, err := principalFor(ctx, req.GetPrincipal())
	if err != nil {
		return nil, err
	}
	cc := auth.TrustedCallContext(ctx, req.GetCallContext())
	creq := coreRequest(p, cc)
	creq.Resource = resourceNames[req.GetResourceType()]
	creq.Action = actionNames[req.GetAction()]
	creq.Target = req.GetTarget()
	creq.Cond.CallTime = true
	s.resourceAttributes(ctx, &creq.Cond, req.GetResourceAttributes())
	input := req.GetInput().AsMap()
	creq.Cond.Input = input
	d := s.engine.Decide(&creq)
	id := uuid.Must(uuid.NewV7()).String()
	reasons := d.Reasons
	if !d.Allow || s.cfg.AuditAllows {
		rec := &authzstore.DecisionRecord{
			ID: id, Kind: authzstore.KindAuthorize, Time: s.now().UTC(),
			Tenant: tenantOf(p), Subject: p.GetSubject(), Roles: p.GetRoles(), Attributes: p.GetAttributes(),
			Resource: creq.Resource, Action: creq.Action, Target: creq.Target,
			CallContext: callContextFromProto(cc), Input: authzstore.BoundInput(input, 512, s.cfg.MaxAuditInputBytes),
			Allow: d.Allow, Reasons: d.Reasons, PolicyID: d.PolicyID, PolicyVersion: d.PolicyVersion,
		}
		ok, flood := s.flood.admit(rec.Tenant, rec.Subject, rec.Roles, rec.Time)
		if flood != nil {
			if err := s.dlog.Append(ctx, flood, true); err != nil {
				s.log.ErrorContext(ctx, "authz flood record not written", "err", err)
			}
			s.log.InfoContext(ctx, "authz decision records of a principal rate-limited", "tenant", rec.Tenant, "subject", rec.Subject)
		}
		if !ok {
			floodReason := authzcasbin.Reason{Code: authzcasbin.CodeAuditFlood, Message: "this decision was not recorded individually: the principal exceeds authz.decision_rate"}
			if d.Allow { // an audited allow that is not stored becomes a deny
				reasons = append([]authzcasbin.Reason{floodReason}, d.Reasons...)
				d.Allow = false
			} else {
				reasons = append(slices.Clone(d.Reasons), floodReason)
			}
		} else if err := s.dlog.Append(ctx, rec, true); err != nil {
			s.log.ErrorContext(ctx, "authz decision not recorded; denying", "decision_id", id, "err", err)
			auditErr := authzcasbin.Reason{Code: authzcasbin.CodeAuditError, Message: "the decision could not be committed to the audit log: " + err.Error()}
			if d.Allow { // an audited allow that cannot be logged becomes a deny
				reasons = append([]authzcasbin.Reason{auditErr}, d.Reasons...)
			} else {
				reasons = append(slices.Clone(d.Reasons), auditErr)
			}
			d.Allow = false
		}
	}
	s.decisions.WithLabelValues("Authorize", strconv.FormatBool(d.Allow), reasons[0].Code).Inc()
	return &authzv1.AuthorizeResponse{Decision: &authzv1.Decision{
		Allow: d.Allow, Reasons: reasonsToProto(reasons), PolicyId: d.PolicyID, DecisionId: id, PolicyVersion: d.PolicyVersion,
	}}, nil
}

// FilterResources keeps the candidates the principal may see, in order and
// with duplicates, never adding any (docs/deerflow.md §3.5, layer 1). All
// candidates are decided on one policy snapshot. Input conditions are not
// known at list time (authzcasbin cond.go). One summary record per call goes
// to the decision log. With authz.filter_fail_open, candidates whose
// evaluation failed (store or evaluator error) are kept and fail_open is set.
func (s *Server) FilterResources(ctx context.Context, req *authzv1.FilterResourcesRequest) (*authzv1.FilterResourcesResponse, error) {
	p, err := principalFor(ctx, req.GetPrincipal())
	if err != nil {
		return nil, err
	}
	cc := auth.TrustedCallContext(ctx, req.GetCallContext())
	creq := coreRequest(p, cc)
	creq.Resource = resourceNames[req.GetResourceType()]
	creq.Action = authzcasbin.ActionList
	if a, ok := actionNames[req.GetAction()]; ok {
		creq.Action = a
	}
	var attrs func(i int, in *authzcasbin.CondInput)
	if ra := req.GetResourceAttributes(); len(ra) > 0 && auth.IsService(ctx) {
		cands := req.GetCandidates()
		attrs = func(i int, in *authzcasbin.CondInput) { s.resourceAttributes(ctx, in, ra[cands[i]]) }
	} else {
		s.resourceAttributes(ctx, &creq.Cond, nil)
	}
	ds, version := s.engine.DecideAllWith(&creq, req.GetCandidates(), attrs)
	resp := &authzv1.FilterResourcesResponse{PolicyVersion: version, Allowed: make([]string, 0, len(ds))}
	var deniedNames []string
	for i, d := range ds {
		name := req.GetCandidates()[i]
		if d.Allow {
			resp.Allowed = append(resp.Allowed, name)
			continue
		}
		if code := d.Code(); s.cfg.FilterFailOpen && (code == authzcasbin.CodeEvaluatorError || code == authzcasbin.CodeStoreError) {
			resp.Allowed = append(resp.Allowed, name)
			resp.FailOpen = true
			continue
		}
		resp.Denied = append(resp.Denied, &authzv1.DeniedResource{Name: name, Reasons: reasonsToProto(d.Reasons)})
		deniedNames = append(deniedNames, name)
	}
	rec := &authzstore.DecisionRecord{
		ID: uuid.Must(uuid.NewV7()).String(), Kind: authzstore.KindFilter, Time: s.now().UTC(),
		Tenant: tenantOf(p), Subject: p.GetSubject(), Roles: p.GetRoles(), Attributes: p.GetAttributes(),
		Resource: creq.Resource, Action: creq.Action, CallContext: callContextFromProto(cc),
		Allow: len(deniedNames) == 0, PolicyVersion: version,
		CandidateCount: len(ds), AllowedCount: len(resp.Allowed), Denied: deniedNames,
	}
	if resp.FailOpen {
		rec.Reasons = []authzcasbin.Reason{{Code: authzcasbin.CodeFailOpen, Message: "evaluation failed; candidates kept (authz.filter_fail_open)"}}
	}
	ok, flood := s.flood.admit(rec.Tenant, rec.Subject, rec.Roles, rec.Time)
	if flood != nil {
		if err := s.dlog.Append(ctx, flood, false); err != nil {
			s.log.WarnContext(ctx, "authz flood record not written", "err", err)
		}
		s.log.InfoContext(ctx, "authz decision records of a principal rate-limited", "tenant", rec.Tenant, "subject", rec.Subject)
	}
	if ok {
		if err := s.dlog.Append(ctx, rec, false); err != nil {
			s.log.WarnContext(ctx, "authz filter summary not recorded", "err", err)
		}
	}
	s.decisions.WithLabelValues("FilterResources", strconv.FormatBool(len(deniedNames) == 0), "summary").Inc()
	return resp, nil
}

// refusalResource names a refused resource type; "credential" (failed
// logins) exists only in recorded refusals.
func refusalResource(rt authzv1.ResourceType) string {
	if rt == authzv1.ResourceType_RESOURCE_TYPE_CREDENTIAL {
		return "credential"
	}
	return resourceNames[rt]
}

// RecordRefusal writes a refusal decided outside authz (the runtime's
// tool-call chain) to the decision log: a deny of kind
// DECISION_KIND_REFUSAL with the caller's reason, for the principal the
// request names (absent: the effective principal). Service class: only a
// service credential (or an admin) can record, so no user can forge a
// record about anyone (docs/architecture.md §5).
func (s *Server) RecordRefusal(ctx context.Context, req *authzv1.RecordRefusalRequest) (*authzv1.RecordRefusalResponse, error) {
	p, err := principalFor(ctx, req.GetPrincipal())
	if err != nil {
		return nil, err
	}
	cc := auth.TrustedCallContext(ctx, req.GetCallContext())
	id := uuid.Must(uuid.NewV7()).String()
	rec := &authzstore.DecisionRecord{
		ID: id, Kind: authzstore.KindRefusal, Time: s.now().UTC(),
		Tenant: tenantOf(p), Subject: p.GetSubject(), Roles: p.GetRoles(), Attributes: p.GetAttributes(),
		Resource: refusalResource(req.GetResourceType()), Action: actionNames[req.GetAction()], Target: req.GetTarget(),
		CallContext: callContextFromProto(cc), Allow: false,
		Reasons: []authzcasbin.Reason{{Code: req.GetReason().GetCode(), Message: req.GetReason().GetMessage()}},
	}
	if err := s.dlog.Append(ctx, rec, true); err != nil {
		return nil, toStatus(err)
	}
	s.decisions.WithLabelValues("RecordRefusal", "false", req.GetReason().GetCode()).Inc()
	return &authzv1.RecordRefusalResponse{DecisionId: id}, nil
}

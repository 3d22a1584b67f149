package authz

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// WatchPolicy streams the policy version now in force, then every change of
// it (a reload, or a failure that makes every decision deny), so callers can
// cache decisions keyed by version. Versions are never repeated back to back.
func (s *Server) WatchPolicy(_ *authzv1.WatchPolicyRequest, stream grpc.ServerStreamingServer[authzv1.WatchPolicyResponse]) error {
	ctx := stream.Context()
	last := int64(-1)
	for {
		changed := s.engine.Changed()
		if v, at := s.engine.Current(); v != last {
			if err := stream.Send(&authzv1.WatchPolicyResponse{PolicyVersion: v, Time: timestamppb.New(at)}); err != nil {
				return err
			}
			last = v
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// ListPolicies lists the policy lines and role links in force (the snapshot
// decisions use), in store order, with their ids and sources. tenant keeps
// lines and links of exactly that tenant; role keeps lines of that subject
// and links whose member or role it is.
//
// A tenant admin (docs/architecture.md §5) sees only the lines and links of
// its own tenant and the global ("*") ones; other tenants' are invisible.
func (s *Server) ListPolicies(ctx context.Context, req *authzv1.ListPoliciesRequest) (*authzv1.ListPoliciesResponse, error) {
	set := s.engine.Policy()
	resp := &authzv1.ListPoliciesResponse{PolicyVersion: set.Version}
	own, scoped := tenantScope(ctx)
	visible := func(t string) bool { return !scoped || t == own || t == authzcasbin.Wildcard }
	for _, r := range set.Rules {
		if visible(r.Tenant) && (req.GetTenant() == "" || r.Tenant == req.GetTenant()) && (req.GetRole() == "" || r.Subject == req.GetRole()) {
			resp.Policies = append(resp.Policies, ruleToProto(r))
		}
	}
	for _, l := range set.Links {
		if visible(l.Tenant) && (req.GetTenant() == "" || l.Tenant == req.GetTenant()) && (req.GetRole() == "" || l.Member == req.GetRole() || l.Role == req.GetRole()) {
			resp.RoleLinks = append(resp.RoleLinks, linkToProto(l))
		}
	}
	return resp, nil
}

// AddPolicies validates every line and link, stores them in one transaction
// (source "api"; identical existing lines are kept as they are) and applies
// the new version before answering.
//
// A tenant admin may add lines and links of its own tenant only (not "*");
// otherwise PERMISSION_DENIED (ERROR_REASON_OTHER_TENANT) and nothing is added.
func (s *Server) AddPolicies(ctx context.Context, req *authzv1.AddPoliciesRequest) (*authzv1.AddPoliciesResponse, error) {
	var ch authzstore.Change
	resp := &authzv1.AddPoliciesResponse{}
	own, scoped := tenantScope(ctx)
	for i, p := range req.GetPolicies() {
		r, err := ruleFromProto(p, fmt.Sprintf("policies[%d]", i))
		if err != nil {
			return nil, invalidField(authzv1.ErrorReason_ERROR_REASON_INVALID_POLICY, fmt.Sprintf("policies[%d]", i), "%v", err)
		}
		if scoped && r.Tenant != own {
			return nil, otherTenant(fmt.Sprintf("policies[%d].tenant", i), "policies[%d].tenant: %q: an admin of tenant %q may change only lines of tenant %q", i, r.Tenant, own, own)
		}
		ch.AddRules = append(ch.AddRules, r)
		resp.Policies = append(resp.Policies, ruleToProto(r))
	}
	for i, l := range req.GetRoleLinks() {
		link, err := linkFromProto(l, fmt.Sprintf("role_links[%d]", i))
		if err != nil {
			return nil, invalidField(authzv1.ErrorReason_ERROR_REASON_INVALID_POLICY, fmt.Sprintf("role_links[%d]", i), "%v", err)
		}
		if scoped && link.Tenant != own {
			return nil, otherTenant(fmt.Sprintf("role_links[%d].tenant", i), "role_links[%d].tenant: %q: an admin of tenant %q may change only links of tenant %q", i, link.Tenant, own, own)
		}
		ch.AddLinks = append(ch.AddLinks, link)
	}
	v, err := s.applyChange(ctx, ch)
	if err != nil {
		return nil, err
	}
	resp.PolicyVersion = v
	return resp, nil
}

// RemovePolicies removes lines by id or exact content and links, in one
// transaction: a missing item is NOT_FOUND and a file- or DeerFlow-owned one
// FAILED_PRECONDITION, and then nothing is removed.
//
// A tenant admin may remove only lines and links of its own tenant: another
// tenant's line named by id is NOT_FOUND (it is invisible), by content or
// a global one PERMISSION_DENIED; then nothing is removed.
func (s *Server) RemovePolicies(ctx context.Context, req *authzv1.RemovePoliciesRequest) (*authzv1.RemovePoliciesResponse, error) {
	ch := authzstore.Change{RemoveRuleIDs: req.GetPolicyIds()}
	own, scoped := tenantScope(ctx)
	if scoped {
		byID := map[string]string{}
		for _, r := range s.engine.Policy().Rules {
			byID[r.ID()] = r.Tenant
		}
		for i, id := range req.GetPolicyIds() {
			if t, ok := byID[id]; ok && t != own {
				return nil, statusErr(codes.NotFound, authzv1.ErrorReason_ERROR_REASON_POLICY_NOT_FOUND, map[string]string{"field": fmt.Sprintf("policy_ids[%d]", i)}, "policy_ids[%d]: no policy line %q", i, id)
			}
		}
	}
	for i, p := range req.GetPolicies() {
		r, err := ruleFromProto(p, fmt.Sprintf("policies[%d]", i))
		if err != nil {
			return nil, invalidField(authzv1.ErrorReason_ERROR_REASON_INVALID_POLICY, fmt.Sprintf("policies[%d]", i), "%v", err)
		}
		if scoped && r.Tenant != own {
			return nil, otherTenant(fmt.Sprintf("policies[%d].tenant", i), "policies[%d].tenant: %q: an admin of tenant %q may change only lines of tenant %q", i, r.Tenant, own, own)
		}
		ch.RemoveRules = append(ch.RemoveRules, r)
	}
	for i, l := range req.GetRoleLinks() {
		link, err := linkFromProto(l, fmt.Sprintf("role_links[%d]", i))
		if err != nil {
			return nil, invalidField(authzv1.ErrorReason_ERROR_REASON_INVALID_POLICY, fmt.Sprintf("role_links[%d]", i), "%v", err)
		}
		if scoped && link.Tenant != own {
			return nil, otherTenant(fmt.Sprintf("role_links[%d].tenant", i), "role_links[%d].tenant: %q: an admin of tenant %q may change only links of tenant %q", i, link.Tenant, own, own)
		}
		ch.RemoveLinks = append(ch.RemoveLinks, link)
	}
	before := s.engine.Version()
	v, err := s.applyChange(ctx, ch)
	if err != nil {
		return nil, err
	}
	removed := len(ch.RemoveRuleIDs) + len(ch.RemoveRules) + len(ch.RemoveLinks)
	if v == before {
		removed = 0
	}
	return &authzv1.RemovePoliciesResponse{PolicyVersion: v, Removed: int32(removed)}, nil
}

// applyChange stores the change and reloads, so the answer's version is in
// force for the caller's next decision.
func (s *Server) applyChange(ctx context.Context, ch authzstore.Change) (int64, error) {
	v, _, err := s.store.Apply(ctx, ch)
	if err != nil {
		return 0, toStatus(err)
	}
	// The reload must not fail because the caller went away: a failed reload
	// denies everything until the next one.
	if err := s.reload(context.WithoutCancel(ctx)); err != nil {
		return 0, toStatus(fmt.Errorf("change committed at policy version %d but the reload failed (every decision is denied until it succeeds): %w", v, err))
	}
	return v, nil
}

// tenantScope returns the tenant a tenant admin is confined to
// (auth.Identity.TenantAdmin); scoped is false for global admins and
// service credentials.
func tenantScope(ctx context.Context) (tenant string, scoped bool) {
	id, ok := auth.Caller(ctx)
	if !ok {
		return "", false
	}
	return id.TenantAdmin()
}

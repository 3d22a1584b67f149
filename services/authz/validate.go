package authz

import (
	"fmt"
	"strings"
	"unicode/utf8"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

// Request limits checked before the handlers run.
const (
	maxCandidates  = 10_000  // FilterResourcesRequest.candidates
	maxNameBytes   = 512     // a candidate or target name
	maxPolicyItems = 100_000 // lines + links + ids of one Add/RemovePolicies
	maxPageSize    = 1000    // ListDecisionsRequest.page_size
)

// Validate checks a request before its handler runs (called by the shared
// validation interceptor). It returns a gRPC status error with
// INVALID_ARGUMENT and an ErrorInfo naming the field, or nil.
func (s *Server) Validate(fullMethod string, req any) error {
	return validateRequest(fullMethod, req)
}

// bad is INVALID_ARGUMENT (ERROR_REASON_INVALID_REQUEST) with a
// google.rpc.BadRequest naming field and why (a grpcx.Violation* reason).
func bad(field, why, format string, args ...any) error {
	return violation(authzv1.ErrorReason_ERROR_REASON_INVALID_REQUEST, field, why, format, args...)
}

// invalidPolicy is ERROR_REASON_INVALID_POLICY for the line or link at
// item; the violation names the precise field when err's text starts with
// one ("policies[1].conditions[0]: ...").
func invalidPolicy(item string, err error) error {
	field, desc := grpcx.SplitField(err.Error())
	if field == "" {
		field = item
	}
	return violation(authzv1.ErrorReason_ERROR_REASON_INVALID_POLICY, field, grpcx.ViolationInvalid, "%s", desc)
}

func validatePrincipal(p *typev1.Principal) error {
	if p == nil {
		return nil // the caller's own principal
	}
	if n := len(p.GetSubject()); n > 256 || !utf8.ValidString(p.GetSubject()) {
		return bad("principal.subject", grpcx.ViolationTooLong, "want at most 256 bytes of UTF-8")
	}
	if p.GetSubject() == "" && len(p.GetRoles()) == 0 {
		return bad("principal", grpcx.ViolationRequired, "needs a subject or at least one role")
	}
	if len(p.GetTenant()) > 128 {
		return bad("principal.tenant", grpcx.ViolationTooLong, "want at most 128 bytes")
	}
	if len(p.GetRoles()) > 256 {
		return bad("principal.roles", grpcx.ViolationTooMany, "at most 256 roles")
	}
	for i, r := range p.GetRoles() {
		if r == "" || len(r) > 128 {
			return bad(fmt.Sprintf("principal.roles[%d]", i), grpcx.ViolationInvalid, "want 1..128 bytes")
		}
	}
	return nil
}

func validateResource(rt authzv1.ResourceType) error {
	if _, ok := resourceNames[rt]; !ok {
		return bad("resource_type", grpcx.ViolationRequired, "required: one of %s", strings.Join(authzcasbin.ResourceTypes, ", "))
	}
	return nil
}

func validateRequest(fullMethod string, req any) error {
	switch r := req.(type) {
	case *authzv1.AuthorizeRequest:
		if err := validatePrincipal(r.GetPrincipal()); err != nil {
			return err
		}
		if err := validateResource(r.GetResourceType()); err != nil {
			return err
		}
		if _, ok := actionNames[r.GetAction()]; !ok {
			return bad("action", grpcx.ViolationRequired, "required: list, call or use")
		}
		if n := len(r.GetTarget()); n == 0 || n > maxNameBytes {
			return bad("target", grpcx.ViolationInvalid, "want 1..%d bytes", maxNameBytes)
		}
	case *authzv1.FilterResourcesRequest:
		if err := validatePrincipal(r.GetPrincipal()); err != nil {
			return err
		}
		if err := validateResource(r.GetResourceType()); err != nil {
			return err
		}
		if _, ok := actionNames[r.GetAction()]; !ok && r.GetAction() != authzv1.Action_ACTION_UNSPECIFIED {
			return bad("action", grpcx.ViolationUnknownValue, "unknown action %d", r.GetAction())
		}
		if len(r.GetCandidates()) > maxCandidates {
			return bad("candidates", grpcx.ViolationTooMany, "at most %d candidates, got %d", maxCandidates, len(r.GetCandidates()))
		}
		for i, c := range r.GetCandidates() {
			if n := len(c); n == 0 || n > maxNameBytes {
				return bad(fmt.Sprintf("candidates[%d]", i), grpcx.ViolationInvalid, "want 1..%d bytes", maxNameBytes)
			}
		}
	case *authzv1.AddPoliciesRequest:
		n := len(r.GetPolicies()) + len(r.GetRoleLinks())
		if n == 0 {
			return bad("policies", grpcx.ViolationRequired, "nothing to add: give policies or role_links")
		}
		if n > maxPolicyItems {
			return bad("policies", grpcx.ViolationTooMany, "at most %d lines and links per request", maxPolicyItems)
		}
		for i, p := range r.GetPolicies() {
			if _, err := ruleFromProto(p, fmt.Sprintf("policies[%d]", i)); err != nil {
				return invalidPolicy(fmt.Sprintf("policies[%d]", i), err)
			}
		}
		for i, l := range r.GetRoleLinks() {
			if _, err := linkFromProto(l, fmt.Sprintf("role_links[%d]", i)); err != nil {
				return invalidPolicy(fmt.Sprintf("role_links[%d]", i), err)
			}
		}
	case *authzv1.RemovePoliciesRequest:
		n := len(r.GetPolicyIds()) + len(r.GetPolicies()) + len(r.GetRoleLinks())
		if n == 0 {
			return bad("policy_ids", grpcx.ViolationRequired, "nothing to remove: give policy_ids, policies or role_links")
		}
		if n > maxPolicyItems {
			return bad("policy_ids", grpcx.ViolationTooMany, "at most %d items per request", maxPolicyItems)
		}
		for i, id := range r.GetPolicyIds() {
			if len(id) != 14 || id[:2] != "p:" {
				return bad(fmt.Sprintf("policy_ids[%d]", i), grpcx.ViolationInvalid, "%q is not a policy id (p:<12 hex>)", id)
			}
		}
	case *authzv1.ListDecisionsRequest:
		if r.GetPageSize() < 0 || r.GetPageSize() > maxPageSize {
			return bad("page_size", grpcx.ViolationOutOfRange, "want 0..%d", maxPageSize)
		}
		if _, ok := decodePageToken(r.GetPageToken()); !ok {
			return bad("page_token", grpcx.ViolationInvalid, "not a token from a previous response")
		}
		if r.GetResourceType() != authzv1.ResourceType_RESOURCE_TYPE_UNSPECIFIED {
			if err := validateResource(r.GetResourceType()); err != nil {
				return err
			}
		}
	case *authzv1.RecordRefusalRequest:
		if err := validatePrincipal(r.GetPrincipal()); err != nil {
			return err
		}
		if r.GetResourceType() != authzv1.ResourceType_RESOURCE_TYPE_CREDENTIAL { // failed logins
			if err := validateResource(r.GetResourceType()); err != nil {
				return err
			}
		}
		if _, ok := actionNames[r.GetAction()]; !ok {
			return bad("action", grpcx.ViolationRequired, "required: list, call or use")
		}
		if n := len(r.GetTarget()); n == 0 || n > maxNameBytes {
			return bad("target", grpcx.ViolationInvalid, "want 1..%d bytes", maxNameBytes)
		}
		if n := len(r.GetReason().GetCode()); n == 0 || n > 128 {
			return bad("reason.code", grpcx.ViolationInvalid, "want 1..128 bytes")
		}
		if len(r.GetReason().GetMessage()) > 1024 {
			return bad("reason.message", grpcx.ViolationTooLong, "at most 1024 bytes")
		}
	case *authzv1.ListPoliciesRequest, *authzv1.WatchPolicyRequest:
	}
	return nil
}

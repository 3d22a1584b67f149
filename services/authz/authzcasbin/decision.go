package authzcasbin

import (
	"fmt"
	"slices"
	"strings"
)

// Reason codes of a decision. They are stable: callers and audits match on them
// (docs/deerflow.md §3.3/§3.8 for the first three).
const (
	// CodeAllowed: an allow rule matched and no deny rule did.
	CodeAllowed = "authz.allowed"
	// CodeDenied: an unconditional deny rule matched.
	CodeDenied = "authz.denied"
	// CodeNoPolicy: no rule matched (default deny).
	CodeNoPolicy = "authz.no_policy"
	// CodeConditionFailed: a condition decided the denial — a conditional deny
	// rule applied, or allow rules matched but none of their conditions held.
	// The message names the condition.
	CodeConditionFailed = "authz.condition_failed"
	// CodeEvaluatorError: the evaluator failed (matcher error, panic, custom
	// model error); always a deny.
	CodeEvaluatorError = "authz.evaluator_error"
	// CodeInvalidRequest: the request is malformed (no roles and no subject,
	// unknown resource type or action, bad tenant, empty target).
	CodeInvalidRequest = "authz.invalid_request"
	// CodeUnknownRole: none of the principal's roles (nor its user subject)
	// appears in any rule or role link.
	CodeUnknownRole = "authz.unknown_role"
	// CodeStoreError: the policy could not be loaded from the store; every
	// decision is denied until a reload succeeds.
	CodeStoreError = "authz.store_error"
	// CodeAuditError: the decision could not be written to the decision log
	// before answering; the call is denied.
	CodeAuditError = "authz.audit_error"
	// CodeAuditFlood: the principal exceeded its decision-record rate
	// (authz.decision_rate); its records are counted, not stored, and one
	// record per window says so. An audited allow that is not stored is
	// denied with this code.
	CodeAuditFlood = "authz.audit_flood"
	// CodeFailOpen: FilterResources kept a candidate although the evaluation
	// failed, because fail-open is configured for FilterResources.
	CodeFailOpen = "authz.fail_open"
)

// Reason is one reason of a decision.
type Reason struct {
	Code    string
	Message string
}

// Request is one authorization question about a principal.
type Request struct {
	Subject  string   // principal subject ("" allowed when roles are given)
	Tenant   string   // principal tenant (Casbin domain); "" means "default"
	Roles    []string // principal roles
	Resource string   // resource type: tool | skill | model | mcp_server
	Action   string   // call | list | use
	Target   string   // resource name
	Cond     CondInput
}

// Decision is the answer to a Request. The zero value is a deny.
type Decision struct {
	Allow         bool
	Reasons       []Reason // first reason is the primary one; never empty
	PolicyID      string   // the deciding rule's ID ("" when no rule decided)
	PolicyVersion int64    // version of the policy snapshot used (0 when none)
	Cached        bool     // served from the decision cache
}

// Code is the primary reason code.
func (d Decision) Code() string {
	if len(d.Reasons) == 0 {
		return ""
	}
	return d.Reasons[0].Code
}

func deny(code, msg string, version int64) Decision {
	return Decision{Reasons: []Reason{{Code: code, Message: msg}}, PolicyVersion: version}
}

// DefaultTenant is used when a request names no tenant.
const DefaultTenant = "default"

// normalize validates the request and returns its tenant and sorted, unique
// subjects (roles, then user:<subject>). The error is an invalid_request message.
func (r *Request) normalize() (tenant string, subjects []string, err error) {
	tenant = r.Tenant
	if tenant == "" {
		tenant = DefaultTenant
	}
	if tenant == Wildcard || !nameRe.MatchString(tenant) {
		return "", nil, fmt.Errorf("tenant %q is not a valid tenant name", tenant)
	}
	if !oneOf(r.Resource, ResourceTypes) {
		return "", nil, fmt.Errorf("resource type %q is not one of %s", r.Resource, strings.Join(ResourceTypes, ", "))
	}
	if !oneOf(r.Action, Actions) {
		return "", nil, fmt.Errorf("action %q is not one of %s", r.Action, strings.Join(Actions, ", "))
	}
	if r.Target == "" || len(r.Target) > 512 {
		return "", nil, fmt.Errorf("target must be a non-empty name of at most 512 bytes")
	}
	subjects = make([]string, 0, len(r.Roles)+1)
	for _, role := range r.Roles {
		// A role that is not a valid role name (e.g. from a JWT claim) can
		// appear in no rule or link, so it cannot grant or deny anything:
		// it is dropped. "user:..." is never taken as a user subject.
		if strings.HasPrefix(role, UserPrefix) || !nameRe.MatchString(role) {
			continue
		}
		subjects = append(subjects, role)
	}
	slices.Sort(subjects)
	subjects = slices.Compact(subjects)
	if r.Subject != "" {
		subjects = append(subjects, UserPrefix+r.Subject)
	}
	if len(subjects) == 0 {
		return "", nil, fmt.Errorf("principal has neither a valid role nor a subject")
	}
	return tenant, subjects, nil
}

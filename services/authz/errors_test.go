package authz

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// TestValidationErrorDetails: a bad request of every RPC that has fields to
// check answers INVALID_ARGUMENT with an ErrorInfo of the authz domain and a
// google.rpc.BadRequest naming the field (proto field names) and a reason.
func TestValidationErrorDetails(t *testing.T) {
	h := start(t, nil)
	ctx := ctxT(t)
	tool := authzv1.ResourceType_RESOURCE_TYPE_TOOL
	call := authzv1.Action_ACTION_CALL
	cases := []struct {
		name   string
		call   func() error
		reason string
		field  string
		why    string
	}{
		{"authorize without resource type", func() error {
			_, err := h.svc.Authorize(ctx, &authzv1.AuthorizeRequest{Action: call, Target: "x"})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "resource_type", grpcx.ViolationRequired},
		{"authorize without target", func() error {
			_, err := h.svc.Authorize(ctx, &authzv1.AuthorizeRequest{ResourceType: tool, Action: call})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "target", grpcx.ViolationInvalid},
		{"authorize with a bad role", func() error {
			_, err := h.svc.Authorize(ctx, &authzv1.AuthorizeRequest{Principal: &typev1.Principal{Subject: "a", Roles: []string{"ok", ""}}, ResourceType: tool, Action: call, Target: "x"})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "principal.roles[1]", grpcx.ViolationInvalid},
		{"filter with an empty candidate", func() error {
			_, err := h.svc.FilterResources(ctx, &authzv1.FilterResourcesRequest{ResourceType: tool, Candidates: []string{"a", ""}})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "candidates[1]", grpcx.ViolationInvalid},
		{"add nothing", func() error {
			_, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "policies", grpcx.ViolationRequired},
		{"add a line without tenant", func() error {
			_, err := h.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{{Role: "ops", ResourceType: tool, Target: "x", Action: call, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}}})
			return err
		}, "ERROR_REASON_INVALID_POLICY", "policies[0].tenant", grpcx.ViolationInvalid},
		{"remove a malformed id", func() error {
			_, err := h.admin.RemovePolicies(ctx, &authzv1.RemovePoliciesRequest{PolicyIds: []string{"p:123"}})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "policy_ids[0]", grpcx.ViolationInvalid},
		{"list decisions with a huge page", func() error {
			_, err := h.admin.ListDecisions(ctx, &authzv1.ListDecisionsRequest{PageSize: 5000})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "page_size", grpcx.ViolationOutOfRange},
		{"list decisions with a forged token", func() error {
			_, err := h.admin.ListDecisions(ctx, &authzv1.ListDecisionsRequest{PageToken: "not-a-token"})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "page_token", grpcx.ViolationInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if codeOf(err) != codes.InvalidArgument {
				t.Fatalf("code %v (%v), want INVALID_ARGUMENT", codeOf(err), err)
			}
			ei, br := grpcx.ErrorDetails(err)
			if ei.GetDomain() != errorDomain || ei.GetReason() != tc.reason || ei.GetMetadata()["field"] != tc.field {
				t.Errorf("ErrorInfo %v, want %s/%s field %s", ei, errorDomain, tc.reason, tc.field)
			}
			if v := br.GetFieldViolations(); len(v) != 1 || v[0].GetField() != tc.field || v[0].GetReason() != tc.why || v[0].GetDescription() == "" {
				t.Errorf("BadRequest %v, want field %s reason %s", br, tc.field, tc.why)
			}
		})
	}
}

// TestRESTErrorBodyCarriesBadRequest: over REST the gateway's error body
// carries the ErrorInfo and the BadRequest in "details".
func TestRESTErrorBodyCarriesBadRequest(t *testing.T) {
	h := start(t, nil)
	code, body := h.restCall("POST", "/v1/authz:authorize", tokSvc, map[string]any{
		"resource_type": "RESOURCE_TYPE_TOOL", "action": "ACTION_CALL", "target": "",
	})
	if code != http.StatusBadRequest {
		t.Fatalf("status %d, body %v", code, body)
	}
	details, _ := body["details"].([]any)
	var info, violations bool
	for _, d := range details {
		m, _ := d.(map[string]any)
		switch m["@type"] {
		case "type.googleapis.com/google.rpc.ErrorInfo":
			info = m["reason"] == "ERROR_REASON_INVALID_REQUEST" && m["domain"] == errorDomain
		case "type.googleapis.com/google.rpc.BadRequest":
			fv, _ := m["field_violations"].([]any)
			if len(fv) == 1 {
				v, _ := fv[0].(map[string]any)
				violations = v["field"] == "target" && v["reason"] == grpcx.ViolationInvalid
			}
		}
	}
	if !info || !violations {
		t.Fatalf("details %v: want the ErrorInfo and a BadRequest naming target", details)
	}
}

// TestStoreFailureHidesDriverText: a failing policy store answers
// UNAVAILABLE with ERROR_REASON_STORE_UNAVAILABLE and a message of our own;
// the driver's text stays in the error's cause (logged by the chain).
func TestStoreFailureHidesDriverText(t *testing.T) {
	h := start(t, nil)
	ctx := ctxT(t)
	// The real sqlite store, closed under the server: every query fails
	// with the driver's own error.
	if err := h.srv.store.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, driverErr := h.srv.store.ListDecisions(context.Background(), authzstore.Filter{Tenant: "default"}, 1, 0)
	if driverErr == nil {
		t.Fatal("a closed store answered")
	}
	_, err := h.admin.ListDecisions(ctx, &authzv1.ListDecisionsRequest{})
	if codeOf(err) != codes.Unavailable || reasonOf(err) != "ERROR_REASON_STORE_UNAVAILABLE" {
		t.Fatalf("got %v, want UNAVAILABLE STORE_UNAVAILABLE", err)
	}
	msg := err.Error()
	for _, leak := range []string{driverErr.Error(), "sql", "database", "authz.db", h.dir} {
		if strings.Contains(msg, leak) {
			t.Errorf("message %q leaks %q", msg, leak)
		}
	}
	// The mapping keeps the driver error as the cause for the log.
	if c := grpcx.Cause(toStatus(driverErr)); c == nil || c.Error() != driverErr.Error() {
		t.Errorf("cause %v, want the driver error", c)
	}
}

// TestErrorReasonEnumHoldsSharedReasons: the reasons the shared safety net
// uses by name exist in the authz ErrorReason enum.
func TestErrorReasonEnumHoldsSharedReasons(t *testing.T) {
	for _, r := range []string{grpcx.ReasonInternal, grpcx.ReasonInvalidRequest, grpcx.ReasonUnspecified} {
		if _, ok := authzv1.ErrorReason_value[r]; !ok {
			t.Errorf("authz ErrorReason lacks %s", r)
		}
	}
}

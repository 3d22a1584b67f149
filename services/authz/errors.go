package authz

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// errorDomain is the ErrorInfo domain of authz errors.
const errorDomain = "authz.toolplane.dev"

// statusErr builds a status error with a google.rpc.ErrorInfo whose reason is
// the authz ErrorReason name (docs/architecture.md §2, "Errors").
func statusErr(code codes.Code, reason authzv1.ErrorReason, meta map[string]string, format string, args ...any) error {
	st := status.New(code, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason.String(), Domain: errorDomain, Metadata: meta}); err == nil {
		st = d
	}
	return st.Err()
}

// invalidField is INVALID_ARGUMENT naming the field in the ErrorInfo
// metadata "field" and a google.rpc.BadRequest (validate.go, policy.go).
func invalidField(reason authzv1.ErrorReason, field, format string, args ...any) error {
	return violation(reason, field, grpcx.ViolationInvalid, format, args...)
}

// violation is invalidField with a specific field-violation reason.
func violation(reason authzv1.ErrorReason, field, why, format string, args ...any) error {
	return grpcx.Invalid(errorDomain, reason.String(), grpcx.Violation{Field: field, Reason: why, Description: fmt.Sprintf(format, args...)})
}

// otherTenant is PERMISSION_DENIED for a tenant admin reaching outside its
// tenant; field names the request field.
func otherTenant(field, format string, args ...any) error {
	return statusErr(codes.PermissionDenied, authzv1.ErrorReason_ERROR_REASON_OTHER_TENANT, map[string]string{"field": field}, format, args...)
}

func forgedPrincipal(format string, args ...any) error {
	return statusErr(codes.PermissionDenied, authzv1.ErrorReason_ERROR_REASON_FORGED_PRINCIPAL, nil, format, args...)
}

// toStatus is the single mapping of domain errors of the policy and log paths
// to gRPC status. Store failures are UNAVAILABLE with a message of our own;
// the driver's text is the hidden cause, logged with the request id by the
// interceptor chain (docs/decisions/0030-error-model.md).
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	switch {
	case errors.Is(err, authzcasbin.ErrInvalidPolicy):
		return statusErr(codes.InvalidArgument, authzv1.ErrorReason_ERROR_REASON_INVALID_POLICY, nil, "%v", err)
	case errors.Is(err, authzstore.ErrReadOnly):
		return statusErr(codes.FailedPrecondition, authzv1.ErrorReason_ERROR_REASON_POLICY_READ_ONLY, nil, "%v", err)
	case errors.Is(err, authzstore.ErrNotFound):
		return statusErr(codes.NotFound, authzv1.ErrorReason_ERROR_REASON_POLICY_NOT_FOUND, nil, "%v", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return grpcx.WithCause(grpcx.Status(codes.Unavailable, errorDomain, authzv1.ErrorReason_ERROR_REASON_STORE_UNAVAILABLE.String(), nil,
		"the policy store is unavailable; retry later"), err)
}

package runtime

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/status"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
)

// storeErr maps a failure of the runtime store (threads, runs, agents,
// events) to the status the caller sees: the caller's cancellation or
// deadline as such; anything else INTERNAL "internal error (request id …)"
// with ERROR_REASON_INTERNAL. The driver's text never reaches the caller; it
// is logged with the request id by the interceptor chain
// (docs/decisions/0030-error-model.md).
func storeErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return grpcx.Internal(errorDomain, runtimev1.ErrorReason_ERROR_REASON_INTERNAL.String(), err)
}

// invalid is INVALID_ARGUMENT (ERROR_REASON_INVALID_REQUEST) with an
// ErrorInfo and a google.rpc.BadRequest naming field and why (a
// grpcx.Violation* reason); validate.go.
func invalid(field, why, format string, args ...any) error {
	return grpcx.Invalid(errorDomain, runtimev1.ErrorReason_ERROR_REASON_INVALID_REQUEST.String(),
		grpcx.Violation{Field: field, Reason: why, Description: fmt.Sprintf(format, args...)})
}

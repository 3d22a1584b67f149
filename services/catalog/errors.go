package catalog

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// errorDomain is the ErrorInfo domain of catalog errors.
const errorDomain = "catalog.toolplane.dev"

// statusErr builds a status error with a google.rpc.ErrorInfo whose reason is
// the catalog ErrorReason name (ARCHITECTURE §2, "Errors").
func statusErr(code codes.Code, reason catalogv1.ErrorReason, meta map[string]string, format string, args ...any) error {
	st := status.New(code, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason.String(), Domain: errorDomain, Metadata: meta}); err == nil {
		st = d
	}
	return st.Err()
}

func toolNotFound(name string) error {
	return statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_FOUND, map[string]string{"name": name},
		"tool %q not found", name)
}

func serverNotFound(name string) error {
	return statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_SERVER_NOT_FOUND, map[string]string{"name": name},
		"server %q not found", name)
}

func invalidConfig(err error) error {
	return statusErr(codes.InvalidArgument, catalogv1.ErrorReason_ERROR_REASON_INVALID_SERVER_CONFIG, nil, "%v", err)
}

// callError maps an error of a tool call to its status (the single mapping
// of the call path): a server not READY is UNAVAILABLE with its state; the
// call's own timeout is DEADLINE_EXCEEDED; the caller's cancellation is
// CANCELLED; an MCP invalid-params error is INVALID_ARGUMENT; anything else
// from upstream is UNAVAILABLE.
func callError(ctx context.Context, tool string, timedOut bool, err error) error {
	var nr *catalogmcp.NotReadyError
	var rpc *catalogmcp.RPCError
	switch {
	case errors.As(err, &nr):
		return statusErr(codes.Unavailable, catalogv1.ErrorReason_ERROR_REASON_SERVER_UNAVAILABLE,
			map[string]string{"server": nr.Server, "state": "SERVER_STATE_" + nr.State.String()}, "tool %q: %v", tool, nr)
	case errors.Is(err, catalogmcp.ErrStatic):
		return statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_CALLABLE, nil,
			"tool %q belongs to a static server: %v", tool, err)
	case timedOut || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil):
		return statusErr(codes.DeadlineExceeded, catalogv1.ErrorReason_ERROR_REASON_CALL_TIMEOUT, nil,
			"tool %q: call timed out", tool)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "tool %q: call cancelled", tool)
	case errors.As(err, &rpc) && rpc.Code == -32602:
		return statusErr(codes.InvalidArgument, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR, nil, "tool %q: %v", tool, err)
	}
	return statusErr(codes.Unavailable, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR, nil, "tool %q: %v", tool, err)
}

package catalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// errorDomain is the ErrorInfo domain of catalog errors.
const errorDomain = "catalog.toolplane.dev"

// statusErr builds a status error with a google.rpc.ErrorInfo whose reason is
// the catalog ErrorReason name (docs/architecture.md §2, "Errors").
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

// invalidConfig is INVALID_ARGUMENT for a server configuration written
// through the API: the validation text names the field ("servers[2].name:
// ..."), which also becomes the BadRequest field violation.
func invalidConfig(err error) error {
	return invalidServerConfig(-1, err)
}

// invalidServerConfig is invalidConfig for servers[i] of ReplaceServers: the
// validation text names the file key ("mcpServers.fx.env.NODE_OPTIONS:
// ..."), the field violation the request field ("servers[3].env.NODE_OPTIONS").
func invalidServerConfig(i int, err error) error {
	msg := err.Error()
	field, desc := grpcx.SplitField(msg)
	if key, rest, ok := strings.Cut(msg, ": "); ok && i >= 0 && strings.HasPrefix(key, "mcpServers.") {
		field = fmt.Sprintf("servers[%d]", i)
		if parts := strings.SplitN(key, ".", 3); len(parts) == 3 {
			field += "." + parts[2]
		}
		desc = rest
	}
	return grpcx.InvalidMessage(errorDomain, catalogv1.ErrorReason_ERROR_REASON_INVALID_SERVER_CONFIG.String(), msg, nil,
		grpcx.Violation{Field: field, Reason: grpcx.ViolationInvalid, Description: desc})
}

// configUnavailable is extensions_config.json failing to load (code
// FAILED_PRECONDITION) or to be written (INTERNAL): the message names the
// file's role, the cause (path, parser or file-system text) goes to the log.
func configUnavailable(code codes.Code, err error) error {
	msg := "extensions_config cannot be loaded; the cause is in the server log"
	if code != codes.FailedPrecondition {
		msg = "extensions_config cannot be written; the cause is in the server log"
	}
	return grpcx.WithCause(grpcx.Status(code, errorDomain, catalogv1.ErrorReason_ERROR_REASON_CONFIG_UNAVAILABLE.String(), nil, msg), err)
}

// callError maps an error of a tool call to its status (the single mapping
// of the call path): a server not READY is UNAVAILABLE with its state; the
// call's own timeout is DEADLINE_EXCEEDED; the caller's cancellation is
// CANCELLED; an MCP invalid-params error is INVALID_ARGUMENT; anything else
// from upstream is UNAVAILABLE.
func callError(ctx context.Context, tool string, timedOut bool, err error) error {
	var nr *catalogmcp.NotReadyError
	var rpc *catalogmcp.RPCError
	var na *catalogmcp.NeedsAuthError
	var no *catalogmcp.NotOwnerError
	var ts *catalogmcp.TenantSessionsError
	switch {
	case errors.As(err, &na):
		// docs/architecture.md §10.6: a clear "connect it" answer, not a
		// transport error.
		return statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_NEEDS_AUTH, map[string]string{"server": na.Server},
			"tool %q: server %s needs authorization: ask the user to connect %s (toolplane servers connect %s)", tool, na.Server, na.Server, na.Server)
	case errors.As(err, &nr):
		// The server's last error (process exit text, dial errors) stays in
		// the log and in GetServer for operators.
		return grpcx.WithCause(grpcx.Status(codes.Unavailable, errorDomain, catalogv1.ErrorReason_ERROR_REASON_SERVER_UNAVAILABLE.String(),
			map[string]string{"server": nr.Server, "state": "SERVER_STATE_" + nr.State.String()},
			fmt.Sprintf("tool %q: server %s is %s", tool, nr.Server, nr.State)), err)
	case errors.As(err, &no):
		// A stateful server runs on one replica (placement.go); the
		// runtime's balancer sends its calls there, so this is a caller
		// without it, or the short window of a hand-over: retryable.
		return grpcx.Status(codes.Unavailable, errorDomain, catalogv1.ErrorReason_ERROR_REASON_SERVER_UNAVAILABLE.String(),
			map[string]string{"server": no.Server, "owner": no.Owner},
			fmt.Sprintf("tool %q: %v", tool, no)).Err()
	case errors.Is(err, catalogmcp.ErrNoThreadWorkspace):
		return statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_THREAD_WORKSPACE_UNAVAILABLE, map[string]string{"tool": tool},
			"tool %q: %v", tool, err)
	case errors.As(err, &ts):
		// The tenant's own sessions are all in use at
		// catalog.sessions.max_scoped_per_tenant (catalogmcp/pool.go).
		return statusErr(codes.ResourceExhausted, catalogv1.ErrorReason_ERROR_REASON_SERVER_UNAVAILABLE,
			map[string]string{"field": "catalog.sessions.max_scoped_per_tenant", "limit": strconv.Itoa(ts.Limit)},
			"tool %q: %v", tool, ts)
	case errors.Is(err, catalogmcp.ErrStatic):
		return statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_TOOL_NOT_CALLABLE, nil,
			"tool %q belongs to a static server and cannot be called", tool)
	case timedOut || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil):
		return statusErr(codes.DeadlineExceeded, catalogv1.ErrorReason_ERROR_REASON_CALL_TIMEOUT, nil,
			"tool %q: call timed out", tool)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "tool %q: call cancelled", tool)
	case errors.As(err, &rpc) && rpc.Code == -32602:
		// The upstream's own JSON-RPC error message is its answer to the
		// caller's arguments, not our internal text: it is passed on.
		return statusErr(codes.InvalidArgument, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR, nil, "tool %q: %v", tool, rpc)
	case errors.As(err, &rpc):
		return statusErr(codes.Unavailable, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR, nil, "tool %q: %v", tool, rpc)
	}
	// Transport and process failures (broken pipes, dial errors, exit
	// statuses) are logged, not returned.
	return grpcx.WithCause(grpcx.Status(codes.Unavailable, errorDomain, catalogv1.ErrorReason_ERROR_REASON_UPSTREAM_ERROR.String(), nil,
		fmt.Sprintf("tool %q: the MCP server failed; the cause is in the server log", tool)), err)
}

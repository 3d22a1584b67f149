package runtimechain

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// ErrorNormalisation turns errors of the inner steps into results
// (docs/deerflow.md §6.1): a *BusinessError is BUSINESS `Error: ...`;
// anything else (a status, a timeout, an exception) is RUNTIME with a
// bounded detail and the recovery sentence.
type ErrorNormalisation struct{}

// Name implements Step.
func (ErrorNormalisation) Name() string { return "error_normalisation" }

// Description implements Step.
func (ErrorNormalisation) Description() string {
	return "inner errors become results: BUSINESS for tool errors, RUNTIME (bounded detail) for the rest; a server not READY is tool.server_unavailable (retry)"
}

// Run implements Step.
func (ErrorNormalisation) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	o, err := next(ctx, c)
	if err != nil {
		return normalise(c, err), nil
	}
	return o, nil
}

func normalise(c *Call, err error) *Outcome {
	var be *BusinessError
	if errors.As(err, &be) {
		return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS, Text: "Error: " + TruncDetail(be.Msg)}
	}
	if server, ok := needsAuth(err); ok {
		return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_RUNTIME, Reason: ReasonNeedsAuth, Text: fmt.Sprintf(
			"Error: Tool '%s' could not run: the user has not connected the MCP server %s (it needs their OAuth login). Ask the user to connect %s (toolplane servers connect %s, or POST /v1/me/connections/%s:connect) and retry the call once they have.",
			c.Name, server, server, server, server)}
	}
	if serverUnavailable(err) {
		return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_RUNTIME, Reason: ReasonServerUnavailable, Text: fmt.Sprintf(
			"Error: Tool '%s' could not run: its server is temporarily unavailable (%s). The tool stays loaded; retry the call in a moment.", c.Name, TruncDetail(status.Convert(err).Message()))}
	}
	kind := "Exception"
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		kind = st.Code().String()
	} else if errors.Is(err, context.DeadlineExceeded) {
		kind = "Timeout"
	}
	detail := TruncDetail(err.Error())
	if detail == "" {
		detail = kind
	}
	return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_RUNTIME, Text: fmt.Sprintf("Error: Tool '%s' failed with %s: %s. %s", c.Name, kind, detail, RecoverySentence)}
}

// ReasonServerUnavailable is the reason code of a call whose MCP server is
// not connected right now (a retry may succeed; the promotion is kept).
const ReasonServerUnavailable = "tool.server_unavailable"

// ReasonNeedsAuth is the reason code of a call to a tool of an OAuth MCP
// server the user has not connected yet (docs/architecture.md §10.6): a
// clear "ask the user to connect NAME" result, not a transport failure.
const ReasonNeedsAuth = "tool.needs_auth"

// needsAuth reports a catalog FAILED_PRECONDITION error with reason
// NEEDS_AUTH and the server it names (ErrorInfo metadata "server").
func needsAuth(err error) (server string, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.FailedPrecondition {
		return "", false
	}
	for _, d := range st.Details() {
		if ei, is := d.(*errdetails.ErrorInfo); is && ei.GetReason() == "ERROR_REASON_NEEDS_AUTH" {
			if server = ei.GetMetadata()["server"]; server != "" {
				return server, true
			}
		}
	}
	return "", false
}

// serverUnavailable reports a catalog UNAVAILABLE error with reason
// SERVER_UNAVAILABLE (the tool's server is not READY).
func serverUnavailable(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == "ERROR_REASON_SERVER_UNAVAILABLE" {
			return true
		}
	}
	return false
}

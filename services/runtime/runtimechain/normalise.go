package runtimechain

import (
	"context"
	"errors"
	"fmt"

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
	return "inner errors become results: BUSINESS for tool errors, RUNTIME (bounded detail) for the rest"
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

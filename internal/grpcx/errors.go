package grpcx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The error model shared by every service (docs/decisions/0030-error-model.md):
// every error leaving a handler is a gRPC status with a google.rpc.ErrorInfo
// (domain "<service>.toolplane.dev", reason a name of the service's
// ErrorReason enum); a validation error also carries a google.rpc.BadRequest
// whose field violations name the field (proto field path) and a reason; a
// store, driver or upstream failure answers a short message of our own while
// its cause is kept out of the status and logged with the request id.

// Field-violation reasons (google.rpc.BadRequest.FieldViolation.reason),
// UPPER_SNAKE_CASE as AIP-193 asks.
const (
	ViolationRequired     = "REQUIRED"      // the field must be set
	ViolationTooLong      = "TOO_LONG"      // a string or bytes field exceeds its limit
	ViolationTooMany      = "TOO_MANY"      // a repeated or map field has too many entries
	ViolationOutOfRange   = "OUT_OF_RANGE"  // a number is outside its range
	ViolationInvalidUTF8  = "INVALID_UTF8"  // a string is not valid UTF-8
	ViolationUnknownValue = "UNKNOWN_VALUE" // an enum value the server does not know
	ViolationInvalid      = "INVALID"       // any other malformed value (format, pattern, combination)
)

// Generic reasons every service's ErrorReason enum defines (the net below
// uses them by name; each service's tests check the enum holds them).
const (
	ReasonInvalidRequest = "ERROR_REASON_INVALID_REQUEST"
	ReasonInternal       = "ERROR_REASON_INTERNAL"
	ReasonUnspecified    = "ERROR_REASON_UNSPECIFIED"
)

// Violation is one field violation of a google.rpc.BadRequest.
type Violation struct {
	// Field is the path of the field in proto field names, e.g.
	// "tool_call.name" or "servers[2].name".
	Field string
	// Reason is one of the Violation* constants.
	Reason string
	// Description says what is wrong, for a human.
	Description string
}

// Status builds a status with a google.rpc.ErrorInfo of domain and reason.
func Status(code codes.Code, domain, reason string, meta map[string]string, msg string) *status.Status {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: domain, Metadata: meta}); err == nil {
		st = d
	}
	return st
}

// Invalid is INVALID_ARGUMENT with an ErrorInfo (metadata "field" names the
// first violation's field) and a google.rpc.BadRequest listing every
// violation. The message is "<field>: <description>" of each violation,
// joined by "; ".
func Invalid(domain, reason string, vs ...Violation) error {
	return InvalidMeta(domain, reason, nil, vs...)
}

// InvalidMeta is Invalid with extra ErrorInfo metadata (the "field" key is
// always the first violation's field).
func InvalidMeta(domain, reason string, meta map[string]string, vs ...Violation) error {
	return InvalidMessage(domain, reason, "", meta, vs...)
}

// InvalidMessage is InvalidMeta with the status message msg (the joined
// violations when msg is "").
func InvalidMessage(domain, reason, msg string, meta map[string]string, vs ...Violation) error {
	if len(vs) == 0 {
		vs = []Violation{{Field: "", Reason: ViolationInvalid, Description: "invalid request"}}
	}
	msgs := make([]string, 0, len(vs))
	br := &errdetails.BadRequest{}
	for _, v := range vs {
		if v.Reason == "" {
			v.Reason = ViolationInvalid
		}
		if v.Field == "" {
			msgs = append(msgs, v.Description)
		} else {
			msgs = append(msgs, v.Field+": "+v.Description)
		}
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description, Reason: v.Reason})
	}
	md := map[string]string{"field": vs[0].Field}
	for k, v := range meta {
		if k != "field" {
			md[k] = v
		}
	}
	if msg == "" {
		msg = strings.Join(msgs, "; ")
	}
	st := status.New(codes.InvalidArgument, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: domain, Metadata: md}, br); err == nil {
		st = d
	}
	return st.Err()
}

// causeError is a status error whose cause stays on the server: gRPC sends
// only GRPCStatus() (status.FromError unwraps to it), the interceptor chain
// logs Cause with the request id.
type causeError struct {
	st    *status.Status
	cause error
}

func (e *causeError) Error() string              { return e.st.Message() }
func (e *causeError) GRPCStatus() *status.Status { return e.st }
func (e *causeError) Unwrap() error              { return e.cause }

// WithCause returns an error answering st to the caller and keeping cause
// for the server log (logged by the interceptor chain with the request id).
// errors.Is/As see the cause.
func WithCause(st *status.Status, cause error) error {
	if cause == nil {
		return st.Err()
	}
	return &causeError{st: st, cause: cause}
}

// Internal is INTERNAL "internal error" with an ErrorInfo of domain and
// reason, hiding cause (logged by the interceptor chain, which also adds the
// request id to the message).
func Internal(domain, reason string, cause error) error {
	return WithCause(Status(codes.Internal, domain, reason, nil, internalMessage("")), cause)
}

// Cause returns the hidden cause of an error built by WithCause, or nil.
func Cause(err error) error {
	var ce *causeError
	if errors.As(err, &ce) {
		return ce.cause
	}
	return nil
}

// ErrorDomain returns the ErrorInfo domain of the service owning fullMethod:
// "/toolplane.catalog.v1.CatalogService/GetTool" → "catalog.toolplane.dev";
// "toolplane.dev" for a method outside the toolplane packages.
func ErrorDomain(fullMethod string) string {
	m := strings.TrimPrefix(fullMethod, "/")
	if rest, ok := strings.CutPrefix(m, "toolplane."); ok {
		if i := strings.IndexByte(rest, '.'); i > 0 {
			return rest[:i] + ".toolplane.dev"
		}
	}
	return "toolplane.dev"
}

// ErrorDetails returns the google.rpc.ErrorInfo and google.rpc.BadRequest
// of a status error (nil when absent).
func ErrorDetails(err error) (*errdetails.ErrorInfo, *errdetails.BadRequest) {
	var ei *errdetails.ErrorInfo
	var br *errdetails.BadRequest
	for _, d := range status.Convert(err).Details() {
		switch v := d.(type) {
		case *errdetails.ErrorInfo:
			ei = v
		case *errdetails.BadRequest:
			br = v
		}
	}
	return ei, br
}

// HasErrorInfo reports whether st carries a google.rpc.ErrorInfo.
func HasErrorInfo(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.ErrorInfo); ok {
			return true
		}
	}
	return false
}

// withBadRequest adds to an INVALID_ARGUMENT status built without one a
// google.rpc.BadRequest naming the field of its message's "<field>: "
// prefix; st is returned unchanged when the message names no field (a
// content error such as an invalid SKILL.md names no request field).
func withBadRequest(st *status.Status) error {
	field, desc := SplitField(st.Message())
	if field == "" {
		return st.Err()
	}
	d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc, Reason: ViolationInvalid}}})
	if err != nil {
		return st.Err()
	}
	return d.Err()
}

func hasBadRequest(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.BadRequest); ok {
			return true
		}
	}
	return false
}

// fieldPrefix matches the "<field path>: " that starts the message of a
// validation status by the project's convention ("tool_call.name: longer
// than 256 characters", `metadata["k"]: ...`, "servers[2].name: required").
var fieldPrefix = regexp.MustCompile(`^([a-z][a-z0-9_]*(?:\[[0-9]+\]|\["[^"]*"\]|\.[a-z][a-z0-9_]*)*): (.+)$`)

// SplitField splits a message of the form "<field path>: <description>"
// (the project's convention for validation text) into its parts; field is ""
// when msg does not start with a field path.
func SplitField(msg string) (field, description string) {
	if m := fieldPrefix.FindStringSubmatch(msg); m != nil {
		return m[1], m[2]
	}
	return "", msg
}

// guard is the error safety net of the interceptor chain (after the
// handler, before logging): it makes every error leaving a service carry an
// ErrorInfo and never carry internal text.
//   - An error from WithCause: the cause is logged; the status goes out.
//   - A status with an ErrorInfo: unchanged, except that an INVALID_ARGUMENT
//     without a BadRequest gets one when its message names the field.
//   - CANCELLED / DEADLINE_EXCEEDED (the caller's or our context): unchanged
//     apart from an ErrorInfo.
//   - A plain error, or INTERNAL / UNKNOWN / DATA_LOSS without ErrorInfo:
//     its text may be anything (driver, file system, upstream), so it is
//     logged and replaced by INTERNAL "internal error (request id …)" with
//     reason ERROR_REASON_INTERNAL.
//   - Any other code without ErrorInfo: code and message are kept (they were
//     chosen by handler code), an ErrorInfo is added (ERROR_REASON_INVALID_REQUEST
//     for INVALID_ARGUMENT, with a BadRequest when the message starts with a
//     field path; ERROR_REASON_UNSPECIFIED otherwise) and the site is logged
//     at warn level so that it gets a proper reason.
func guard(log *slog.Logger, ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	id := RequestID(ctx)
	domain := ErrorDomain(method)
	if cause := Cause(err); cause != nil {
		st := status.Convert(err)
		lvl := slog.LevelWarn
		if isServerFault(st.Code()) {
			lvl = slog.LevelError
		}
		logf(log, ctx, lvl, "rpc error cause", "method", method, "code", st.Code().String(), "request_id", id, "cause", cause.Error())
		if st.Code() == codes.Internal && st.Message() == internalMessage("") {
			// Internal(...) built without a context: add the request id.
			p := st.Proto()
			p.Message = internalMessage(id)
			return status.FromProto(p).Err()
		}
		return st.Err()
	}
	st, ok := status.FromError(err)
	if ok && HasErrorInfo(st) {
		if st.Code() == codes.InvalidArgument && !hasBadRequest(st) {
			return withBadRequest(st)
		}
		return err
	}
	if !ok && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		st, ok = status.FromContextError(err), true
	}
	if !ok || isServerFault(st.Code()) {
		logf(log, ctx, slog.LevelError, "rpc error cause", "method", method, "code", st.Code().String(), "request_id", id, "cause", err.Error())
		return Status(codes.Internal, domain, ReasonInternal, nil, internalMessage(id)).Err()
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded:
		return Status(st.Code(), domain, ReasonUnspecified, nil, st.Message()).Err()
	case codes.InvalidArgument:
		logf(log, ctx, slog.LevelWarn, "rpc error without ErrorInfo", "method", method, "code", st.Code().String(), "request_id", id, "error", st.Message())
		if f, d := SplitField(st.Message()); f != "" && !hasBadRequest(st) {
			return Invalid(domain, ReasonInvalidRequest, Violation{Field: f, Reason: ViolationInvalid, Description: d})
		}
		return Status(codes.InvalidArgument, domain, ReasonInvalidRequest, nil, st.Message()).Err()
	}
	logf(log, ctx, slog.LevelWarn, "rpc error without ErrorInfo", "method", method, "code", st.Code().String(), "request_id", id, "error", st.Message())
	return Status(st.Code(), domain, ReasonUnspecified, nil, st.Message()).Err()
}

// InternalMessage is the message of an INTERNAL status: generic, with the
// request id that finds the cause in the server log.
func internalMessage(id string) string {
	if id == "" {
		return "internal error"
	}
	return fmt.Sprintf("internal error (request id %s)", id)
}

func isServerFault(c codes.Code) bool {
	return c == codes.Internal || c == codes.Unknown || c == codes.DataLoss
}

func logf(log *slog.Logger, ctx context.Context, lvl slog.Level, msg string, attrs ...any) {
	if log != nil {
		log.Log(ctx, lvl, msg, attrs...)
	}
}

package observability

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id of the call it serves.
// The server interceptors set it (internal/grpcx); every log record written
// with a *Context method of a logger from NewLogger then carries it.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id of ctx, or "".
func RequestID(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	s, _ := ctx.Value(requestIDKey{}).(string)
	return s
}

// contextHandler adds request_id and trace_id from the record's context to
// records that do not carry them already, so that every log line of one
// request — in any service, in one process or split — shares the id.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.Handler.Handle(ctx, r)
	}
	id := RequestID(ctx)
	sc := trace.SpanContextFromContext(ctx)
	if id == "" && !sc.HasTraceID() {
		return h.Handler.Handle(ctx, r)
	}
	hasID, hasTrace := false, false
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "request_id":
			hasID = true
		case "trace_id":
			hasTrace = true
		}
		return true
	})
	if id != "" && !hasID {
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc.HasTraceID() && !hasTrace {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

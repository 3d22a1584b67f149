// Package observability sets up logging (log/slog, text or JSON) and
// OpenTelemetry tracing. The trace exporter is off unless the standard
// OTEL_* environment asks for one (OTEL_TRACES_EXPORTER=otlp or an
// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT); W3C trace context is always
// propagated across services.
package observability

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// NewLogger returns a slog logger writing to w at level ("debug", "info",
// "warn", "error") in format "text" or "json". Records written with a
// *Context method carry the request id and trace id of their context.
// Every line passes through Secrets (mask.go) before it reaches w.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	w = Secrets.Writer(w)
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(contextHandler{slog.NewJSONHandler(w, opts)})
	}
	return slog.New(contextHandler{slog.NewTextHandler(w, opts)})
}

// TracingWanted reports whether the OTEL_* environment asks for a trace exporter.
func TracingWanted(getenv func(string) string) bool {
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" {
		return e != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// SetupTracing installs the W3C propagator and, when TracingWanted, an OTLP
// gRPC exporter configured by the standard OTEL_* variables. The returned
// function flushes and stops the provider.
func SetupTracing(ctx context.Context) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !TracingWanted(os.Getenv) {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

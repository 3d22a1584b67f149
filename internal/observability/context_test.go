package observability

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestContextHandlerAddsRequestAndTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, "debug", "json")
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithSpanContext(WithRequestID(context.Background(), "req-1"),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))

	log.InfoContext(ctx, "handler line", "k", "v")
	log.With("svc", "x").WarnContext(ctx, "derived logger line")
	log.InfoContext(ctx, "explicit id", "request_id", "req-1")
	log.Info("no context")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 lines, got %d:\n%s", len(lines), buf.String())
	}
	for i, l := range lines[:3] {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if m["request_id"] != "req-1" || m["trace_id"] != tid.String() {
			t.Errorf("line %d lacks the ids: %s", i, l)
		}
		if strings.Count(l, `"request_id"`) != 1 {
			t.Errorf("line %d has request_id twice: %s", i, l)
		}
	}
	if strings.Contains(lines[3], "request_id") || strings.Contains(lines[3], "trace_id") {
		t.Errorf("a line without context got ids: %s", lines[3])
	}
}

func TestContextHandlerText(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(&buf, "info", "text").InfoContext(WithRequestID(context.Background(), "abc"), "x")
	if !strings.Contains(buf.String(), "request_id=abc") {
		t.Fatalf("text line lacks request_id: %q", buf.String())
	}
	if RequestID(context.Background()) != "" {
		t.Fatal("empty context has a request id")
	}
}

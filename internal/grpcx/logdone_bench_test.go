package grpcx

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkLogDoneInfo is the per-RPC log line of the chain under the
// default info level, where it is not written (docs/performance.md).
func BenchmarkLogDoneInfo(b *testing.B) {
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx := context.Background()
	start := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		logDone(log, ctx, "/toolplane.authz.v1.AuthzService/Authorize", start, nil)
	}
}

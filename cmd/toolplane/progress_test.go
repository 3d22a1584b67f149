package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProgressLine: a call longer than the delay draws a rewriting line and
// erases it; a short call draws nothing.
func TestProgressLine(t *testing.T) {
	var buf lockedBuf
	oldOut, oldDelay, oldTick := progressOut, progressDelay, progressTick
	progressOut, progressDelay, progressTick = &buf, 50*time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { progressOut, progressDelay, progressTick = oldOut, oldDelay, oldTick })

	startProgress("/toolplane.catalog.v1.CatalogService/ListServers")()
	time.Sleep(80 * time.Millisecond)
	if buf.String() != "" {
		t.Fatalf("short call drew %q", buf.String())
	}
	stop := startProgress("/toolplane.runtime.v1.RuntimeService/ExecuteToolCall")
	time.Sleep(150 * time.Millisecond)
	stop()
	stop() // idempotent
	out := buf.String()
	if !strings.Contains(out, "waiting for ExecuteToolCall ... 0s") || !strings.HasSuffix(out, "\r\x1b[K") || strings.Count(out, "\r\x1b[K") < 3 {
		t.Fatalf("progress output %q", out)
	}
}

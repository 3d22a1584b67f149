package auth

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestFailedLoginsOncePerWindow: a source is recorded once per window
// however many times it fails, its next record counts the rest; sources
// beyond MaxPerWindow in one window give one flood record, not one each.
func TestFailedLoginsOncePerWindow(t *testing.T) {
	var mu sync.Mutex
	var got []FailedLogin
	f := NewFailedLogins(FailedLoginsOptions{Window: time.Minute, MaxPerWindow: 5})
	defer f.Close()
	now := time.Unix(1000, 0)
	f.mu.Lock()
	f.now = func() time.Time { return now }
	f.mu.Unlock()
	f.SetSink(func(_ context.Context, r FailedLogin) error { mu.Lock(); got = append(got, r); mu.Unlock(); return nil })
	records := func() []FailedLogin {
		deadline := time.Now().Add(2 * time.Second)
		for {
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if time.Now().After(deadline) || n > 0 {
				time.Sleep(20 * time.Millisecond) // let the queue drain
				mu.Lock()
				defer mu.Unlock()
				out := got
				got = nil
				return out
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range 1000 {
		f.Note("grpc", "10.0.0.1", "/x", "invalid credential")
	}
	if r := records(); len(r) != 1 || r[0].Source != "10.0.0.1" || r[0].Suppressed != 0 {
		t.Fatalf("1000 failures of one source: %+v", r)
	}
	// Another surface of the same source is its own line.
	f.Note("mcp", "10.0.0.1", "POST /mcp", "invalid credential")
	if r := records(); len(r) != 1 || r[0].Surface != "mcp" {
		t.Fatalf("mcp: %+v", r)
	}
	// The next window: one record, counting the 999 not recorded.
	now = now.Add(61 * time.Second)
	f.Note("grpc", "10.0.0.1", "/x", "invalid credential")
	if r := records(); len(r) != 1 || r[0].Suppressed != 999 {
		t.Fatalf("next window: %+v", r)
	}
	// Rotating sources: MaxPerWindow records (one already this window) then one flood record.
	for i := range 500 {
		f.Note("grpc", fmt.Sprintf("10.1.%d.%d", i/250, i%250), "/x", "invalid credential")
	}
	r := records()
	floods := 0
	for _, x := range r {
		if x.Flood {
			floods++
		}
	}
	if len(r) != 5 || floods != 1 {
		t.Fatalf("500 rotating sources: %d records, %d flood", len(r), floods)
	}
}

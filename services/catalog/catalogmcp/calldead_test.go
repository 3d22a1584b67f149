package catalogmcp

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// TestCallEndsWhenSessionDies: a tool call in flight when the stdio child
// dies returns a SessionError at once (CallTool runs on the caller's
// goroutine and the session's death cancels it), not after the tool's
// duration or the caller's deadline.
func TestCallEndsWhenSessionDies(t *testing.T) {
	ev := npmServer(t, "server-everything")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Connect(ctx, catalogconfig.Server{Name: "everything", Command: "node", Args: []string{ev, "stdio"}}, Options{CloseGrace: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(time.Second)
	if r, err := s.CallTool(ctx, "echo", []byte(`{"message":"before"}`), nil); err != nil || textOf(t, r) != "Echo: before" {
		t.Fatalf("echo: %v %v", r, err)
	}
	type out struct {
		err error
		at  time.Time
	}
	done := make(chan out, 1)
	go func() {
		_, err := s.CallTool(ctx, "trigger-long-running-operation", []byte(`{"duration":30,"steps":3}`), nil)
		done <- out{err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // the request is on its way
	killed := time.Now()
	if err := syscall.Kill(s.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		var se *SessionError
		if !errors.As(o.err, &se) {
			t.Fatalf("call ended with %v, want a SessionError", o.err)
		}
		t.Logf("the call ended %v after the child was killed", o.at.Sub(killed))
		if d := o.at.Sub(killed); d > 10*time.Second {
			t.Fatalf("call ended %v after the child died", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("call still in flight 20 s after its session died")
	}
}

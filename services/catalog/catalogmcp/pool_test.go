package catalogmcp

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func procAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestPoolLRUAndIdleTTL: beyond the cap the least recently used idle
// session is closed (its child exits); idle sessions close after the TTL;
// a session in use is never evicted.
func TestPoolLRUAndIdleTTL(t *testing.T) {
	js := npmServer(t, "server-sequential-thinking")
	cfg := stdioServer("seq", js)
	p := NewPool(2, 700*time.Millisecond, time.Second)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(c context.Context) (*Session, error) {
		return Connect(c, cfg, Options{CloseGrace: time.Second}, nil)
	}
	acquire := func(user string) (*Session, func()) {
		s, rel, err := p.Acquire(ctx, ScopeKey{Server: "seq", Tenant: "t", Subject: user}, dial)
		if err != nil {
			t.Fatal(err)
		}
		return s, rel
	}
	a, relA := acquire("a")
	relA()
	b, relB := acquire("b") // keep b busy
	c, relC := acquire("c") // evicts a (LRU, idle), not b (busy)
	relC()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("a's child to exit after eviction", func() bool { return !procAlive(a.Pid()) })
	if keys := p.Keys(); len(keys) != 2 || keys[0].Subject != "c" || keys[1].Subject != "b" {
		t.Fatalf("keys %+v", keys)
	}
	if again, rel := acquire("c"); again != c {
		t.Fatal("c must be reused")
	} else {
		rel()
	}
	// b is busy: the TTL must not close it; c idles out.
	waitFor("c to idle out", func() bool { return !procAlive(c.Pid()) })
	if !procAlive(b.Pid()) {
		t.Fatal("a busy session was closed")
	}
	relB()
	waitFor("b to idle out after release", func() bool { return !procAlive(b.Pid()) })
}

package grpcx

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolplane/toolplane/internal/hashring"
)

// replicas starts n health servers on loopback that count the calls they
// serve per placement test key (sent in the "k" metadata by the test).
type replicas struct {
	addrs []string
	srv   []*grpc.Server
	mu    sync.Mutex
	hits  map[string]map[string]int // addr → key → calls
}

func startReplicas(t *testing.T, n int) *replicas {
	t.Helper()
	r := &replicas{hits: map[string]map[string]int{}}
	for i := 0; i < n; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			r.mu.Lock()
			if r.hits[addr] == nil {
				r.hits[addr] = map[string]int{}
			}
			r.hits[addr][req.(*healthpb.HealthCheckRequest).GetService()]++
			r.mu.Unlock()
			return h(ctx, req)
		}))
		hs := health.NewServer()
		healthpb.RegisterHealthServer(srv, hs)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		r.addrs = append(r.addrs, addr)
		r.srv = append(r.srv, srv)
	}
	return r
}

func (r *replicas) servedBy(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for addr, m := range r.hits {
		if m[key] > 0 {
			out = append(out, addr)
		}
	}
	return out
}

func (r *replicas) reset() {
	r.mu.Lock()
	r.hits = map[string]map[string]int{}
	r.mu.Unlock()
}

// check calls Check with the service name key ("" is served by the health
// server too: the overall status) under the placement key pk.
func check(t *testing.T, c healthpb.HealthClient, pk, key string) *Placement {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, pl := WithPlacementKey(ctx, pk)
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: key})
	if err != nil && !strings.Contains(err.Error(), "unknown service") {
		t.Fatalf("call with key %q: %v", pk, err)
	}
	return pl
}

// TestPlacementSameKeySameReplica: every call of one key lands on the
// replica hashring.Owner names among the list; 300 keys spread over three
// replicas; calls without a key are round-robin.
func TestPlacementSameKeySameReplica(t *testing.T) {
	r := startReplicas(t, 3)
	conn, err := Dial(strings.Join(r.addrs, ","), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	// Every replica gets its first connection before a keyed call is
	// placed (the picker waits for a connecting owner), so no warm-up.
	per := map[string]int{}
	for i := 0; i < 300; i++ {
		k := fmt.Sprintf("per_user\x00fs\x00acme\x00user-%d", i)
		for range 3 {
			pl := check(t, c, k, k)
			if want := hashring.Owner(k, r.addrs); pl.Addr() != want || pl.Owner() != want {
				t.Fatalf("key %d: placed on %s (owner %s), want %s", i, pl.Addr(), pl.Owner(), want)
			}
		}
		got := r.servedBy(k)
		if len(got) != 1 {
			t.Fatalf("key %d served by %v, want one replica", i, got)
		}
		per[got[0]]++
	}
	t.Logf("300 keys over 3 replicas: %v", per)
	for _, a := range r.addrs {
		if per[a] < 60 {
			t.Errorf("replica %s owns %d of 300 keys; want an even spread (>= 60 each): %v", a, per[a], per)
		}
	}
	r.reset()
	for range 30 {
		check(t, c, "", "rr")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.addrs {
		if n := r.hits[a]["rr"]; n != 10 {
			t.Errorf("unkeyed calls on %s = %d of 30; want 10 (round-robin over 3 READY replicas)", a, n)
		}
	}
}

// TestPlacementOwnerDown: stopping the owner of a key moves its calls to
// the second-ranked replica (the record says so: Addr ≠ Owner), leaves the
// keys of the other replicas where they were, and a key returns to its
// owner once it is back.
func TestPlacementOwnerDown(t *testing.T) {
	r := startReplicas(t, 3)
	conn, err := Dial(strings.Join(r.addrs, ","), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	victim := 0
	var moved, stayed []string
	for i := 0; len(moved) < 5 || len(stayed) < 5; i++ {
		k := fmt.Sprintf("thread-%d", i)
		if hashring.Owner(k, r.addrs) == r.addrs[victim] {
			moved = append(moved, k)
		} else {
			stayed = append(stayed, k)
		}
		check(t, c, k, k)
	}
	lis := r.addrs[victim]
	r.srv[victim].Stop()
	for _, k := range moved {
		want := hashring.Rank(k, r.addrs)[1]
		var pl *Placement
		// The stop is seen when the connection drops (immediately on
		// loopback); until then a call may still be picked for the owner
		// and fail with UNAVAILABLE.
		for deadline := time.Now().Add(10 * time.Second); ; {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ctx, p := WithPlacementKey(ctx, k)
			_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: k})
			cancel()
			if err == nil || strings.Contains(err.Error(), "unknown service") {
				pl = p
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %s: no call succeeded 10 s after its owner stopped: %v", k, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if pl.Addr() != want || pl.Owner() != lis {
			t.Fatalf("key %s: placed on %s with owner %s; want %s (second-ranked) with owner %s", k, pl.Addr(), pl.Owner(), want, lis)
		}
	}
	for _, k := range stayed {
		if pl := check(t, c, k, k); pl.Addr() != hashring.Owner(k, r.addrs) {
			t.Fatalf("key %s moved to %s although its owner %s is up", k, pl.Addr(), hashring.Owner(k, r.addrs))
		}
	}
	// The owner comes back on the same address: its keys return.
	l2, err := net.Listen("tcp", lis)
	if err != nil {
		t.Skipf("cannot listen again on %s: %v", lis, err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(l2) }()
	defer srv.Stop()
	for deadline := time.Now().Add(15 * time.Second); ; {
		if pl := check(t, c, moved[0], moved[0]); pl.Addr() == lis {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %s did not return to its owner %s within 15 s of its restart", moved[0], lis)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package grpcx

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestDialBalancesOverAnAddressList: a comma-separated upstream address
// reaches every server of the list round-robin (two servers on loopback,
// as two authz replicas behind no proxy); a bad entry is refused naming it.
func TestDialBalancesOverAnAddressList(t *testing.T) {
	var hits [2]atomic.Int64
	addrs := ""
	for i := range hits {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			hits[i].Add(1)
			return h(ctx, req)
		}))
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		if addrs != "" {
			addrs += ","
		}
		addrs += lis.Addr().String()
	}
	conn, err := Dial(addrs, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	// round_robin picks among READY subchannels: until the second one has
	// connected (slow on a loaded machine) every call goes to the first.
	for deadline := time.Now().Add(10 * time.Second); hits[0].Load() == 0 || hits[1].Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("calls per server = %d, %d after 10 s; want both reached (round_robin)", hits[0].Load(), hits[1].Load())
		}
		if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	hits[0].Store(0)
	hits[1].Store(0)
	for range 40 {
		if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := hits[0].Load(), hits[1].Load()
	if a+b != 40 || a < 10 || b < 10 {
		t.Fatalf("calls per server = %d, %d; want both reached (round_robin)", a, b)
	}
	if _, err := Dial("127.0.0.1:1,nonsense", DialOptions{}); err == nil {
		t.Fatal("a list entry without a port was accepted")
	}
}

// TestDialSkipsReplicasNotServing: with DialOptions.HealthService, a replica
// whose health reports that service NOT_SERVING (a restarted catalog whose
// MCP servers are still connecting) gets no calls, joins when it reports
// SERVING, and leaves again when it stops serving.
func TestDialSkipsReplicasNotServing(t *testing.T) {
	const svc = "toolplane.catalog.v1.CatalogService"
	var hits [2]atomic.Int64
	var hs [2]*health.Server
	addrs := ""
	for i := range hits {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			hits[i].Add(1) // unary calls only: the health watch is a stream
			return h(ctx, req)
		}))
		hs[i] = health.NewServer()
		hs[i].SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
		healthpb.RegisterHealthServer(srv, hs[i])
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		if addrs != "" {
			addrs += ","
		}
		addrs += lis.Addr().String()
	}
	hs[1].SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	conn, err := Dial(addrs, DialOptions{HealthService: svc})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	call := func() {
		t.Helper()
		if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// Both connect (replica 1 reports NOT_SERVING over its Watch stream);
	// give the balancer time to have seen both before counting.
	time.Sleep(300 * time.Millisecond)
	for range 40 {
		call()
	}
	if a, b := hits[0].Load(), hits[1].Load(); a != 40 || b != 0 {
		t.Fatalf("calls per server = %d, %d while replica 1 is NOT_SERVING; want 40, 0", a, b)
	}
	hs[1].SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	for deadline := time.Now().Add(10 * time.Second); hits[1].Load() == 0; call() {
		if time.Now().After(deadline) {
			t.Fatal("replica 1 got no call 10 s after it reported SERVING")
		}
	}
	hs[0].SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	time.Sleep(300 * time.Millisecond)
	hits[0].Store(0)
	hits[1].Store(0)
	for range 40 {
		call()
	}
	if a, b := hits[0].Load(), hits[1].Load(); a != 0 || b != 40 {
		t.Fatalf("calls per server = %d, %d after replica 0 stopped serving; want 0, 40", a, b)
	}
}

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

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"

	"github.com/toolplane/toolplane/internal/testkit"
)

// TestSIGTERMDrainsInFlightCall: SIGTERM while a 3 s call is in flight lets
// the call finish OK, readiness reports the shutdown meanwhile, then the
// process exits 0.
func TestSIGTERMDrainsInFlightCall(t *testing.T) {
	p := testkit.Start(t, testkit.Options{Config: "server:\n  drain_period: 2s\n"})
	conn := p.Dial(t)
	probeConn := p.Dial(t)

	const sleep = 3 * time.Second
	type result struct {
		err     error
		elapsed time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		err := invoke(t, conn, mSleep, "", durationpb.New(sleep), nil)
		done <- result{err, time.Since(start)}
	}()
	// The handler announces itself on stderr: the call is in flight.
	testkit.Eventually(t, 10*time.Second, "Sleep in flight", func() error {
		if strings.Contains(p.Stderr(), "testonly: sleep started") {
			return nil
		}
		return fmt.Errorf("no `sleep started` on stderr")
	})
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// During the drain period (2 s) gRPC health says NOT_SERVING and
	// /readyz says the process is shutting down.
	hc := p.HTTPClient()
	testkit.Eventually(t, 1800*time.Millisecond, "health NOT_SERVING and /readyz 503 while draining", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		st, err := p.Health(ctx, probeConn, "toolplane.catalog.v1.CatalogService")
		if err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
			return fmt.Errorf("health %s, %v", st, err)
		}
		resp, err := hc.Get(p.URL("/readyz"))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "shutting down") {
			return fmt.Errorf("/readyz %d %s", resp.StatusCode, body)
		}
		return nil
	})
	if _, exited := p.Exited(); exited {
		t.Fatalf("process exited before the in-flight call finished; stderr:\n%s", p.Stderr())
	}

	res := <-done
	if res.err != nil {
		t.Fatalf("in-flight Sleep across SIGTERM: %v; stderr:\n%s", res.err, p.Stderr())
	}
	if res.elapsed < sleep {
		t.Errorf("Sleep returned after %s, before its %s", res.elapsed, sleep)
	}
	code, ok := p.WaitExit(20 * time.Second)
	if !ok {
		t.Fatalf("process still running 20s after the call finished; stderr:\n%s", p.Stderr())
	}
	if code != 0 {
		t.Errorf("exit code %d, want 0; stderr:\n%s", code, p.Stderr())
	}
	if p.Stop(t) != 0 {
		t.Error("unreachable: exit code changed")
	}
	if !strings.Contains(p.Stderr(), "shutting down") {
		t.Errorf("no `shutting down` log line:\n%s", p.Stderr())
	}
}

// TestShutdownTimeoutBoundsDrain: a call longer than
// server.shutdown_timeout does not hold the process: it is cut off and the
// process still exits 0.
func TestShutdownTimeoutBoundsDrain(t *testing.T) {
	p := testkit.Start(t, testkit.Options{Config: "server:\n  shutdown_timeout: 1s\n  drain_period: 100ms\n"})
	conn := p.Dial(t)
	done := make(chan error, 1)
	go func() { done <- invoke(t, conn, mSleep, "", durationpb.New(20*time.Second), nil) }()
	testkit.Eventually(t, 10*time.Second, "Sleep in flight", func() error {
		if strings.Contains(p.Stderr(), "testonly: sleep started") {
			return nil
		}
		return fmt.Errorf("no `sleep started` on stderr")
	})
	start := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, ok := p.WaitExit(15 * time.Second)
	if !ok {
		t.Fatalf("process still running 15s after SIGTERM with shutdown_timeout 1s; stderr:\n%s", p.Stderr())
	}
	if code != 0 {
		t.Errorf("exit code %d, want 0; stderr:\n%s", code, p.Stderr())
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("exit took %s with shutdown_timeout 1s", el)
	}
	p.Stop(t)
	if err := <-done; err == nil {
		t.Errorf("a 20s call survived a 1s shutdown timeout")
	}
}

// TestSIGTERMEndsWatches: a subscription that never ends by itself
// (catalog WatchCatalog) does not hold the process until
// server.shutdown_timeout: after the drain period the stream ends with
// UNAVAILABLE (reconnect elsewhere) and the process exits 0.
func TestSIGTERMEndsWatches(t *testing.T) {
	p := testkit.Start(t, testkit.Options{Config: "server:\n  shutdown_timeout: 60s\n"})
	conn := p.Dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := catalogv1.NewCatalogServiceClient(conn).WatchCatalog(ctx, &catalogv1.WatchCatalogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "WatchCatalog started", func() error {
		if n := scrape(t, p).sum("grpc_server_started_total", `grpc_method="WatchCatalog"`); n < 1 {
			return fmt.Errorf("started %v", n)
		}
		return nil
	})
	recvErr := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				recvErr <- err
				return
			}
		}
	}()
	start := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, ok := p.WaitExit(30 * time.Second)
	if !ok {
		t.Fatalf("process still running 30s after SIGTERM with an open watch (shutdown_timeout 60s); stderr:\n%s", p.Stderr())
	}
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	p.Stop(t)
	select {
	case err := <-recvErr:
		wantCode(t, "the watch after SIGTERM", err, codes.Unavailable)
	case <-time.After(5 * time.Second):
		t.Error("the watch stream did not end")
	}
	t.Logf("exit %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

// TestSIGINT: SIGINT stops the process like SIGTERM, exit 0.
func TestSIGINT(t *testing.T) {
	p := testkit.Start(t, testkit.Options{Config: "server:\n  drain_period: 10ms\n"})
	if err := p.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code, ok := p.WaitExit(20 * time.Second)
	if !ok || code != 0 {
		t.Errorf("after SIGINT: exited %v with %d, want 0; stderr:\n%s", ok, code, p.Stderr())
	}
	p.Stop(t)
}

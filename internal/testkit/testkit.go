// Package testkit runs the real `toolplane` binary in end-to-end tests: it
// builds the binary once per test process (`go build -tags e2e`, so the
// test-only service of cmd/toolplane/testonly_e2e.go is compiled in), picks
// free loopback ports, starts `toolplane serve` as a subprocess with the
// given flags, environment and config file, waits for gRPC health SERVING,
// collects stderr, and stops it with SIGTERM asserting the exit code.
//
// Everything listens on 127.0.0.1; nothing is downloaded.
//
// Environment knobs:
//   - TOOLPLANE_E2E_BINARY: use this prebuilt binary instead of building.
//   - TOOLPLANE_E2E_RACE=1: build the binary with -race.
package testkit

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

var (
	buildReported atomic.Bool
	buildOnce     sync.Once
	buildDir      string
	binPath       string
	buildErr      error
)

// ModuleRoot returns the directory holding the go.mod of the current module.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	return filepath.Dir(mod), nil
}

// Binary returns the path of the toolplane binary built with `-tags e2e`,
// building it on first use (once per test process). A build failure fails t.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TOOLPLANE_E2E_BINARY"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		buildDir, err = os.MkdirTemp("", "toolplane-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(buildDir, "toolplane")
		args := []string{"build", "-tags", "e2e", "-o", binPath}
		if os.Getenv("TOOLPLANE_E2E_RACE") == "1" {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/toolplane")
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		if buildReported.CompareAndSwap(false, true) {
			t.Fatalf("testkit: building toolplane: %v", buildErr)
		}
		t.Fatalf("testkit: building toolplane failed (output in the first failing test)")
	}
	return binPath
}

// Cleanup removes the binary built by Binary; call it from TestMain after m.Run.
func Cleanup() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// FreeAddr returns a 127.0.0.1:PORT address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testkit: free port: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// Env returns the current environment without TOOLPLANE_* and OTEL_*
// variables (so the developer's settings do not leak into a test process),
// followed by extra.
func Env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TOOLPLANE_") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// Result is the outcome of a command run to completion.
type Result struct {
	// Code is the exit code (-1 when killed by a signal).
	Code int
	// Stdout and Stderr are the collected outputs.
	Stdout, Stderr string
}

// StderrLines returns the non-empty lines of Stderr.
func (r Result) StderrLines() []string { return nonEmptyLines(r.Stderr) }

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// Run runs the binary with args to completion (bounded by 60 s) with the
// cleaned environment plus env.
func Run(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Env = Env(env...)
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	default:
		t.Fatalf("testkit: run toolplane %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("testkit: toolplane %s did not finish in 60s; stderr:\n%s", strings.Join(args, " "), res.Stderr)
	}
	return res
}

// Wait says what Start waits for before returning.
type Wait int

const (
	// WaitServing waits until gRPC health of the whole process ("") is SERVING.
	WaitServing Wait = iota
	// WaitLive waits until GET /healthz answers (listeners up, services maybe not ready).
	WaitLive
	// WaitNone returns right after the process started.
	WaitNone
)

// Options describe one `toolplane serve` process.
type Options struct {
	// Args are extra arguments after `serve` (e.g. "--services", "catalog").
	Args []string
	// Env are extra KEY=VALUE variables (on top of the cleaned environment).
	Env []string
	// Config, when non-empty, is written to a file passed with --config.
	Config string
	// DataDir defaults to a fresh t.TempDir().
	DataDir string
	// GRPCAddr and HTTPAddr default to free loopback ports.
	GRPCAddr, HTTPAddr string
	// ClientTLS, when set, is used to reach the process (its listeners serve TLS).
	ClientTLS *tls.Config
	// Wait selects what Start waits for (default WaitServing).
	Wait Wait
	// StartTimeout bounds the wait (default 60 s).
	StartTimeout time.Duration
	// ExpectExit is the exit code the automatic cleanup asserts after
	// SIGTERM (default 0).
	ExpectExit int
	// Bare runs `toolplane serve` with Args only: no --grpc-addr,
	// --http-addr or --data-dir (the defaults 127.0.0.1:7420, 127.0.0.1:7421
	// and ./data apply; the working directory is a fresh temp dir).
	// GRPCAddr and HTTPAddr then only say where to reach the process.
	Bare bool
}

// Process is a running `toolplane serve`.
type Process struct {
	// GRPCAddr and HTTPAddr are the listener addresses (HOST:PORT).
	GRPCAddr, HTTPAddr string
	// DataDir is the process's data directory.
	DataDir string
	// ClientTLS is the client TLS config used to reach it, or nil.
	ClientTLS *tls.Config

	cmd     *exec.Cmd
	stderr  syncBuffer
	stdout  syncBuffer
	done    chan struct{}
	code    int
	stopped bool
	mu      sync.Mutex
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start starts `toolplane serve` and waits as o.Wait says. When the ports
// were chosen here and the process reports one in use (another test took
// it), it retries with new ports. The process is stopped with SIGTERM at
// the end of the test and its exit code checked against o.ExpectExit,
// unless the test stopped it already.
func Start(t testing.TB, o Options) *Process {
	t.Helper()
	autoPorts := o.GRPCAddr == "" && o.HTTPAddr == "" && !o.Bare
	for attempt := 0; ; attempt++ {
		p, err := start(t, o)
		if err == nil {
			return p
		}
		if autoPorts && attempt < 3 && strings.Contains(p.Stderr(), "port in use") {
			continue
		}
		if o.Bare && strings.Contains(p.Stderr(), "port in use") {
			t.Skipf("testkit: default port taken by another process: %s", strings.TrimSpace(p.Stderr()))
		}
		t.Fatalf("testkit: %v\nstderr:\n%s", err, p.Stderr())
	}
}

func start(t testing.TB, o Options) (*Process, error) {
	t.Helper()
	p := &Process{GRPCAddr: o.GRPCAddr, HTTPAddr: o.HTTPAddr, DataDir: o.DataDir, ClientTLS: o.ClientTLS, done: make(chan struct{})}
	workDir := t.TempDir()
	var args []string
	if o.Bare {
		if p.GRPCAddr == "" {
			p.GRPCAddr = "127.0.0.1:7420"
		}
		if p.HTTPAddr == "" {
			p.HTTPAddr = "127.0.0.1:7421"
		}
		p.DataDir = filepath.Join(workDir, "data")
		args = []string{"serve"}
	} else {
		if p.GRPCAddr == "" {
			p.GRPCAddr = FreeAddr(t)
		}
		if p.HTTPAddr == "" {
			p.HTTPAddr = FreeAddr(t)
		}
		if p.DataDir == "" {
			p.DataDir = filepath.Join(t.TempDir(), "data")
		}
		args = []string{"serve", "--grpc-addr", p.GRPCAddr, "--http-addr", p.HTTPAddr, "--data-dir", p.DataDir}
	}
	if o.Config != "" {
		f := filepath.Join(t.TempDir(), "toolplane.yaml")
		if err := os.WriteFile(f, []byte(o.Config), 0o600); err != nil {
			t.Fatalf("testkit: write config: %v", err)
		}
		args = append(args, "--config", f)
	}
	args = append(args, o.Args...)
	p.cmd = exec.Command(Binary(t), args...)
	p.cmd.Env = Env(o.Env...)
	p.cmd.Dir = workDir
	p.cmd.Stderr = &p.stderr
	p.cmd.Stdout = &p.stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("testkit: start toolplane: %v", err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			p.code = 0
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		default:
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		if code := p.Stop(t); code != o.ExpectExit {
			t.Errorf("testkit: toolplane (grpc %s) exited %d after SIGTERM, want %d; stderr:\n%s", p.GRPCAddr, code, o.ExpectExit, p.Stderr())
		}
	})
	timeout := o.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	var err error
	switch o.Wait {
	case WaitServing:
		err = p.WaitHealth(t, "", healthpb.HealthCheckResponse_SERVING, timeout)
	case WaitLive:
		err = p.waitLive(timeout)
	}
	if err != nil {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		_ = p.cmd.Process.Kill()
		<-p.done
		return p, err
	}
	return p, nil
}

// Stderr returns what the process wrote to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// Stdout returns what the process wrote to stdout so far.
func (p *Process) Stdout() string { return p.stdout.String() }

// Exited reports whether the process has exited, and its code.
func (p *Process) Exited() (int, bool) {
	select {
	case <-p.done:
		return p.code, true
	default:
		return 0, false
	}
}

// Pid returns the process id (for /proc readings such as RSS in bench/e2e).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// WaitExit waits for the process to exit, up to timeout; ok is false on timeout.
func (p *Process) WaitExit(timeout time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
		return p.code, true
	case <-time.After(timeout):
		return 0, false
	}
}

// Stop sends SIGTERM and waits for the exit (up to 45 s, then SIGKILL and
// a test failure). It returns the exit code.
func (p *Process) Stop(t testing.TB) int {
	t.Helper()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	if code, ok := p.Exited(); ok {
		return code
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	code, ok := p.WaitExit(45 * time.Second)
	if !ok {
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("testkit: toolplane did not exit within 45s of SIGTERM; stderr:\n%s", p.Stderr())
		return -1
	}
	return code
}

// Dial returns a gRPC client connection to the process (TLS when
// ClientTLS is set), closed at the end of the test.
func (p *Process) Dial(t testing.TB, extra ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if p.ClientTLS != nil {
		creds = credentials.NewTLS(p.ClientTLS)
	}
	conn, err := grpc.NewClient(p.GRPCAddr, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, extra...)...)
	if err != nil {
		t.Fatalf("testkit: dial %s: %v", p.GRPCAddr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// URL returns the http(s) URL of path on the HTTP listener.
func (p *Process) URL(path string) string {
	scheme := "http"
	if p.ClientTLS != nil {
		scheme = "https"
	}
	return scheme + "://" + p.HTTPAddr + path
}

// HTTPClient returns a client for the HTTP listener (TLS when ClientTLS is set).
func (p *Process) HTTPClient() *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	if p.ClientTLS != nil {
		tr.TLSClientConfig = p.ClientTLS.Clone()
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// Health returns the gRPC health status of service ("" = the whole process).
func (p *Process) Health(ctx context.Context, conn *grpc.ClientConn, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, err
	}
	return resp.GetStatus(), nil
}

// WaitHealth polls gRPC health of service until it reports want, the
// process exits or timeout passes.
func (p *Process) WaitHealth(t testing.TB, service string, want healthpb.HealthCheckResponse_ServingStatus, timeout time.Duration) error {
	t.Helper()
	creds := insecure.NewCredentials()
	if p.ClientTLS != nil {
		creds = credentials.NewTLS(p.ClientTLS)
	}
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if code, ok := p.Exited(); ok {
			return fmt.Errorf("toolplane exited with code %d while waiting for %q %s", code, service, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := p.Health(ctx, conn, service)
		cancel()
		if err == nil && st == want {
			return nil
		}
		last = fmt.Sprintf("status %s, error %v", st, err)
		if time.Now().After(deadline) {
			return fmt.Errorf("health of %q on %s not %s after %s (last: %s)", service, p.GRPCAddr, want, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *Process) waitLive(timeout time.Duration) error {
	c := p.HTTPClient()
	c.Timeout = time.Second
	deadline := time.Now().Add(timeout)
	for {
		if code, ok := p.Exited(); ok {
			return fmt.Errorf("toolplane exited with code %d while waiting for /healthz", code)
		}
		resp, err := c.Get(p.URL("/healthz"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/healthz on %s not 200 after %s (last error %v)", p.HTTPAddr, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Eventually polls cond every 50 ms until it returns nil or timeout passes,
// then fails t with the last error.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/testkit"
)

// slowCatalog answers ListServers after delay, and UNAUTHENTICATED to a
// call without the bearer token want.
type slowCatalog struct {
	catalogv1.UnimplementedCatalogServiceServer
	delay time.Duration
	want  string
}

func (s *slowCatalog) ListServers(ctx context.Context, _ *catalogv1.ListServersRequest) (*catalogv1.ListServersResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if a := md.Get("authorization"); len(a) != 1 || a[0] != "Bearer "+s.want {
		return nil, status.Error(codes.Unauthenticated, "missing or invalid bearer token")
	}
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &catalogv1.ListServersResponse{Servers: []*catalogv1.Server{{
		Config: &catalogv1.ServerConfig{Name: "fx", Type: catalogv1.ServerType_SERVER_TYPE_STDIO},
		State:  catalogv1.ServerState_SERVER_STATE_READY, ToolCount: 3,
	}}}, nil
}

func startSlowCatalog(t *testing.T, delay time.Duration, token string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	catalogv1.RegisterCatalogServiceServer(gs, &slowCatalog{delay: delay, want: token})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// TestCLIAsANewUser runs the real binary the way a new user tries it.
func TestCLIAsANewUser(t *testing.T) {
	addr := startSlowCatalog(t, 0, "tok-cli")
	run := func(env []string, args ...string) testkit.Result { return testkit.Run(t, env, args...) }

	// --version and `version` print the same line.
	v, vv := run(nil, "--version"), run(nil, "version")
	if v.Code != 0 || !strings.HasPrefix(v.Stdout, "toolplane ") || v.Stdout != vv.Stdout {
		t.Errorf("--version: %d %q; version: %q", v.Code, v.Stdout, vv.Stdout)
	}
	// A mistyped sub-command: exit 2 with a suggestion, like the top level.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"servers", "lst"}, "list"},
		{[]string{"tools", "serch", "x"}, "search"},
		{[]string{"servrs", "list"}, "servers"},
	} {
		r := run(nil, c.args...)
		if r.Code != 2 || !strings.Contains(r.Stderr, "unknown command") || !strings.Contains(r.Stderr, "Did you mean this?") || !strings.Contains(r.Stderr, c.want) || r.Stdout != "" {
			t.Errorf("%v: exit %d stdout %q stderr %q", c.args, r.Code, r.Stdout, r.Stderr)
		}
	}
	if r := run(nil, "servers"); r.Code != 0 || !strings.Contains(r.Stdout, "Available Commands") {
		t.Errorf("servers alone: %d %q", r.Code, r.Stdout)
	}
	// A client flag on a command that does not take it is refused, not ignored.
	if r := run(nil, "version", "--token", "x"); r.Code != 2 || !strings.Contains(r.Stderr, "--token") {
		t.Errorf("version --token: %d %q", r.Code, r.Stderr)
	}
	// A missing token names --token and TOOLPLANE_TOKEN; a refused one says so.
	r := run(nil, "servers", "list", "--grpc-addr", addr)
	if r.Code != 1 || !strings.Contains(r.Stderr, "Unauthenticated") || !strings.Contains(r.Stderr, "--token") || !strings.Contains(r.Stderr, "TOOLPLANE_TOKEN") {
		t.Errorf("no token: %d %q", r.Code, r.Stderr)
	}
	if r := run([]string{"TOOLPLANE_TOKEN=wrong"}, "servers", "list", "--grpc-addr", addr); r.Code != 1 || !strings.Contains(r.Stderr, "refused") || strings.Contains(r.Stderr, "wrong") {
		t.Errorf("bad token: %d %q", r.Code, r.Stderr)
	}
	// Global flags before the sub-command (a boolean among them), and every
	// spelling of the JSON output gives the same document.
	var outs []string
	for _, args := range [][]string{
		{"--grpc-addr", addr, "--token", "tok-cli", "--json", "servers", "list"},
		{"-o", "json", "--grpc-addr", addr, "servers", "list", "--token", "tok-cli"},
		{"servers", "--output", "json", "list", "--grpc-addr", addr, "--token", "tok-cli"},
		{"servers", "list", "--grpc-addr=" + addr, "--token=tok-cli", "-ojson"},
	} {
		r := run(nil, args...)
		var doc map[string]any
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &doc) != nil || doc["servers"] == nil {
			t.Errorf("%v: exit %d stdout %q stderr %q", args, r.Code, r.Stdout, r.Stderr)
		}
		outs = append(outs, r.Stdout)
	}
	for _, o := range outs[1:] {
		if o != outs[0] {
			t.Errorf("JSON outputs differ:\n%s\n%s", outs[0], o)
		}
	}
	if r := run(nil, "servers", "list", "--grpc-addr", addr, "--token", "tok-cli", "-o", "table"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "NAME") {
		t.Errorf("-o table: %d %q", r.Code, r.Stdout)
	}
	if r := run(nil, "servers", "list", "--grpc-addr", addr, "-o", "yaml"); r.Code != 2 || !strings.Contains(r.Stderr, "table, json") {
		t.Errorf("-o yaml: %d %q", r.Code, r.Stderr)
	}
}

// TestCLIProgressOnlyOnATerminal: a call that waits shows progress on a
// terminal (a pseudo-terminal from script(1)) and nothing when piped.
func TestCLIProgressOnlyOnATerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) not installed (util-linux)")
	}
	addr := startSlowCatalog(t, 1500*time.Millisecond, "tok-cli")
	bin := testkit.Binary(t)
	piped := testkit.Run(t, nil, "servers", "list", "--grpc-addr", addr, "--token", "tok-cli")
	if piped.Code != 0 || piped.Stderr != "" || strings.Contains(piped.Stdout, "waiting") {
		t.Fatalf("piped: exit %d stdout %q stderr %q", piped.Code, piped.Stdout, piped.Stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qefc", bin+" servers list --grpc-addr "+addr+" --token tok-cli", "/dev/null")
	cmd.Env = testkit.Env("TERM=xterm")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "waiting for ListServers ... 1s") || !strings.Contains(s, "\r\x1b[K") || !strings.Contains(s, "READY") {
		t.Fatalf("terminal output has no progress line:\n%q", s)
	}
}

// TestCLITokenErrorsAgainstTheSuite: with authentication on, the real
// suite refuses a client command without a token, and the CLI says to pass
// --token or set TOOLPLANE_TOKEN; with the admin token the same command works.
func TestCLITokenErrorsAgainstTheSuite(t *testing.T) {
	p := testkit.Start(t, testkit.Options{Config: "auth:\n  enabled: true\n" + tokensYAML()})
	r := testkit.Run(t, nil, "servers", "list", "--grpc-addr", p.GRPCAddr)
	if r.Code != 1 || !strings.Contains(r.Stderr, "Unauthenticated") || !strings.Contains(r.Stderr, "pass --token TOKEN or set TOOLPLANE_TOKEN") {
		t.Errorf("no token: %d %q", r.Code, r.Stderr)
	}
	r = testkit.Run(t, []string{"TOOLPLANE_TOKEN=not-a-known-token"}, "servers", "list", "--grpc-addr", p.GRPCAddr)
	if r.Code != 1 || !strings.Contains(r.Stderr, "the token from --token / TOOLPLANE_TOKEN was refused") || strings.Contains(r.Stderr, "not-a-known-token") {
		t.Errorf("unknown token: %d %q", r.Code, r.Stderr)
	}
	if r := testkit.Run(t, []string{"TOOLPLANE_TOKEN=" + adminToken}, "--grpc-addr", p.GRPCAddr, "-o", "json", "servers", "list"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "{") {
		t.Errorf("admin token: %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
}

package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/hashring"
	"github.com/toolplane/toolplane/services/runtime/runtimetest"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

const placementServiceToken = "placement-service-token-0123"

// runApp runs one toolplane process in this test process with the given
// services and returns its gRPC address and a stop function (also run at
// cleanup).
func runApp(t *testing.T, mutate func(*app.Config)) (string, func()) {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.Server.DataDir = t.TempDir()
	cfg.Server.GRPCAddr, cfg.Server.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Server.DrainPeriod = time.Millisecond
	cfg.Server.ShutdownTimeout = 5 * time.Second
	cfg.Auth.Enabled = true
	cfg.Auth.Tokens = []config.Token{
		{Name: "runtime", SHA256: sha(placementServiceToken), Kind: "service", Subject: "svc:runtime", Roles: []string{"service"}},
		{Name: "alice", SHA256: sha(aliceToken), Kind: "user", Subject: "alice", Roles: []string{"user"}},
		{Name: "bob", SHA256: sha(bobToken), Kind: "user", Subject: "bob", Roles: []string{"user"}},
	}
	mutate(&cfg)
	au, err := app.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := app.Listen(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- app.Run(ctx, &cfg, au, lis, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnReady: func(string, string) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("process stopped: %v", err)
	case <-time.After(120 * time.Second):
		t.Fatal("process not ready after 120s")
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("process did not stop in 20s")
		}
	}
	t.Cleanup(stop)
	return lis.GRPC.Addr().String(), stop
}

// TestRuntimePlacesScopedSessions: one runtime over two catalog processes
// (an address list, the placement balancer) with a per_user MCP server
// (the real server-everything). Each user's calls land on the catalog
// replica owning the user's scope key, the first one creating the session
// there; when that replica stops, the user's next call succeeds on the
// other one and its ToolResult.placement says the session was re-created
// there and the previous replica was unavailable.
func TestRuntimePlacesScopedSessions(t *testing.T) {
	everything := npmJS(t, "server-everything")
	dir := t.TempDir()
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"ev": map[string]any{"command": "node", "args": []string{everything}, "session_scope": "per_user"}}})
	extPath := filepath.Join(dir, "extensions_config.json")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(extPath, ext, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(placementServiceToken), 0o600); err != nil {
		t.Fatal(err)
	}
	catalog := func(cfg *app.Config) {
		cfg.Server.Services = []string{"catalog"}
		cfg.Catalog.ExtensionsConfig = extPath
	}
	addrA, stopA := runApp(t, catalog)
	addrB, stopB := runApp(t, catalog)
	// Catalog A lists the server's tools before the runtime starts; B may
	// still be starting its discovery child: the runtime's catalog view
	// reads from one replica (its watch stream's), so it never caches a
	// list from a replica still coming up under the other's generation.
	for _, a := range []string{addrA} {
		cc, err := grpcx.Dial(a, grpcx.DialOptions{Token: placementServiceToken})
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		c := catalogv1.NewCatalogServiceClient(cc)
		for deadline := time.Now().Add(90 * time.Second); ; {
			r, err := c.GetTool(context.Background(), &catalogv1.GetToolRequest{Name: "ev_echo"})
			if err == nil && r.GetTool().GetAvailable() {
				if r.GetTool().GetSessionScope() != catalogv1.SessionScope_SESSION_SCOPE_PER_USER {
					t.Fatalf("ev_echo on %s: session scope %v, want PER_USER", a, r.GetTool().GetSessionScope())
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ev_echo not available on %s after 90 s: %v", a, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	fakes := runtimetest.Serve(t, runtimetest.NewFakeAuthz(), runtimetest.NewFakeSkills())
	rtAddr, _ := runApp(t, func(cfg *app.Config) {
		cfg.Server.Services = []string{"runtime"}
		cfg.Runtime.Upstreams.Catalog.Address = addrA + "," + addrB
		cfg.Runtime.Upstreams.Catalog.TokenFile = tokenFile
		cfg.Runtime.Upstreams.Authz.Address = fakes
		cfg.Runtime.Upstreams.Skills.Address = fakes
	})
	dial := func(tok string) runtimev1.RuntimeServiceClient {
		c, err := grpcx.Dial(rtAddr, grpcx.DialOptions{Token: tok, MaxMessageBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return runtimev1.NewRuntimeServiceClient(c)
	}
	addrs := []string{addrA, addrB}
	label := runtimetools.ReplicaLabel
	stops := map[string]func(){addrA: stopA, addrB: stopB}
	type user struct {
		name   string
		c      runtimev1.RuntimeServiceClient
		thread string
		owner  string
	}
	var users []*user
	for _, u := range []struct{ name, tok string }{{"alice", aliceToken}, {"bob", bobToken}} {
		c := dial(u.tok)
		th := newThread(t, c, nil)
		// The server comes up on both catalogs in the background.
		deadline := time.Now().Add(60 * time.Second)
		for {
			r := call(t, c, th, "tool_search", map[string]any{"query": "select:ev_echo"})
			if len(r.GetPromoted().GetNames()) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ev_echo never promoted: %v", r)
			}
			time.Sleep(200 * time.Millisecond)
		}
		users = append(users, &user{name: u.name, c: c, thread: th,
			owner: hashring.Owner("per_user\x00ev\x00default\x00"+u.name, addrs)})
	}
	echo := func(u *user, n int) *runtimev1.ToolResult {
		return call(t, u.c, u.thread, "ev_echo", map[string]any{"message": fmt.Sprintf("%s %d", u.name, n)})
	}
	for _, u := range users {
		for n := 0; n < 3; n++ {
			r := echo(u, n)
			pl := r.GetPlacement()
			if r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !strings.Contains(text(r), fmt.Sprintf("%s %d", u.name, n)) {
				t.Fatalf("%s call %d: %v", u.name, n, r)
			}
			if pl.GetReplica() != label(u.owner) || pl.GetOwner() != label(u.owner) || pl.GetSessionCreated() != (n == 0) || pl.GetPreviousReplica() != "" || pl.GetNote() != "" {
				t.Fatalf("%s call %d: placement %v; want replica and owner %s, session created on the first call only", u.name, n, pl, u.owner)
			}
		}
	}
	// A tool without a placed session reports none.
	if r := call(t, users[0].c, users[0].thread, "tool_search", map[string]any{"query": "echo"}); r.GetPlacement() != nil {
		t.Fatalf("tool_search has a placement: %v", r.GetPlacement())
	}

	// Stop alice's replica: her next call re-creates the session elsewhere.
	alice := users[0]
	other := addrA
	if alice.owner == addrA {
		other = addrB
	}
	stops[alice.owner]()
	var r *runtimev1.ToolResult
	deadline := time.Now().Add(15 * time.Second)
	for n := 10; ; n++ {
		r = echo(alice, n)
		if r.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call of alice succeeded 15 s after her replica stopped: %v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pl := r.GetPlacement()
	wantNote := fmt.Sprintf("session re-created on replica %s; the previous replica %s was unavailable", label(other), label(alice.owner))
	if pl.GetReplica() != label(other) || pl.GetOwner() != label(alice.owner) || pl.GetPreviousReplica() != label(alice.owner) || !pl.GetSessionCreated() || pl.GetNote() != wantNote {
		t.Fatalf("after the stop: placement %v; want note %q", pl, wantNote)
	}
	t.Logf("placement after the owner stopped: %v", pl)
	if r := echo(alice, 99); r.GetPlacement().GetReplica() != label(other) || r.GetPlacement().GetSessionCreated() || r.GetPlacement().GetNote() != "" {
		t.Fatalf("the call after: %v", r.GetPlacement())
	}
}

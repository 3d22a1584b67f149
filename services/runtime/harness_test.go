package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/testkit"
	"github.com/toolplane/toolplane/services/runtime/runtimetest"
)

// Tokens of the e2e suite.
const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789"
	adminToken = "admin-token-0123456789"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// npmJS returns the entry point of an installed npm MCP server, skipping
// the test when it (or node) is missing outside CI.
func npmJS(t testing.TB, name string) string {
	t.Helper()
	return testkit.NPMServer(t, name)
}

// suite is one toolplane process (catalog + runtime, real MCP servers,
// auth on) with authz and skills served by fakes over gRPC.
type suite struct {
	t        testing.TB
	dataDir  string
	ext      string
	az       *runtimetest.FakeAuthz
	sk       *runtimetest.FakeSkills
	fakeAddr string
	mutate   func(*app.Config)
	real     bool // authz and skills served by this process (no fakes)
	cancel   context.CancelFunc
	done     chan error
	addr     string
	httpAddr string
	conns    []*grpc.ClientConn
}

func newSuite(t testing.TB, mutate func(*app.Config)) *suite {
	return newNpmSuite(t, false, mutate)
}

// newRealSuite is newSuite with all four services of one process: the
// real authz and skills services instead of the fakes.
func newRealSuite(t testing.TB) *suite { return newNpmSuite(t, true, nil) }

func newNpmSuite(t testing.TB, real bool, mutate func(*app.Config)) *suite {
	t.Helper()
	memory := npmJS(t, "server-memory")
	everything := npmJS(t, "server-everything")
	dir := t.TempDir()
	// A static server with 120 searchable tools (for the concurrency test).
	var bulk strings.Builder
	for i := 0; i < 120; i++ {
		fmt.Fprintf(&bulk, `{"name": "bulk_tool_%03d", "description": "Bulk fixture tool number %d", "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}, "server": "bulk"}`+"\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "bulk.jsonl"), []byte(bulk.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ext := map[string]any{"mcpServers": map[string]any{
		"memory": map[string]any{"command": "node", "args": []string{memory}, "env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")},
			"routing": map[string]any{"mode": "prefer", "priority": 50, "keywords": []string{"knowledge graph"}}},
		"everything": map[string]any{"command": "node", "args": []string{everything}},
		"bulk":       map[string]any{"type": "static", "path": filepath.Join(dir, "bulk.jsonl")},
	}}
	return newSuiteWith(t, dir, ext, real, mutate)
}

// newSuiteWith starts a suite whose catalog serves the given
// extensions_config.json content.
func newSuiteWith(t testing.TB, dir string, ext map[string]any, real bool, mutate func(*app.Config)) *suite {
	t.Helper()
	b, _ := json.Marshal(ext)
	extPath := filepath.Join(dir, "extensions_config.json")
	if err := os.WriteFile(extPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &suite{t: t, dataDir: filepath.Join(dir, "data"), ext: extPath, az: runtimetest.NewFakeAuthz(), sk: runtimetest.NewFakeSkills(), mutate: mutate, real: real}
	s.fakeAddr = runtimetest.Serve(t, s.az, s.sk)
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *suite) start() {
	t := s.t
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.Server.DataDir = s.dataDir
	cfg.Server.GRPCAddr = "127.0.0.1:0"
	cfg.Server.HTTPAddr = "127.0.0.1:0"
	cfg.Server.Services = []string{"catalog", "runtime"}
	if s.real {
		cfg.Server.Services = []string{"catalog", "authz", "skills", "runtime"}
	}
	cfg.Server.DrainPeriod = time.Millisecond
	cfg.Server.ShutdownTimeout = 5 * time.Second
	cfg.Catalog.ExtensionsConfig = s.ext
	if !s.real {
		cfg.Runtime.Upstreams.Authz.Address = s.fakeAddr
		cfg.Runtime.Upstreams.Skills.Address = s.fakeAddr
	}
	cfg.Auth.Enabled = true
	cfg.Auth.Tokens = []config.Token{
		{Name: "alice", SHA256: sha(aliceToken), Kind: "user", Subject: "alice", Roles: []string{"user"}},
		{Name: "bob", SHA256: sha(bobToken), Kind: "user", Subject: "bob", Roles: []string{"user"}},
		{Name: "admin", SHA256: sha(adminToken), Kind: "user", Subject: "root", Roles: []string{"admin"}},
	}
	if s.mutate != nil {
		s.mutate(&cfg)
	}
	au, err := app.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := app.Listen(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.addr, s.httpAddr = lis.GRPC.Addr().String(), lis.HTTP.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() {
		s.done <- app.Run(ctx, &cfg, au, lis, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnReady: func(string, string) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-s.done:
		t.Fatalf("suite stopped: %v", err)
	case <-time.After(120 * time.Second): // a hang guard; a loaded 2-core machine under -race needs more than 30 s at 12,500 tools
		t.Fatal("suite not ready after 120s")
	}
	s.waitServers()
}

// waitServers waits until every enabled MCP server is READY.
func (s *suite) waitServers() {
	t := s.t
	t.Helper()
	cat := catalogv1.NewCatalogServiceClient(s.dial(adminToken))
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := cat.ListServers(context.Background(), &catalogv1.ListServersRequest{})
		pending := err != nil
		for _, sv := range resp.GetServers() {
			// NEEDS_AUTH is settled: an OAuth server waits for a login.
			if sv.GetConfig().GetEnabled() && sv.GetState() != catalogv1.ServerState_SERVER_STATE_READY && sv.GetState() != catalogv1.ServerState_SERVER_STATE_NEEDS_AUTH {
				pending = true
			}
		}
		if !pending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MCP servers not ready: %v %v", resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *suite) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.t.Error("suite did not stop in 20s")
	}
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
	s.cancel = nil
}

func (s *suite) restart() {
	s.stop()
	s.start()
}

func (s *suite) dial(token string) *grpc.ClientConn {
	c, err := grpcx.Dial(s.addr, grpcx.DialOptions{Token: token, MaxMessageBytes: 64 << 20})
	if err != nil {
		s.t.Fatal(err)
	}
	s.conns = append(s.conns, c)
	return c
}

func (s *suite) rt(token string) runtimev1.RuntimeServiceClient {
	return runtimev1.NewRuntimeServiceClient(s.dial(token))
}

func (s *suite) metricsText() string {
	resp, err := http.Get("http://" + s.httpAddr + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func args(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var callSeq int

func call(t testing.TB, c runtimev1.RuntimeServiceClient, thread, name string, a map[string]any) *runtimev1.ToolResult {
	t.Helper()
	callSeq++
	resp, err := c.ExecuteToolCall(context.Background(), &runtimev1.ExecuteToolCallRequest{ThreadId: thread,
		ToolCall: &runtimev1.ToolCall{Id: fmt.Sprintf("call-%d", callSeq), Name: name, Arguments: args(t, a)}})
	if err != nil {
		t.Fatalf("ExecuteToolCall %s: %v", name, err)
	}
	return resp.GetResult()
}

func text(r *runtimev1.ToolResult) string {
	var parts []string
	for _, b := range r.GetContent() {
		if b.GetType() == typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT {
			parts = append(parts, b.GetText())
		}
	}
	return strings.Join(parts, "\n")
}

func names(ts []*runtimev1.ToolSchema) map[string]bool {
	out := map[string]bool{}
	for _, t := range ts {
		out[t.GetName()] = true
	}
	return out
}

func newThread(t testing.TB, c runtimev1.RuntimeServiceClient, meta map[string]string) string {
	t.Helper()
	resp, err := c.CreateThread(context.Background(), &runtimev1.CreateThreadRequest{Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetThread().GetThreadId()
}

func assemble(t testing.TB, c runtimev1.RuntimeServiceClient, thread, msg string) *runtimev1.AssembleToolsResponse {
	t.Helper()
	resp, err := c.AssembleTools(context.Background(), &runtimev1.AssembleToolsRequest{ThreadId: thread, UserMessage: msg})
	if err != nil {
		t.Fatalf("AssembleTools: %v", err)
	}
	return resp
}

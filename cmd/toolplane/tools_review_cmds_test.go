package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"

	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog"
)

type catalogPolicy struct{ s *catalog.Server }

func (p catalogPolicy) Class(m string) auth.Class {
	if c, ok := p.s.Classes()[m]; ok {
		return c
	}
	return auth.ClassUnknown
}
func (p catalogPolicy) Validate(m string, req any) error { return p.s.Validate(m, req) }

// TestToolsReviewCLI: `tools pending` lists a new tool of a pinned review
// server with its hash, `tools approve` needs that exact hash, and the
// approval is reported with its audit record.
func TestToolsReviewCLI(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "tools.jsonl")
	if err := os.WriteFile(static, []byte(`{"name": "lookup", "description": "Look a word up", "server": "words"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ext := filepath.Join(dir, "extensions_config.json")
	if err := os.WriteFile(ext, []byte(fmt.Sprintf(`{"mcpServers": {"words": {"type": "static", "path": %q, "pin": true, "pin_new_tools": "review"}}}`, static)), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := catalog.New(context.Background(), catalog.Config{ExtensionsConfig: ext}, svckit.Env{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	authn, _ := auth.NewAuthenticator(auth.Options{})
	gs := grpc.NewServer(grpcx.ServerOptions(grpcx.ChainOptions{Logger: slog.New(slog.DiscardHandler),
		Metrics: grpcprom.NewServerMetrics(), Authenticator: authn, Policy: catalogPolicy{s}})...)
	s.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(func() { gs.Stop(); s.Close() })
	run := func(args ...string) (string, error) {
		cmd := newToolsCmd()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append(args, "--grpc-addr", lis.Addr().String()))
		err := cmd.ExecuteContext(context.Background())
		return out.String() + errOut.String(), err
	}
	out, err := run("pending")
	if err != nil || !strings.Contains(out, "lookup") || !strings.Contains(out, "PENDING") || !strings.Contains(out, "/description") {
		t.Fatalf("pending: %v\n%s", err, out)
	}
	hash := regexp.MustCompile(`[0-9a-f]{64}`).FindString(out)
	if hash == "" {
		t.Fatalf("no definition hash in:\n%s", out)
	}
	if out, err := run("approve", "lookup"); err == nil || !strings.Contains(err.Error(), "--hash") {
		t.Fatalf("approve without --hash: %v\n%s", err, out)
	}
	if _, err := run("approve", "lookup", "--hash", strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "not the current definition") {
		t.Fatalf("approve with another hash: %v", err)
	}
	out, err = run("approve", "lookup", "--hash", hash)
	if err != nil || !strings.Contains(out, "approved definition "+hash) || !strings.Contains(out, "state ACTIVE") || !strings.Contains(out, "audit record 1") {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	if out, err := run("pending"); err != nil || !strings.Contains(out, "no tools waiting for review") {
		t.Fatalf("pending after approval: %v\n%s", err, out)
	}
}

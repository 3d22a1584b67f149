package catalog

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogacp"
)

// acpFixture is the fixture ACP agent of catalogacp (official TypeScript
// SDK, scripts/install-acp-fixture.sh).
func acpFixture(t *testing.T) catalogacp.Agent {
	t.Helper()
	dir := filepath.Join(moduleRoot(t), "services", "catalog", "catalogacp", "testdata", "agent")
	_, serr := os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk", "package.json"))
	_, nerr := exec.LookPath("node")
	if err := errors.Join(serr, nerr); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture ACP agent not installed (run scripts/install-acp-fixture.sh): %v", err)
		}
		t.Skipf("fixture ACP agent not installed (run scripts/install-acp-fixture.sh): %v", err)
	}
	return catalogacp.Agent{Command: "node", Args: []string{filepath.Join(dir, "agent.mjs")}, Env: map[string]string{"FIXTURE_TOKEN": "${ACP_CATALOG_TEST_TOKEN}"},
		Description: "Echoes in its workspace", Model: "hint"}
}

// invoke runs InvokeAcpAgent as the runtime would and collects the stream.
func invoke(t *testing.T, c catalogv1.CatalogServiceClient, agent, thread, prompt string) ([]*catalogv1.AcpUpdate, *catalogv1.AcpResult, error) {
	t.Helper()
	req := &catalogv1.InvokeAcpAgentRequest{Agent: agent, Prompt: prompt}
	if thread != "" {
		req.CallContext = &typev1.CallContext{ThreadId: thread}
	}
	st, err := c.InvokeAcpAgent(ctxT(t), req)
	if err != nil {
		return nil, nil, err
	}
	var ups []*catalogv1.AcpUpdate
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			t.Fatal("stream ended without a result")
		}
		if err != nil {
			return ups, nil, err
		}
		if u := m.GetUpdate(); u != nil {
			ups = append(ups, u)
			continue
		}
		return ups, m.GetResult(), nil
	}
}

func TestInvokeAcpAgentOverGRPC(t *testing.T) {
	t.Setenv("ACP_CATALOG_TEST_TOKEN", "tok-123")
	a := acpFixture(t)
	var dataDir string
	h := start(t, "", func(c *Config, e *svckit.Env) {
		c.ACPAgents = map[string]catalogacp.Agent{"fixture": a}
		dataDir = e.DataDir
	})
	defer h.close()
	threads := filepath.Join(dataDir, "runtime", "threads")
	if err := os.MkdirAll(filepath.Join(threads, "th-1", "user-data"), 0o700); err != nil {
		t.Fatal(err)
	}

	l, err := h.svc.ListAcpAgents(ctxT(t), &catalogv1.ListAcpAgentsRequest{})
	if err != nil || len(l.GetAgents()) != 1 || l.GetAgents()[0].GetName() != "fixture" || l.GetAgents()[0].GetDescription() != "Echoes in its workspace" || l.GetAgents()[0].GetAutoApprovePermissions() {
		t.Fatalf("ListAcpAgents = %v, %v", l, err)
	}
	if _, err := h.user.ListAcpAgents(ctxT(t), &catalogv1.ListAcpAgentsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a user credential listed ACP agents: %v", err)
	}

	ups, res, err := invoke(t, h.svc, "fixture", "th-1", "echo over grpc")
	if err != nil || res.GetText() != "you said: over grpc" || res.GetStopReason() != "end_turn" || res.GetWorkingDirectory() != "acp-workspace" {
		t.Fatalf("invoke = %v, %v", res, err)
	}
	kinds := map[string]bool{}
	for _, u := range ups {
		kinds[u.GetKind()] = true
	}
	if !kinds["thought"] || !kinds["tool_call"] || !kinds["message"] {
		t.Fatalf("updates %v", ups)
	}
	if b, err := os.ReadFile(filepath.Join(threads, "th-1", "acp-workspace", "answer.txt")); err != nil || string(b) != "over grpc" {
		t.Fatalf("answer.txt %q, %v", b, err)
	}
	// $VAR from the host, the model hint, the working directory.
	_, res, err = invoke(t, h.svc, "fixture", "th-1", "env")
	if err != nil || res.GetText() != "token=tok-123 cwd="+filepath.Join(threads, "th-1", "acp-workspace")+" model=hint" {
		t.Fatalf("env = %v, %v", res, err)
	}
	// Permission requests are denied by default.
	_, res, err = invoke(t, h.svc, "fixture", "th-1", "permission")
	if err != nil || res.GetText() != "permission: no" {
		t.Fatalf("permission = %v, %v", res, err)
	}

	for _, c := range []struct {
		agent, thread string
		code          codes.Code
		reason        string
	}{
		{"nope", "th-1", codes.NotFound, "ERROR_REASON_ACP_AGENT_NOT_FOUND"},
		{"fixture", "", codes.FailedPrecondition, "ERROR_REASON_THREAD_WORKSPACE_UNAVAILABLE"},
		{"fixture", "th-unknown", codes.FailedPrecondition, "ERROR_REASON_THREAD_WORKSPACE_UNAVAILABLE"},
		{"fixture", "../th-1", codes.FailedPrecondition, "ERROR_REASON_THREAD_WORKSPACE_UNAVAILABLE"},
	} {
		_, _, err := invoke(t, h.svc, c.agent, c.thread, "echo x")
		if status.Code(err) != c.code || reasonOf(err) != c.reason {
			t.Errorf("invoke(%q, %q) = %v, want %v %s", c.agent, c.thread, err, c.code, c.reason)
		}
	}
	// A user credential's CallContext is not trusted, so it never reaches a
	// thread's workspace (and the RPC is service-only anyway).
	if _, _, err := invoke(t, h.user, "fixture", "th-1", "echo x"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("user invoke: %v", err)
	}
	if _, _, err := invoke(t, h.svc, "fixture", "th-1", ""); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty prompt: %v", err)
	}

	// A crash is UNAVAILABLE without the agent's stderr; the next call restarts it.
	_, _, err = invoke(t, h.svc, "fixture", "th-1", "crash")
	if status.Code(err) != codes.Unavailable || reasonOf(err) != "ERROR_REASON_ACP_AGENT_UNAVAILABLE" || strings.Contains(err.Error(), "stderr") {
		t.Fatalf("crash = %v", err)
	}
	if _, res, err := invoke(t, h.svc, "fixture", "th-1", "echo again"); err != nil || res.GetText() != "you said: again" {
		t.Fatalf("after crash = %v, %v", res, err)
	}
}

func TestACPConfigValidated(t *testing.T) {
	c := Config{ACPAgents: map[string]catalogacp.Agent{"x": {Command: "node"}}}
	c.SetDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "catalog.acp_agents.x.description") {
		t.Fatalf("Validate = %v", err)
	}
}

// ACP agent commands pass the stdio command policy of MCP servers at start
// (unless catalog.file_command_policy is off); no process starts before.
func TestACPCommandPolicy(t *testing.T) {
	for _, c := range []struct {
		agent  catalogacp.Agent
		policy string
		want   string // "" = starts
	}{
		{catalogacp.Agent{Command: "/bin/sh", Args: []string{"-c", "id"}, Description: "d"}, "enforce", "catalog.acp_agents.a.command: \"/bin/sh\" must be a bare executable name"},
		{catalogacp.Agent{Command: "bash", Description: "d"}, "enforce", "catalog.acp_agents.a.command: \"bash\" is not in the stdio command allowlist"},
		{catalogacp.Agent{Command: "node", Args: []string{"-e", "process.exit(0)"}, Description: "d"}, "enforce", "catalog.acp_agents.a.args[0]"},
		{catalogacp.Agent{Command: "node", Args: []string{"agent.mjs"}, Env: map[string]string{"NODE_OPTIONS": "--require /tmp/x.js"}, Description: "d"}, "enforce", "catalog.acp_agents.a.env.NODE_OPTIONS"},
		{catalogacp.Agent{Command: "npx", Args: []string{"-y", "@zed-industries/claude-code-acp"}, Description: "d"}, "enforce", ""},
		{catalogacp.Agent{Command: "/bin/sh", Args: []string{"-c", "id"}, Description: "d"}, "off", ""},
	} {
		dir := t.TempDir()
		cfg := Config{ExtensionsConfig: filepath.Join(dir, "extensions_config.json"), FileCommandPolicy: c.policy, ACPAgents: map[string]catalogacp.Agent{"a": c.agent}}
		cfg.SetDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%+v: Validate: %v", c.agent, err)
		}
		srv, err := New(context.Background(), cfg, svckit.Env{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v with policy %s: %v, want a start", c.agent, c.policy, err)
				continue
			}
			srv.Close()
			continue
		}
		if err == nil {
			srv.Close()
			t.Errorf("%+v with policy %s started, want %q", c.agent, c.policy, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.agent, err, c.want)
		}
	}
}

// A workspace-bound server (working_dir: thread) runs per thread in
// <workspaces.dir>/<thread>/user-data/workspace and reports it; without a
// trusted thread id, a thread folder, or through a symbolic link it is
// refused (FAILED_PRECONDITION) before any child starts.
func TestWorkspaceBoundServer(t *testing.T) {
	fsJS := npmJS(t, "server-filesystem")
	threads := filepath.Join(t.TempDir(), "threads")
	h := start(t, extJSON(`"fs": {"command": "node", "args": [`+strconv.Quote(fsJS)+`, "."], "session_scope": "per_thread", "working_dir": "thread"}`),
		func(c *Config, _ *svckit.Env) { c.Workspaces.Dir = threads })
	ctx := ctxT(t)
	list := func(thread string) (*catalogv1.CallToolResponse, error) {
		return h.svc.CallTool(actingFor(ctx, "alice"), &catalogv1.CallToolRequest{Name: "fs_list_allowed_directories", Arguments: args(t, `{}`),
			CallContext: &typev1.CallContext{ThreadId: thread}})
	}
	for _, thread := range []string{"", "t-missing", "../t1"} {
		if _, err := list(thread); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "thread workspace not found") {
			t.Fatalf("thread %q: %v, want FAILED_PRECONDITION", thread, err)
		}
	}
	ws := filepath.Join(threads, "t1", "user-data", "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := list("t1")
	if err != nil {
		t.Fatal(err)
	}
	if wd := r.GetWorkingDirectory(); wd.GetPath() != ws || wd.GetUserDataRoot() != filepath.Dir(ws) || !strings.Contains(textOf(r), ws) {
		t.Fatalf("working directory %v, result %q; want %s", wd, textOf(r), ws)
	}
	// A thread whose workspace is a link to elsewhere is refused.
	elsewhere := t.TempDir()
	if err := os.MkdirAll(filepath.Join(threads, "t2", "user-data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(threads, "t2", "user-data", "workspace")); err != nil {
		t.Fatal(err)
	}
	if _, err := list("t2"); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("symlinked workspace: %v, want FAILED_PRECONDITION", err)
	}
}

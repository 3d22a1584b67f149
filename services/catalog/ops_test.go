package catalog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the log lines containing every one of subs.
func (l *logBuf) lines(subs ...string) []string {
	var out []string
	for _, ln := range strings.Split(l.String(), "\n") {
		ok := ln != ""
		for _, s := range subs {
			ok = ok && strings.Contains(ln, s)
		}
		if ok {
			out = append(out, ln)
		}
	}
	return out
}

func withLog(buf *logBuf) func(*Config, *svckit.Env) {
	return func(_ *Config, env *svckit.Env) {
		env.Logger = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
}

// TestClaudeDesktopConfigFidelity: with real npm servers, a Claude Desktop
// entry with `"disabled": true` does not start and lists no tools; its
// unknown keys are logged with their paths; `${VAR:-default}` reaches the
// child (the memory server writes where the default says), `${VAR:?msg}`
// fails only its server with the message; enabling the disabled server
// through the API keeps Claude Desktop's spelling in the file.
func TestClaudeDesktopConfigFidelity(t *testing.T) {
	ev := npmJS(t, "server-everything")
	mem := npmJS(t, "server-memory")
	dir := t.TempDir()
	var logs logBuf
	ext := fmt.Sprintf(`{"mcpServers": {
		"everything": {"command": "node", "args": [%q, "stdio"], "disabled": true, "autoApprove": ["echo"], "alwaysAllow": []},
		"memory": {"command": "node", "args": [%q], "env": {"MEMORY_FILE_PATH": "${TP_OPS_UNSET_DIR:-%s}/mem.jsonl"}, "timeout": 30},
		"needs": {"command": "node", "args": [%q], "env": {"K": "${TP_OPS_REQUIRED:?export TP_OPS_REQUIRED first}"}}
	}}`, ev, mem, dir, mem)
	h := start(t, ext, withLog(&logs))
	ctx := ctxT(t)
	if s := h.server("everything"); s.State != catalogv1.ServerState_SERVER_STATE_DISABLED || s.ToolCount != 0 || s.Config.GetEnabled() {
		t.Fatalf("disabled server: state %v tools %d enabled %v", s.State, s.ToolCount, s.Config.GetEnabled())
	}
	lt, err := h.svc.ListTools(ctx, &catalogv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if tl.Server == "everything" {
			t.Fatalf("tool of a disabled server listed: %s", tl.Name)
		}
	}
	for _, want := range []string{"mcpServers.everything.autoApprove: unknown key", "mcpServers.everything.alwaysAllow: unknown key", "mcpServers.memory.timeout: unknown key"} {
		if got := logs.lines("level=WARN", want); len(got) != 1 {
			t.Errorf("want one WARN line with %q, got %d:\n%s", want, len(got), logs.String())
		}
	}
	// ... and on the server in ListServers.
	if w := h.server("everything").ConfigWarnings; len(w) != 2 || !strings.HasPrefix(w[0], "mcpServers.everything.autoApprove: unknown key") {
		t.Errorf("everything config_warnings: %q", w)
	}
	if w := h.server("memory").ConfigWarnings; len(w) != 1 || !strings.Contains(w[0], "use tool_call_timeout") {
		t.Errorf("memory config_warnings: %q", w)
	}
	if w := h.server("needs").ConfigWarnings; len(w) != 0 {
		t.Errorf("needs config_warnings: %q", w)
	}
	if r, err := h.call(ctx, h.svc, "memory_create_entities", `{"entities":[{"name":"n1","entityType":"t","observations":["o"]}]}`); err != nil || r.IsError {
		t.Fatalf("memory call: %v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mem.jsonl")); err != nil {
		t.Fatalf("${VAR:-default} did not reach the child: %v", err)
	}
	needs := h.server("needs")
	if needs.State != catalogv1.ServerState_SERVER_STATE_FAILED ||
		needs.LastError != "mcpServers.needs.env.K: environment variable TP_OPS_REQUIRED is not set: export TP_OPS_REQUIRED first" {
		t.Fatalf("needs: %v %q", needs.State, needs.LastError)
	}
	// Enabling through the API rewrites Claude Desktop's key, not DeerFlow's.
	on := true
	if _, err := h.admin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "everything", Server: &catalogv1.ServerUpdate{Enabled: &on}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "everything READY after enable", func() bool {
		return h.server("everything").State == catalogv1.ServerState_SERVER_STATE_READY
	})
	raw, _ := os.ReadFile(h.path)
	f, err := catalogconfig.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	e := f.Servers[0]
	if e.Disabled == nil || *e.Disabled || e.Enabled != nil || len(e.Extra) != 2 {
		t.Fatalf("rewritten entry: %s", raw)
	}
}

// TestServerURLIsStreamableHTTP: a Windsurf/Cursor-style `serverUrl`
// connects over streamable HTTP to a real server.
func TestServerURLIsStreamableHTTP(t *testing.T) {
	ev := npmJS(t, "server-everything")
	base := startEverything(t, ev, "streamableHttp")
	h := start(t, extJSON(fmt.Sprintf(`"wind": {"serverUrl": "%s/mcp"}`, base)), nil)
	s := h.server("wind")
	if s.State != catalogv1.ServerState_SERVER_STATE_READY || s.Config.Type != catalogv1.ServerType_SERVER_TYPE_HTTP || s.ToolCount == 0 || s.Config.Url != base+"/mcp" {
		t.Fatalf("wind: %v %v tools=%d url=%q err=%s", s.State, s.Config.Type, s.ToolCount, s.Config.Url, s.LastError)
	}
	if r, err := h.call(ctxT(t), h.svc, "wind_echo", `{"message":"surf"}`); err != nil || !strings.Contains(textOf(r), "surf") {
		t.Fatalf("call: %v %v", r, err)
	}
}

// TestReadyRequires: catalog.ready_requires none|any|all against a server
// that answers and one that hangs at initialize (bounded by its timeout).
func TestReadyRequires(t *testing.T) {
	ext := extJSON(fixtureServer("good", ""), fmt.Sprintf(`"hang": {"command": %q, "args": ["hang"], "session_init_timeout": 3}`, fixture),
		`"off": {"command": "npx", "disabled": true}`)
	for _, mode := range []string{ReadyNone, ReadyAny, ReadyAll} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "extensions_config.json")
			os.WriteFile(path, []byte(ext), 0o600)
			var logs logBuf
			begin := time.Now()
			srv, err := New(context.Background(), Config{ExtensionsConfig: path, CloseGrace: 300 * time.Millisecond, ReadyRequires: mode, FileCommandPolicy: "off"},
				svckit.Env{DataDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			var readyAt time.Duration
			for {
				err := srv.Ready(context.Background())
				if err == nil {
					readyAt = time.Since(begin)
					break
				}
				if mode == ReadyNone || !strings.Contains(err.Error(), "ready_requires "+mode) || !strings.Contains(err.Error(), "hang") {
					t.Fatalf("not ready: %v", err)
				}
				if time.Since(begin) > 20*time.Second {
					t.Fatalf("never ready: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			states := map[string]string{}
			for _, st := range srv.Manager().Statuses() {
				states[st.Name] = st.State.String()
			}
			switch mode {
			case ReadyNone:
				if readyAt > time.Second || states["hang"] != "CONNECTING" {
					t.Fatalf("none: ready after %s, states %v", readyAt, states)
				}
			case ReadyAny:
				if states["good"] != "READY" || states["hang"] != "CONNECTING" {
					t.Fatalf("any: ready after %s, states %v", readyAt, states)
				}
			case ReadyAll:
				if readyAt < 3*time.Second || states["good"] != "READY" || states["hang"] != "FAILED" {
					t.Fatalf("all: ready after %s, states %v", readyAt, states)
				}
				// Latched: a server added later (CONNECTING) does not withdraw readiness.
				os.WriteFile(path, []byte(extJSON(fixtureServer("good", ""), fmt.Sprintf(`"late": {"command": %q, "args": ["hang"]}`, fixture))), 0o600)
				eventually(t, 5*time.Second, "late CONNECTING", func() bool {
					_, ok := srv.Manager().Supervisor("late")
					return ok
				})
				if err := srv.Ready(context.Background()); err != nil {
					t.Fatalf("readiness withdrawn by a reload: %v", err)
				}
				if n := len(logs.lines("catalog: ready", "ready_requires=all")); n != 1 {
					t.Fatalf("%d 'catalog: ready' lines", n)
				}
			}
		})
	}
	if err := (&Config{ReadyRequires: "most"}).validateOnly(); err == nil || !strings.Contains(err.Error(), "catalog.ready_requires") {
		t.Fatalf("bad value: %v", err)
	}
}

// validateOnly applies the defaults then validates (test helper).
func (c *Config) validateOnly() error {
	c.SetDefaults()
	return c.Validate()
}

// TestStateChangesAreLogged: each state change of each server is one log
// line: CONNECTING and READY (tool count) at info; FAILED at start (stderr
// tail), init timeouts (stderr tail of the still-running child), crashes
// and restarts at warn; secrets of the server's configuration and
// secret-shaped text on stderr are masked, in the log and in last_error.
func TestStateChangesAreLogged(t *testing.T) {
	t.Setenv("TP_OPS_SECRET_TOKEN", "sekrit-abc123")
	var logs logBuf
	ext := extJSON(fixtureServer("good", ""),
		fmt.Sprintf(`"crash": {"command": %q, "args": ["exit"]}`, fixture),
		`"slow": {"command": "sh", "args": ["-c", "echo \"boot: using $$API_TOKEN\" >&2; echo 'auth: password=hunter22 ok' >&2; exec sleep 30"], "env": {"API_TOKEN": "${TP_OPS_SECRET_TOKEN}"}, "session_init_timeout": 1}`)
	h := start(t, ext, withLog(&logs))
	good := h.server("good")
	ready := logs.lines("level=INFO", "MCP server READY", "server=good")
	if len(ready) != 1 || !strings.Contains(ready[0], "tools="+strconv.Itoa(int(good.ToolCount))) || !strings.Contains(ready[0], "pid=") {
		t.Fatalf("READY line: %q\n%s", ready, logs.String())
	}
	if n := len(logs.lines("level=INFO", "MCP server CONNECTING", "server=good")); n != 1 {
		t.Fatalf("%d CONNECTING lines for good", n)
	}
	crash := logs.lines("level=WARN", "MCP server FAILED", "server=crash")
	if len(crash) == 0 || !strings.Contains(crash[0], "cannot start (on purpose)") || !strings.Contains(crash[0], "retry_in=") {
		t.Fatalf("crash FAILED line: %q\n%s", crash, logs.String())
	}
	slow := logs.lines("level=WARN", "session_init_timeout exceeded", "server=slow")
	if len(slow) != 1 || !strings.Contains(slow[0], "boot: using ***") || !strings.Contains(slow[0], "password=***") {
		t.Fatalf("init-timeout line: %q\n%s", slow, logs.String())
	}
	if s := h.server("slow"); !strings.Contains(s.LastError, "boot: using ***") || strings.Contains(s.LastError, "sekrit") || strings.Contains(s.LastError, "hunter22") {
		t.Fatalf("slow last_error: %q", s.LastError)
	}
	eventually(t, 10*time.Second, "a restart line", func() bool {
		return len(logs.lines("level=WARN", "MCP server restarting", "server=crash", "restart=1")) == 1
	})
	// A tool list that changed is one info line with the new count.
	if _, err := h.call(ctxT(t), h.svc, "good_add_tool", `{}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "tool list changed line", func() bool {
		return len(logs.lines("level=INFO", "MCP server tool list changed", "server=good", "tools="+strconv.Itoa(int(good.ToolCount)+1))) == 1
	})
	// A crash of a READY server: one warn line with the exit status.
	killPid(int(mustPid(t, h, "good")))
	eventually(t, 10*time.Second, "crash line", func() bool {
		return len(logs.lines("level=WARN", "MCP server crashed", "server=good", "killed by signal")) == 1
	})
	eventually(t, 10*time.Second, "READY again", func() bool {
		return len(logs.lines("level=INFO", "MCP server READY", "server=good")) == 2
	})
	h.close()
	if n := len(logs.lines("MCP server stopped", "server=good")); n != 1 {
		t.Fatalf("%d stopped lines", n)
	}
	if strings.Contains(logs.String(), "sekrit") || strings.Contains(logs.String(), "hunter22") {
		t.Fatalf("a secret reached the log:\n%s", logs.String())
	}
	// One line per state change: CONNECTING once at start, READY twice (the
	// restart itself is the "restarting" line), no duplicates.
	if re := regexp.MustCompile(`msg="catalog: MCP server (READY|CONNECTING)" server=good`); len(re.FindAllString(logs.String(), -1)) != 3 {
		t.Fatalf("good: %d READY/CONNECTING lines\n%s", len(re.FindAllString(logs.String(), -1)), logs.String())
	}
}

func mustPid(t *testing.T, h *harness, server string) int {
	t.Helper()
	st, ok := h.srv.Manager().Supervisor(server)
	if !ok || st.Status().Pid == 0 {
		t.Fatalf("no pid for %s", server)
	}
	return st.Status().Pid
}

// TestCallErrorsAreMasked: a per-thread child that fails to start prints a
// secret on stderr; the CallTool error does not carry it, and the cause in
// the server log (docs/decisions/0030-error-model.md: causes are logged, not
// returned) has the server's secrets and secret-shaped text masked.
func TestCallErrorsAreMasked(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "started")
	t.Setenv("TP_OPS_CALL_TOKEN", "tok-zyxw-9876")
	script := fmt.Sprintf(`if [ -e %s ]; then echo "child: token $$API_TOKEN, password=hunter22" >&2; exit 3; fi; touch %s; exec %s serve`, flag, flag, fixture)
	ext := extJSON(fmt.Sprintf(`"fx": {"command": "sh", "args": ["-c", %q], "env": {"API_TOKEN": "${TP_OPS_CALL_TOKEN}"}, "session_scope": "per_thread"}`, script))
	var logs logBuf
	h := start(t, ext, withLog(&logs))
	if s := h.server("fx"); s.State != catalogv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("fx: %v %s", s.State, s.LastError)
	}
	_, err := h.svc.CallTool(ctxT(t), &catalogv1.CallToolRequest{Name: "fx_echo", Arguments: args(t, `{"message":"m"}`),
		CallContext: &typev1.CallContext{ThreadId: "t1"}})
	if err == nil || strings.Contains(err.Error(), "zyxw") || strings.Contains(err.Error(), "hunter22") {
		t.Fatalf("call error: %v", err)
	}
	eventually(t, 5*time.Second, "the masked cause in the log", func() bool {
		return len(logs.lines("child: token ***, password=***")) > 0
	})
	if strings.Contains(logs.String(), "zyxw") || strings.Contains(logs.String(), "hunter22") {
		t.Fatalf("a secret reached the log:\n%s", logs.String())
	}
}

//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/testkit"
)

// TestServeWaitsForMCPServersAndLogsThem: with catalog.ready_requires: all,
// the real binary answers /readyz 503 naming the server still CONNECTING,
// then 200 once every enabled server is past its first attempt; the serve
// log has one line per server state change (a real npm server READY with its
// tool count, a hanging one FAILED at warn with its masked stderr tail, a
// Claude Desktop "disabled" one DISABLED, its unknown key reported).
func TestServeWaitsForMCPServersAndLogsThem(t *testing.T) {
	mem := testkit.NPMServer(t, "server-memory")
	dir := t.TempDir()
	ext := filepath.Join(dir, "extensions_config.json")
	if err := os.WriteFile(ext, []byte(fmt.Sprintf(`{"mcpServers": {
		"memory": {"command": "node", "args": [%q], "env": {"MEMORY_FILE_PATH": "${TP_E2E_UNSET:-%s}/mem.jsonl"}},
		"slow": {"command": "sh", "args": ["-c", "echo \"boot with $$API_TOKEN\" >&2; exec sleep 60"], "env": {"API_TOKEN": "e2e-secret-value"}, "session_init_timeout": 3},
		"off": {"command": "node", "args": [%q], "disabled": true, "autoApprove": ["x"]}
	}}`, mem, dir, mem)), 0o600); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	p := testkit.Start(t, testkit.Options{Wait: testkit.WaitLive, Config: "catalog:\n  extensions_config: " + ext + "\n  ready_requires: all\n  file_command_policy: off\n"}) // slow runs sh -c
	testkit.Eventually(t, 10*time.Second, "/readyz 503 naming slow", func() error {
		// "starting" until the first probe round; then the catalog's reason.
		if r := rest(t, p, "GET", "/readyz", "", ""); r.Status != 503 || !strings.Contains(r.Raw, "ready_requires all: 1 of 2 enabled MCP servers still CONNECTING: slow") {
			return fmt.Errorf("%d %s", r.Status, r.Raw)
		}
		return nil
	})
	testkit.Eventually(t, 20*time.Second, "/readyz 200", func() error {
		if r := rest(t, p, "GET", "/readyz", "", ""); r.Status != 200 {
			return fmt.Errorf("%d %s", r.Status, r.Raw)
		}
		return nil
	})
	if d := time.Since(begin); d < 3*time.Second {
		t.Errorf("ready after %s, before slow's 3 s session_init_timeout", d)
	}
	log := p.Stderr()
	for _, want := range [][]string{
		{"level=INFO", `"catalog: MCP server READY"`, "server=memory", "tools=9"},
		{"level=WARN", "session_init_timeout exceeded", "server=slow", "boot with ***"},
		{"level=INFO", `"catalog: MCP server DISABLED"`, "server=off"},
		{"level=WARN", "mcpServers.off.autoApprove: unknown key"},
		{"level=INFO", `"catalog: ready"`, "ready_requires=all"},
	} {
		found := false
		for _, ln := range strings.Split(log, "\n") {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(ln, w)
			}
			found = found || ok
		}
		if !found {
			t.Errorf("no log line with %q in:\n%s", want, log)
		}
	}
	// The CLI against the real suite: global flags first, JSON output, the
	// unknown key is on its server; the table prints it under the servers.
	// (slow is not checked: after its first FAILED it retries, CONNECTING
	// again, which readiness deliberately ignores once ready.)
	res := testkit.Run(t, nil, "--grpc-addr", p.GRPCAddr, "-o", "json", "servers", "list")
	var doc struct {
		Servers []struct {
			Config         struct{ Name string }
			State          string
			ConfigWarnings []string `json:"config_warnings"`
		}
	}
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &doc) != nil || len(doc.Servers) != 3 {
		t.Fatalf("servers list -o json: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	states := map[string]string{}
	for _, s := range doc.Servers {
		states[s.Config.Name] = s.State
		if s.Config.Name == "off" && (len(s.ConfigWarnings) != 1 || !strings.Contains(s.ConfigWarnings[0], "mcpServers.off.autoApprove")) {
			t.Errorf("off config_warnings: %q", s.ConfigWarnings)
		}
	}
	if states["memory"] != "SERVER_STATE_READY" || states["off"] != "SERVER_STATE_DISABLED" {
		t.Errorf("states after readiness: %v", states)
	}
	if res := testkit.Run(t, nil, "servers", "list", "--grpc-addr", p.GRPCAddr); res.Code != 0 || !strings.Contains(res.Stdout, "config warnings:\n  mcpServers.off.autoApprove: unknown key") {
		t.Errorf("servers list table: %d %q", res.Code, res.Stdout)
	}
	if strings.Contains(log, "e2e-secret-value") {
		t.Errorf("a secret reached the serve log:\n%s", log)
	}
}

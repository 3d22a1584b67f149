package catalog

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/svckit"
)

// TestFileCommandPolicy: with catalog.file_command_policy enforce (the
// default), servers of extensions_config.json that break the stdio command
// policy are FAILED with the field named and never started: each would
// create a marker file, none exists.
func TestFileCommandPolicy(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	dir := t.TempDir()
	marker := func(n string) string { return filepath.Join(dir, n) }
	js := func(n string) string { return "require('fs').writeFileSync('" + marker(n) + "','ran')" }
	ext := `{"mcpServers": {
		"node-eval": {"command": "node", "args": ["-e", "` + js("node-eval") + `"]},
		"node-print": {"command": "node", "args": ["--print=` + js("node-print") + `"]},
		"npx-node": {"command": "npx", "args": ["-y", "node", "-pe", "` + js("npx-node") + `"]},
		"node-stdin": {"command": "node", "args": ["-"]},
		"py-c": {"command": "python3", "args": ["-c", "open('` + marker("py-c") + `','w')"]},
		"py-m": {"command": "python3", "args": ["-m", "timeit", "open('` + marker("py-m") + `','w')"]},
		"sh": {"command": "sh", "args": ["-c", "touch ` + marker("sh") + `"]},
		"abs": {"command": "/bin/sh", "args": ["-c", "touch ` + marker("abs") + `"]},
		"env": {"command": "node", "args": ["x.js"], "env": {"NODE_OPTIONS": "--require=/tmp/x.js"}}
	}}`
	h := start(t, ext, func(c *Config, _ *svckit.Env) { c.FileCommandPolicy = "" }) // "" = the default
	want := map[string]string{
		"node-eval": "mcpServers.node-eval.args[0]", "node-print": "mcpServers.node-print.args[0]",
		"npx-node": "mcpServers.npx-node.args[2]", "node-stdin": "mcpServers.node-stdin.args[0]",
		"py-c": "mcpServers.py-c.args[0]", "py-m": "mcpServers.py-m.args[0]",
		"sh": "mcpServers.sh.command", "abs": "mcpServers.abs.command", "env": "mcpServers.env.env.NODE_OPTIONS",
	}
	for name, field := range want {
		s := h.server(name)
		if s.GetState() != catalogv1.ServerState_SERVER_STATE_FAILED || !strings.Contains(s.GetLastError(), field) {
			t.Errorf("%s: state %s, last_error %q; want FAILED naming %s", name, s.GetState(), s.GetLastError(), field)
		}
		if _, err := os.Stat(marker(name)); err == nil {
			t.Errorf("%s ran: %s exists", name, marker(name))
		}
	}
	// Enabling a refused server through the API does not start it either.
	h2 := start(t, `{"mcpServers": {"late": {"command": "node", "args": ["-e", "`+js("late")+`"], "disabled": true}}}`, func(c *Config, _ *svckit.Env) { c.FileCommandPolicy = "enforce" })
	on := true
	_, _ = h2.admin.UpdateServer(ctxT(t), &catalogv1.UpdateServerRequest{Name: "late", Server: &catalogv1.ServerUpdate{Enabled: &on}})
	eventually(t, 5e9, "late FAILED", func() bool { return h2.server("late").GetState() == catalogv1.ServerState_SERVER_STATE_FAILED })
	if !strings.Contains(h2.server("late").GetLastError(), "mcpServers.late.args[0]") {
		t.Errorf("late: %q", h2.server("late").GetLastError())
	}
	if _, err := os.Stat(marker("late")); err == nil {
		t.Error("the enabled refused server ran")
	}
}

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/services/catalog/catalogacp"
)

func TestImportDeerFlowACPAgents(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(src, []byte(`
acp_agents:
  claude_code:
    command: npx
    args: ["-y", "@zed-industries/claude-code-acp"]
    env:
      ANTHROPIC_API_KEY: $ANTHROPIC_API_KEY
    description: Claude Code for coding tasks
    model: claude-sonnet-4
    auto_approve_permissions: true
    color: blue
  broken:
    args: ["x"]
    description: no command
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "toolplane.yaml")
	_, stderr, err := runImport(t, src, "-o", out)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadWritten(t, out)
	got := cfg.Catalog.ACPAgents
	want := catalogacp.Agent{Command: "npx", Args: []string{"-y", "@zed-industries/claude-code-acp"},
		Env: map[string]string{"ANTHROPIC_API_KEY": "$ANTHROPIC_API_KEY"}, Description: "Claude Code for coding tasks",
		Model: "claude-sonnet-4", AutoApprovePermissions: true}
	a, ok := got["claude_code"]
	if len(got) != 1 || !ok || a.Command != want.Command || !slices.Equal(a.Args, want.Args) || a.Env["ANTHROPIC_API_KEY"] != "$ANTHROPIC_API_KEY" ||
		a.Description != want.Description || a.Model != want.Model || !a.AutoApprovePermissions {
		t.Fatalf("catalog.acp_agents = %+v", got)
	}
	lines := reportLines(stderr)
	for _, w := range []string{"acp_agents.broken: acp_agents.broken.command: required", "acp_agents.claude_code.color: not a key"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) }) {
			t.Errorf("report lacks %q:\n%s", w, stderr)
		}
	}
	if slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "acp_agents:") }) {
		t.Errorf("acp_agents reported as not carried over:\n%s", stderr)
	}
}

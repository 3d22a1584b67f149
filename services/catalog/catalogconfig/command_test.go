package catalogconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandPolicyHostile: every spelling of inline code, stdin programs,
// data: URLs, code-taking subcommands and module runners is refused for each
// interpreter and runner the policy knows, with the field named; nested
// runners (npx node -e) are checked by the inner interpreter's rules.
func TestCommandPolicyHostile(t *testing.T) {
	allow := []string{"node", "nodejs", "npx", "uvx", "uv", "python3", "python3.12", "python", "deno", "bun", "bunx", "bash", "sh", "perl", "ruby", "php", "tsx", "pnpm", "some-server"}
	cases := []struct {
		cmd  string
		args []string
		want string // the field the error must name
	}{
		// node (every example server runs on node)
		{"node", []string{"-e", "require('child_process').exec('id')"}, "args[0]"},
		{"node", []string{"--eval", "1"}, "args[0]"},
		{"node", []string{"--eval=1"}, "args[0]"},
		{"node", []string{"-p", "1"}, "args[0]"},
		{"node", []string{"--print", "1"}, "args[0]"},
		{"node", []string{"-pe", "1"}, "args[0]"},
		{"node", []string{"-ep", "1"}, "args[0]"},
		{"node", []string{"-r", "/tmp/evil.js", "server.js"}, "args[0]"},
		{"node", []string{"--require=/tmp/evil.js", "server.js"}, "args[0]"},
		{"node", []string{"--import", "data:text/javascript,1", "server.js"}, "args[0]"},
		{"node", []string{"--experimental-loader=/tmp/l.mjs", "s.js"}, "args[0]"},
		{"node", []string{"--inspect=0.0.0.0:9229", "s.js"}, "args[0]"},
		{"node", []string{"--env-file=/tmp/e", "s.js"}, "args[0]"},
		{"node", []string{"-"}, "args[0]"},
		{"node", []string{"data:text/javascript,process.exit(1)"}, "args[0]"},
		{"node", []string{"--input-type=module", "-e", "1"}, "args[0]"},
		{"node", []string{"-i"}, "args[0]"},
		{"node", []string{"--run", "evil"}, "args[0]"},
		{"node", []string{"server.js", "--eval=1"}, "args[1]"},
		{"nodejs", []string{"-e", "1"}, "args[0]"},
		// npx and other package runners
		{"npx", []string{"-c", "id"}, "args[0]"},
		{"npx", []string{"--call", "id"}, "args[0]"},
		{"npx", []string{"--call=id"}, "args[0]"},
		{"npx", []string{"-yc", "id"}, "args[0]"},
		{"npx", []string{"--node-options=--require=/tmp/x", "pkg"}, "args[0]"},
		{"npx", []string{"--script-shell=/tmp/sh", "pkg"}, "args[0]"},
		{"npx", []string{"-y", "node", "-e", "1"}, "args[2]"},
		{"npx", []string{"-y", "node@20", "--eval=1"}, "args[2]"},
		{"npx", []string{"-y", "tsx", "-e", "1"}, "args[2]"},
		{"npx", []string{"--", "bash", "-c", "id"}, "args[2]"},
		{"pnpm", []string{"dlx", "node", "-p", "1"}, "args[2]"},
		{"bunx", []string{"node", "-e", "1"}, "args[1]"},
		// python
		{"python3", []string{"-c", "import os"}, "args[0]"},
		{"python3", []string{"-cimport os"}, "args[0]"},
		{"python3", []string{"-Ic", "1"}, "args[0]"},
		{"python3", []string{"-m", "timeit", "1"}, "args[0]"},
		{"python3", []string{"-mcode"}, "args[0]"},
		{"python3", []string{"-m", "runpy"}, "args[0]"},
		{"python3", []string{"-m", "pdb", "x.py"}, "args[0]"},
		{"python3", []string{"-Bm", "cProfile", "-c", "1"}, "args[0]"},
		{"python3", []string{"-m", "asyncio"}, "args[0]"},
		{"python3", []string{"-m", "pip", "install", "evil"}, "args[0]"},
		{"python3", []string{"-"}, "args[0]"},
		{"python3", []string{"-i", "s.py"}, "args[0]"},
		{"python3.12", []string{"-c", "1"}, "args[0]"},
		{"python", []string{"-c", "1"}, "args[0]"},
		// uv / uvx
		{"uvx", []string{"python", "-c", "1"}, "args[1]"},
		{"uvx", []string{"--from", "pkg", "python3", "-c", "1"}, "args[3]"},
		{"uvx", []string{"--python", "3.12", "python", "-m", "code"}, "args[3]"},
		{"uv", []string{"run", "python", "-c", "1"}, "args[2]"},
		{"uv", []string{"run", "-m", "http.server"}, "args[1]"},
		{"uv", []string{"run", "--script", "x.py"}, "args[1]"},
		// deno, bun
		{"deno", []string{"eval", "Deno.exit(1)"}, "args[0]"},
		{"deno", []string{"repl"}, "args[0]"},
		{"deno", []string{"task", "evil"}, "args[0]"},
		{"deno", []string{"run", "data:application/javascript,1"}, "args[1]"},
		{"deno", []string{"run", "-"}, "args[1]"},
		{"deno", []string{"--eval=1"}, "args[0]"},
		{"deno", []string{"run", "npm:node", "-e", "1"}, "args[2]"},
		{"bun", []string{"-e", "1"}, "args[0]"},
		{"bun", []string{"--eval", "1"}, "args[0]"},
		{"bun", []string{"exec", "id"}, "args[0]"},
		{"bun", []string{"x", "node", "-e", "1"}, "args[2]"},
		// shells, perl, ruby, php
		{"bash", []string{"-c", "id"}, "args[0]"},
		{"bash", []string{"-lc", "id"}, "args[0]"},
		{"bash", []string{"-s"}, "args[0]"},
		{"bash", []string{"--rcfile", "/tmp/rc"}, "args[0]"},
		{"sh", []string{"-ec", "id"}, "args[0]"},
		{"perl", []string{"-e", "1"}, "args[0]"},
		{"perl", []string{"-E", "say 1"}, "args[0]"},
		{"perl", []string{"-ne", "1"}, "args[0]"},
		{"perl", []string{"-MO=Deparse", "x"}, "args[0]"},
		{"ruby", []string{"-e", "1"}, "args[0]"},
		{"ruby", []string{"-rsocket", "x.rb"}, "args[0]"},
		{"php", []string{"-r", "system('id');"}, "args[0]"},
		{"php", []string{"-B", "1"}, "args[0]"},
		// an allowlisted executable the policy does not know: every interpreter's flags
		{"some-server", []string{"--eval", "1"}, "args[0]"},
		{"some-server", []string{"-c", "1"}, "args[0]"},
		// executables
		{"/usr/bin/node", nil, "command"},
		{"./node", nil, "command"},
		{"node;id", nil, "command"},
		{"python2", nil, "command"}, // not allowlisted
		{"NODE", nil, "command"},
	}
	for _, c := range cases {
		s := Server{Name: "evil", Command: c.cmd, Args: c.args}
		err := ValidateCommand(&s, allow)
		if err == nil {
			t.Errorf("%s %q: accepted", c.cmd, c.args)
			continue
		}
		if !strings.Contains(err.Error(), "mcpServers.evil."+c.want) {
			t.Errorf("%s %q: %v, want it to name mcpServers.evil.%s", c.cmd, c.args, err, c.want)
		}
	}
	for _, env := range []string{"NODE_OPTIONS", "node_options", "LD_PRELOAD", "PYTHONSTARTUP", "PYTHONPATH", "PERL5OPT", "RUBYOPT", "BASH_ENV",
		"NPM_CONFIG_SCRIPT_SHELL", "GIT_SSH_COMMAND", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF", "BUN_CONFIG_PRELOAD", "DENO_CERT", "PATH", "EDITOR"} {
		s := Server{Name: "evil", Command: "node", Args: []string{"s.js"}, Env: map[string]string{env: "x"}}
		if err := ValidateCommand(&s, allow); err == nil || !strings.Contains(err.Error(), "mcpServers.evil.env."+env) {
			t.Errorf("env %s: %v", env, err)
		}
	}
}

// TestCommandPolicyAccepts: ordinary server commands pass, including every
// server of the example (examples/extensions_config.json, expanded as the
// demo does).
// TestCommandPolicyNpxHostExecutables: npx runs a host executable of the
// package's name before it looks for a package, so a package (or the
// command after -p) that names one is refused.
func TestCommandPolicyNpxHostExecutables(t *testing.T) {
	for _, args := range [][]string{
		{"awk", "BEGIN{system(\"id\")}"},
		{"--", "touch", "/tmp/x"},
		{"--yes", "touch", "/tmp/x"},
		{"-y", "env"},
		{"-p", "@scope/pkg", "touch", "/tmp/x"},
		{"--package", "x", "env"},
	} {
		s := Server{Name: "x", Command: "npx", Args: args}
		err := ValidateCommand(&s, DefaultCommandAllowlist)
		if err == nil || !strings.Contains(err.Error(), "host executable") {
			t.Errorf("npx %q: %v, want a host-executable refusal", args, err)
		}
	}
}

func TestCommandPolicyAccepts(t *testing.T) {
	for _, s := range []Server{
		{Name: "a", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}},
		{Name: "b", Command: "npx", Args: []string{"--yes", "-p", "@scope/pkg", "pkg-bin"}},
		{Name: "c", Command: "uvx", Args: []string{"mcp-server-fetch"}},
		{Name: "d", Command: "uvx", Args: []string{"--from", "git+https://example.invalid/x", "mcp-x"}},
		{Name: "e", Command: "python3", Args: []string{"-m", "mcp_server_time", "--local-timezone=UTC"}},
		{Name: "f", Command: "python3", Args: []string{"-u", "server.py"}},
		{Name: "g", Command: "node", Args: []string{"/opt/s/dist/index.js", "--headless", "stdio"}},
		{Name: "h", Command: "node", Args: []string{"--max-old-space-size=512", "s.js"}},
		{Name: "i", Command: "python3", Args: []string{"-X", "utf8", "s.py"}},
	} {
		if err := ValidateCommand(&s, DefaultCommandAllowlist); err != nil {
			t.Errorf("%s %q: %v", s.Command, s.Args, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "extensions_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		MCPServers map[string]Server `json:"mcpServers"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.MCPServers) != 10 {
		t.Fatalf("example has %d servers", len(f.MCPServers))
	}
	for name, s := range f.MCPServers {
		s.Name = name
		for i, a := range s.Args {
			s.Args[i] = strings.ReplaceAll(a, "${TOOLPLANE_NPM_DIR}", "/opt/npm")
		}
		if err := ValidateCommand(&s, DefaultCommandAllowlist); err != nil {
			t.Errorf("example server %s: %v", name, err)
		}
	}
}

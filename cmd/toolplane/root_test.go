package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestEverySubCommandOnce: each sub-command is registered exactly once.
func TestEverySubCommandOnce(t *testing.T) {
	seen := map[string]int{}
	for _, c := range newRootCmd().Commands() {
		seen[c.Name()]++
	}
	for _, want := range []string{"serve", "healthcheck", "version", "servers", "tools", "policies", "decisions", "skills", "threads", "agents", "mcp", "config", "eval", "storage"} {
		if seen[want] != 1 {
			t.Errorf("sub-command %q registered %d times; want 1", want, seen[want])
		}
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("sub-command %q registered %d times", name, n)
		}
	}
}

// TestUsageErrors: unknown sub-commands of groups and global flags given to
// commands that do not take them are usage errors (exit 2); global flags
// (a boolean among them) parse before the sub-command. The real binary is
// tested in tests/e2e/cli_test.go.
func TestUsageErrors(t *testing.T) {
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"servers", "lst"}, "Did you mean this?\n\tget\n\tlist"},
		{[]string{"skills", "instal", "x"}, "install"},
		{[]string{"serve", "--token", "t"}, `--token: not a flag of "toolplane serve"`},
		{[]string{"version", "-o", "json"}, `--output: not a flag of "toolplane version"`},
		{[]string{"servers", "list", "-o", "yaml"}, `"yaml" is not one of table, json`},
	} {
		_, err := run(c.args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want exit 2 with %q", c.args, err, c.want)
		}
	}
	if out, err := run("servers"); err != nil || !strings.Contains(out, "Available Commands") {
		t.Errorf("servers: %v %q", err, out)
	}
	// Parses up to dialling 127.0.0.1:1 (connection refused, not a usage error).
	_, err := run("--tls", "--json", "--grpc-addr", "127.0.0.1:1", "servers", "list")
	var ee *exitError
	if err == nil || errors.As(err, &ee) || strings.Contains(err.Error(), "unknown") {
		t.Errorf("global flags before the sub-command: %v", err)
	}
}

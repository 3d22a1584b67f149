package main

import "testing"

// TestEverySubCommandOnce: each sub-command is registered exactly once.
func TestEverySubCommandOnce(t *testing.T) {
	seen := map[string]int{}
	for _, c := range newRootCmd().Commands() {
		seen[c.Name()]++
	}
	for _, want := range []string{"serve", "healthcheck", "version", "servers", "tools", "policies", "decisions", "skills", "threads", "agents", "mcp", "config", "eval"} {
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

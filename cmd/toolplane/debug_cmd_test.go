package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestDebugChainPrintsTheOrderInForce pins the printed tool-call chain:
// the order of docs/architecture.md §3.2, outer → inner, one step per line
// with a description. A new step changes this list on purpose.
func TestDebugChainPrintsTheOrderInForce(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"debug", "chain"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	want := []string{"output_budget", "refusal_audit", "result_sanitisation", "assembly", "input_budget", "decode_arguments", "map_arguments", "authorization", "read_before_write",
		"error_normalisation", "tool_lookup", "skill_policy", "deferred_filter", "dispatch"}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("printed %d steps, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != strconv.Itoa(i+1)+"." || f[1] != want[i] {
			t.Errorf("line %d = %q, want step %d %q with a description", i+1, l, i+1, want[i])
		}
	}
	// An argument is a usage error.
	root = newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"debug", "chain", "extra"})
	if err := root.Execute(); err == nil {
		t.Fatal("debug chain accepted an argument")
	}
}

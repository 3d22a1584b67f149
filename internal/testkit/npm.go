package testkit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// rootFromWD walks up from the working directory (a test runs in its
// package directory) to the folder holding go.mod.
func rootFromWD() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("module root not found above the working directory")
		}
		dir = parent
	}
}

// missing fails the test under CI=true (CI installs everything the tests
// use) and skips it elsewhere.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// NPMServer returns the entry point (dist/index.js) of the pinned npm MCP
// server @modelcontextprotocol/<name> installed by scripts/install-npm.sh
// into .tools/npm. When it or node is missing the test fails under CI=true
// and is skipped elsewhere.
func NPMServer(t testing.TB, name string) string {
	t.Helper()
	root, err := rootFromWD()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, ".tools", "npm", "node_modules", "@modelcontextprotocol", name, "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		missing(t, "npm MCP server %s not installed (run scripts/install-npm.sh): %v", name, err)
		return ""
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node not found: %v", err)
		return ""
	}
	return p
}

// DataRoot is the folder, relative to the module root, that holds the data
// sets the tests, benchmarks and `make eval` read (testdata/README.md).
const DataRoot = "testdata"

// SharedData returns the path of rel (e.g. "toolret/metatool/tools.jsonl")
// inside the repository's data folder, testdata/ at the module root
// (testdata/README.md). The data is part of the repository, so a missing
// file is a broken checkout: the test fails, under CI and elsewhere.
func SharedData(t testing.TB, rel string) string {
	t.Helper()
	root, err := rootFromWD()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, DataRoot, filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("data %s not found in %s/ (part of the repository; see %s/README.md): %v", rel, DataRoot, DataRoot, err)
	}
	return p
}

package arch

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestModuleImportRules applies the import rules to every package of the
// module: its direct non-test imports as `go list -f '{{.ImportPath}}
// {{.Dir}} {{join .Imports " "}}' ./...` reports them, with the
// default build tags and with -tags e2e (the only tag non-test files use).
// A failure names each offending package and import.
func TestModuleImportRules(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	module := strings.TrimSpace(goList(t, root, "-m"))
	table := map[string][]string{}
	dirs := map[string]bool{}
	for _, tags := range [][]string{nil, {"-tags", "e2e"}} {
		// Tab-separated: a directory may contain spaces.
		args := append(append([]string{}, tags...), "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .Imports \" \"}}", "./...")
		for _, line := range strings.Split(goList(t, root, args...), "\n") {
			f := strings.Split(line, "\t")
			if len(f) != 3 {
				continue
			}
			pkg, dir := f[0], f[1]
			if _, ok := table[pkg]; !ok {
				table[pkg] = nil
			}
			for _, imp := range strings.Fields(f[2]) {
				if !slices.Contains(table[pkg], imp) {
					table[pkg] = append(table[pkg], imp)
				}
			}
			dirs[dir] = true
		}
	}
	recordInputs(t, root, dirs)
	// The table is the real module: the composition root is in it and
	// imports the services it wires (else the rules would check nothing).
	if got := table[module+"/internal/app"]; !slices.Contains(got, module+"/services/catalog") {
		t.Fatalf("go list reported %d packages; %s/internal/app imports %q, not the catalog service", len(table), module, got)
	}
	for _, v := range Check(module, table) {
		t.Errorf("import rule broken: %s", v)
	}
}

// recordInputs reads the package directories and their parents up to root
// and stats their Go files. The go command's test cache keys a cached result
// on what the test itself read, not on what its `go list` child read; with
// this, an edited, added or removed Go file or package reruns the test.
func recordInputs(t *testing.T, root string, dirs map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	for dir := range dirs {
		for d := dir; !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			entries, err := os.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".go") && d == dir {
					if _, err := os.Stat(filepath.Join(d, e.Name())); err != nil {
						t.Fatal(err)
					}
				}
			}
			if d == root || filepath.Dir(d) == d {
				break
			}
		}
	}
}

// goList runs `go list args...` in dir and returns its standard output.
func goList(t *testing.T, dir string, args ...string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the module's imports: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

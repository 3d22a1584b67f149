package runtimetools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// searchFixture is a thread workspace on disk plus a folder outside it
// that symbolic links point at.
type searchFixture struct {
	d       *Dispatcher
	userDir string
	outside string
}

func newSearchFixture(t *testing.T) *searchFixture {
	t.Helper()
	base := t.TempDir()
	ws := NewWorkspace(filepath.Join(base, "runtime"))
	r, err := ws.Root("t1")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	f := &searchFixture{
		d:       NewDispatcher(Settings{ToolCallTimeout: time.Minute}, Deps{Workspace: ws}),
		userDir: filepath.Join(ws.ThreadDir("t1"), "user-data"),
		outside: filepath.Join(base, "outside"),
	}
	if err := os.MkdirAll(f.outside, 0o700); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *searchFixture) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(f.userDir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// call runs the tool through Dispatcher.CallTool, as the chain's dispatch
// step does, with the default config tool of that `use`.
func (f *searchFixture) call(t *testing.T, use string, args map[string]any) (string, error) {
	t.Helper()
	return f.callCtx(context.Background(), t, use, args)
}

func (f *searchFixture) callCtx(ctx context.Context, t *testing.T, use string, args map[string]any) (string, error) {
	t.Helper()
	name := runtimeassembly.ImplNames[use]
	tool := &runtimeassembly.Tool{Name: name, Source: runtimeassembly.SourceConfig, Use: use, Group: "file:read"}
	ec := &runtimechain.Call{
		Thread: &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1"}},
		View:   &runtimeassembly.View{Base: &runtimeassembly.Base{ByName: map[string]*runtimeassembly.Tool{name: tool}}},
		Name:   name, CallID: "c1", Args: args,
	}
	o, err := f.d.CallTool(ctx, ec)
	if err != nil {
		return "", err
	}
	return o.Text, nil
}

func lines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

func TestGlobVirtualPathsAndPatterns(t *testing.T) {
	f := newSearchFixture(t)
	f.write(t, "workspace/a.go", "package a\n")
	f.write(t, "workspace/sub/deep/b.go", "package b\n")
	f.write(t, "workspace/notes.md", "# notes\n")
	f.write(t, "outputs/c.go", "package c\n")
	f.write(t, "uploads/d.go", "package d\n")

	got, err := f.call(t, "file.glob", map[string]any{"pattern": "**/*.go"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/mnt/user-data/outputs/c.go", "/mnt/user-data/uploads/d.go", "/mnt/user-data/workspace/a.go", "/mnt/user-data/workspace/sub/deep/b.go"}
	if strings.Join(lines(got), ",") != strings.Join(want, ",") {
		t.Fatalf("glob **/*.go:\n%s\nwant %v", got, want)
	}
	// One segment: only the folder's own entries.
	got, err = f.call(t, "file.glob", map[string]any{"pattern": "*.go", "path": "/mnt/user-data/workspace"})
	if err != nil || got != "/mnt/user-data/workspace/a.go" {
		t.Fatalf("glob *.go in workspace = %q, %v", got, err)
	}
	// An absolute pattern under the search path is accepted.
	got, err = f.call(t, "file.glob", map[string]any{"pattern": "/mnt/user-data/workspace/sub/**/*.go"})
	if err != nil || got != "/mnt/user-data/workspace/sub/deep/b.go" {
		t.Fatalf("absolute pattern = %q, %v", got, err)
	}
	got, err = f.call(t, "file.glob", map[string]any{"pattern": "**/sub", "include_dirs": true})
	if err != nil || got != "/mnt/user-data/workspace/sub/" {
		t.Fatalf("include_dirs = %q, %v", got, err)
	}
	got, err = f.call(t, "file.glob", map[string]any{"pattern": "**/*.rs"})
	if err != nil || !strings.HasPrefix(got, "No files match") {
		t.Fatalf("no match = %q, %v", got, err)
	}
	for _, bad := range []map[string]any{
		{"pattern": ""},
		{"pattern": "../*"},
		{"pattern": "[a"},
		{"pattern": "*", "path": "/etc"},
		{"pattern": "*", "path": "/mnt/user-data/workspace/../../.."},
		{"pattern": "/etc/*"},
		{"pattern": "*", "path": "/mnt/user-data/workspace/a.go"},
	} {
		if _, err := f.call(t, "file.glob", bad); err == nil {
			t.Errorf("glob %v accepted", bad)
		} else if _, ok := err.(*runtimechain.BusinessError); !ok {
			t.Errorf("glob %v: %v is not a business error", bad, err)
		}
	}
}

func TestGlobCapsAt200(t *testing.T) {
	f := newSearchFixture(t)
	for i := range 250 {
		f.write(t, fmt.Sprintf("workspace/f%03d.txt", i), "x")
	}
	got, err := f.call(t, "file.glob", map[string]any{"pattern": "**/*.txt"})
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(got)
	if len(ls) != GlobMaxResults+1 || !strings.Contains(ls[GlobMaxResults], "truncated at 200") {
		t.Fatalf("got %d lines, last %q", len(ls), ls[len(ls)-1])
	}
	if ls[0] != "/mnt/user-data/workspace/f000.txt" || ls[199] != "/mnt/user-data/workspace/f199.txt" {
		t.Fatalf("not in path order: %q .. %q", ls[0], ls[199])
	}
}

func TestSearchNeverLeavesTheThread(t *testing.T) {
	f := newSearchFixture(t)
	if err := os.WriteFile(filepath.Join(f.outside, "secret.go"), []byte("SECRET_TOKEN\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.write(t, "workspace/ok.go", "fine\n")
	if err := os.Symlink(f.outside, filepath.Join(f.userDir, "workspace", "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.outside, "secret.go"), filepath.Join(f.userDir, "workspace", "linkfile.go")); err != nil {
		t.Fatal(err)
	}
	got, err := f.call(t, "file.glob", map[string]any{"pattern": "**/secret.go"})
	if err != nil || !strings.HasPrefix(got, "No files match") {
		t.Fatalf("glob followed a link out of the thread: %q, %v", got, err)
	}
	got, err = f.call(t, "file.grep", map[string]any{"pattern": "SECRET"})
	if err != nil || strings.Contains(got, "SECRET_TOKEN") || !strings.HasPrefix(got, "No matches") {
		t.Fatalf("grep read outside the thread: %q, %v", got, err)
	}
	if _, err := f.call(t, "file.grep", map[string]any{"pattern": "x", "path": "/mnt/user-data/workspace/linkdir"}); err == nil {
		t.Fatal("grep accepted a folder link leaving the thread")
	}
}

func TestGrepMatchesAndLimits(t *testing.T) {
	f := newSearchFixture(t)
	f.write(t, "workspace/a.py", "import os\nTODO: fix\nprint(1+1)\n")
	f.write(t, "workspace/b.md", "todo later\nnothing\n")
	f.write(t, "outputs/big.txt", strings.Repeat("TODO\n", (grepMaxFileBytes/5)+10))
	f.write(t, "workspace/bin.dat", "TODO\x00\x01\x02")

	got, err := f.call(t, "file.grep", map[string]any{"pattern": "todo"})
	if err != nil {
		t.Fatal(err)
	}
	want := "/mnt/user-data/workspace/a.py:2: TODO: fix\n/mnt/user-data/workspace/b.md:1: todo later\n(2 binary or larger-than-1-MiB files skipped)"
	if got != want {
		t.Fatalf("grep todo:\n%s\nwant\n%s", got, want)
	}
	got, err = f.call(t, "file.grep", map[string]any{"pattern": "todo", "case_sensitive": true, "glob": "*.md"})
	if err != nil || got != "/mnt/user-data/workspace/b.md:1: todo later" {
		t.Fatalf("case-sensitive, glob = %q, %v", got, err)
	}
	got, err = f.call(t, "file.grep", map[string]any{"pattern": "1+1", "literal": true, "path": "/mnt/user-data/workspace/a.py"})
	if err != nil || got != "/mnt/user-data/workspace/a.py:3: print(1+1)" {
		t.Fatalf("literal on one file = %q, %v", got, err)
	}
	// As a regular expression 1+1 means "one or more 1, then 1": no match.
	got, err = f.call(t, "file.grep", map[string]any{"pattern": "1+1", "path": "/mnt/user-data/workspace/a.py"})
	if err != nil || !strings.HasPrefix(got, "No matches") {
		t.Fatalf("regex 1+1 = %q, %v", got, err)
	}
	for _, bad := range []map[string]any{
		{"pattern": ""},
		{"pattern": "(unclosed"},
		{"pattern": `(a)\1`}, // backreferences are not RE2
		{"pattern": strings.Repeat("a", grepMaxPattern+1)},
		{"pattern": "x", "path": "/mnt/user-data/workspace/missing"},
		{"pattern": "x", "path": "/mnt/skills"},
	} {
		if _, err := f.call(t, "file.grep", bad); err == nil {
			t.Errorf("grep %v accepted", bad)
		}
	}
}

func TestGrepCapsAt100AndClipsLines(t *testing.T) {
	f := newSearchFixture(t)
	var sb strings.Builder
	for i := range 150 {
		fmt.Fprintf(&sb, "match %d %s\n", i, strings.Repeat("y", 400))
	}
	f.write(t, "workspace/many.txt", sb.String())
	got, err := f.call(t, "file.grep", map[string]any{"pattern": "^match"})
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(got)
	if len(ls) != GrepMaxResults+1 || !strings.Contains(ls[GrepMaxResults], "truncated at 100") {
		t.Fatalf("got %d lines, last %q", len(ls), ls[len(ls)-1])
	}
	if !strings.HasPrefix(ls[99], "/mnt/user-data/workspace/many.txt:100: match 99 ") || !strings.HasSuffix(ls[0], "…") || len([]rune(ls[0])) > 400 {
		t.Fatalf("line shape: %q", ls[0])
	}
}

func TestSearchStopsOnCancelledCall(t *testing.T) {
	f := newSearchFixture(t)
	f.write(t, "workspace/a.txt", "hello\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := f.callCtx(ctx, t, "file.grep", map[string]any{"pattern": "hello"})
	if err != nil || !strings.Contains(got, "the search was cancelled") || strings.Contains(got, "a.txt:1") {
		t.Fatalf("cancelled grep = %q, %v", got, err)
	}
}

func TestGlobMatcher(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"**", "a/b/c", true},
		{"**/*.go", "a.go", true},
		{"**/*.go", "x/y/a.go", true},
		{"*.go", "x/a.go", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/b/c", false},
		{"**/**/x", "x", true},
		{"**/*.{md,txt}", "a/b.txt", true},
		{"**/*.{md,txt}", "a/b.go", false},
	} {
		g, err := compileGlob(c.pat)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.match(c.name); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.pat, c.name, got)
		}
	}
}

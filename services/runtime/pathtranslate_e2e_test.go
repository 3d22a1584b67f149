package runtime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
)

// TestWorkspaceBoundServerPathTranslation runs the real filesystem MCP
// server with working_dir: thread: the catalog starts one child per thread
// in the thread's workspace ("." is its allowed directory), and the runtime
// rewrites the local references of its results — relative, absolute and
// bare names of files the call created — to /mnt/user-data/...; a path
// outside the thread's files is left as the server wrote it.
func TestWorkspaceBoundServerPathTranslation(t *testing.T) {
	fsJS := npmJS(t, "server-filesystem")
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	ext := map[string]any{"mcpServers": map[string]any{
		"fs": map[string]any{"command": "node", "args": []string{fsJS, ".", outside}, "session_scope": "per_thread", "working_dir": "thread"},
	}}
	s := newSuiteWith(t, dir, ext, false, func(c *app.Config) { c.Runtime.ToolSearch.ExemptServers = []string{"fs"} })
	alice := s.rt(aliceToken)
	th := newThread(t, alice, nil)
	userData := filepath.Join(dir, "data", "runtime", "threads", th, "user-data")

	// The first call creates the thread's folders (the catalog refuses a
	// thread it cannot see, the runtime creates them and retries).
	// The very first call: the runtime asked the catalog whether the server
	// is workspace-bound, so a bare name of a file it created is rewritten.
	if got := text(call(t, alice, th, "fs_write_file", map[string]any{"path": "first.txt", "content": "1"})); got != "Successfully wrote to /mnt/user-data/workspace/first.txt" {
		t.Fatalf("first call, bare name: %q", got)
	}
	// A bare name that is not a file the call created (a folder) stays.
	if got := text(call(t, alice, th, "fs_create_directory", map[string]any{"path": "notes"})); got != "Successfully created directory notes" {
		t.Fatalf("bare folder name: %q", got)
	}
	res := call(t, alice, th, "fs_write_file", map[string]any{"path": "notes/report.md", "content": "# Report\n"})
	if got := text(res); got != "Successfully wrote to /mnt/user-data/workspace/notes/report.md" {
		t.Fatalf("relative path: %q (%v)", got, res.GetStatus())
	}
	if b, err := os.ReadFile(filepath.Join(userData, "workspace", "notes", "report.md")); err != nil || string(b) != "# Report\n" {
		t.Fatalf("the server did not write into the thread's workspace: %q, %v", b, err)
	}
	// A bare name the call created (exactly one file of that name changed).
	if got := text(call(t, alice, th, "fs_write_file", map[string]any{"path": "summary.txt", "content": "s"})); got != "Successfully wrote to /mnt/user-data/workspace/summary.txt" {
		t.Fatalf("bare name: %q", got)
	}
	// A relative path in a subfolder.
	if got := text(call(t, alice, th, "fs_write_file", map[string]any{"path": "notes/summary.txt", "content": "again"})); got != "Successfully wrote to /mnt/user-data/workspace/notes/summary.txt" {
		t.Fatalf("second summary: %q", got)
	}
	// An absolute catalog-side path.
	abs := filepath.Join(userData, "workspace", "abs.md")
	if got := text(call(t, alice, th, "fs_write_file", map[string]any{"path": abs, "content": "a"})); got != "Successfully wrote to /mnt/user-data/workspace/abs.md" {
		t.Fatalf("absolute path: %q", got)
	}
	// Outside the thread's files: untouched.
	out := filepath.Join(outside, "x.md")
	if got := text(call(t, alice, th, "fs_write_file", map[string]any{"path": out, "content": "x"})); got != "Successfully wrote to "+out {
		t.Fatalf("outside path: %q", got)
	}
	// The server's allowed directories: the workspace becomes its virtual
	// path, the outside folder stays; no catalog-side path of the thread
	// reaches the model.
	got := text(call(t, alice, th, "fs_list_allowed_directories", map[string]any{}))
	if !strings.Contains(got, "/mnt/user-data/workspace") || !strings.Contains(got, outside) || strings.Contains(got, userData) {
		t.Fatalf("allowed directories: %q", got)
	}
	// The model reads the file it was told about.
	if r := call(t, alice, th, "read_file", map[string]any{"path": "/mnt/user-data/workspace/notes/report.md"}); text(r) != "# Report" && !strings.Contains(text(r), "# Report") {
		t.Fatalf("read_file of the rewritten path = %v", r)
	}
	// Another thread gets its own child in its own workspace.
	th2 := newThread(t, alice, nil)
	if got := text(call(t, alice, th2, "fs_list_directory", map[string]any{"path": "."})); strings.Contains(got, "report.md") {
		t.Fatalf("thread 2 sees thread 1's workspace: %q", got)
	}
	if res := call(t, alice, th2, "fs_read_text_file", map[string]any{"path": "notes/report.md"}); res.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		t.Fatalf("thread 2 read thread 1's file: %v", text(res))
	}
}

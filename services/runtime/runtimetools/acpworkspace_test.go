package runtimetools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestACPWorkspaceIsReadOnlyAndConfined(t *testing.T) {
	f := newSearchFixture(t)
	// Before any ACP agent ran, the folder does not exist.
	if _, err := f.call(t, "file.ls", map[string]any{"path": "/mnt/acp-workspace"}); err == nil || !strings.Contains(err.Error(), "no ACP agent has run") {
		t.Fatalf("ls before any agent: %v", err)
	}
	acp := filepath.Join(filepath.Dir(f.userDir), "acp-workspace")
	if err := os.MkdirAll(filepath.Join(acp, "src"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(acp, "answer.txt"), []byte("one\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.outside, "secret"), filepath.Join(acp, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := f.call(t, "file.ls", map[string]any{"path": "/mnt/acp-workspace/"})
	if err != nil || got != "/mnt/acp-workspace/answer.txt\n/mnt/acp-workspace/link\n/mnt/acp-workspace/src/" {
		t.Fatalf("ls = %q, %v", got, err)
	}
	got, err = f.call(t, "file.read", map[string]any{"path": "/mnt/acp-workspace/answer.txt", "start_line": float64(2)})
	if err != nil || got != "two\n" {
		t.Fatalf("read_file = %q, %v", got, err)
	}
	if _, err := f.call(t, "file.read", map[string]any{"path": "/mnt/acp-workspace/link"}); err == nil {
		t.Fatal("a link out of the ACP workspace was followed")
	}
	if _, err := f.call(t, "file.read", map[string]any{"path": "/mnt/acp-workspace/../../etc/passwd"}); err == nil {
		t.Fatal("/mnt/acp-workspace/../.. escaped")
	}
	// Writes never reach it: write paths are /mnt/user-data/{workspace,outputs}.
	if _, _, err := CleanVirtual("/mnt/acp-workspace/answer.txt", true); err == nil {
		t.Fatal("the ACP workspace is writable")
	}
	if _, _, ok := acpRel("/mnt/acp-workspaceX/a"); ok {
		t.Fatal("a sibling prefix matched")
	}
}

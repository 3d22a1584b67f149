package runtimetools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSavedResultsCountAgainstTheQuota: tool results saved by the output
// budget are thread files like any other; a result that would bring the
// thread over thread_quota_bytes is not saved (the caller tells the model
// it could not be), so repeated large results cannot fill the disk.
func TestSavedResultsCountAgainstTheQuota(t *testing.T) {
	w := NewWorkspace(t.TempDir())
	NewDispatcher(Settings{ThreadQuotaBytes: 10 << 10}, Deps{Workspace: w})
	a, err := w.SaveResult("th", "c1", "big", ".txt", strings.Repeat("a", 6<<10))
	if err != nil {
		t.Fatalf("first result within the quota: %v", err)
	}
	if _, err := w.SaveResult("th", "c2", "big", ".txt", strings.Repeat("b", 6<<10)); err == nil || !strings.Contains(err.Error(), "thread_quota_bytes") {
		t.Fatalf("second result over the quota: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(w.ThreadDir("th"), "user-data", "outputs", ".tool-results", "*"))
	if len(files) != 1 || !strings.HasSuffix(a.GetPath(), filepath.Base(files[0])) {
		t.Fatalf("saved files %v (first %s)", files, a.GetPath())
	}
	// The same result saved again replaces itself: it is not counted twice.
	if _, err := w.SaveResult("th", "c1", "big", ".txt", strings.Repeat("a", 6<<10)); err != nil {
		t.Fatalf("re-saving the same result: %v", err)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Size() != 6<<10 {
		t.Fatalf("%v %v", fi, err)
	}
}

package skillsblob

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSharedGrace: in a shared folder, Delete, GC and the temp cleanup at
// open keep what was written or put within the grace period; a second Put
// renews it; once the period is over they remove it.
func TestSharedGrace(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenShared(dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := s.Put([]byte("in flight"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(d); err != nil || !s.Has(d) {
		t.Fatalf("young blob deleted: %v", err)
	}
	if n, err := s.GC(nil); err != nil || n != 0 || !s.Has(d) {
		t.Fatalf("young blob collected: %d %v", n, err)
	}
	// Another process's temp file, written just now, survives our open.
	tmp := filepath.Join(dir, "tmp", "blob-other")
	if err := os.WriteFile(tmp, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenShared(dir, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("a recent temp file of another process was removed: %v", err)
	}
	// Ninety seconds later a Put renews the blob for another minute.
	s.now = func() time.Time { return time.Now().Add(90 * time.Second) }
	if _, created, err := s.Put([]byte("in flight")); err != nil || created {
		t.Fatalf("renewing put: %v %v", created, err)
	}
	s.now = func() time.Time { return time.Now().Add(120 * time.Second) }
	if n, _ := s.GC(nil); n != 0 || !s.Has(d) {
		t.Fatal("a blob renewed 30 s ago was collected")
	}
	s.now = func() time.Time { return time.Now().Add(200 * time.Second) }
	if n, err := s.GC(nil); err != nil || n != 1 || s.Has(d) {
		t.Fatalf("old blob kept: %d %v", n, err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenShared(dir, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err == nil {
		t.Fatal("an old temp file survived open")
	}
}

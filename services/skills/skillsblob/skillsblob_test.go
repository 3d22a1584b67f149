package skillsblob

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestPutGetDeleteGC(t *testing.T) {
	dir := t.TempDir()
	// A leftover temp file from a crash is removed on open.
	os.MkdirAll(filepath.Join(dir, "tmp"), 0o750)
	os.WriteFile(filepath.Join(dir, "tmp", "blob-123"), []byte("partial"), 0o600)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
		t.Fatalf("temp not cleaned: %v", ents)
	}
	d1, created, err := s.Put([]byte("hello"))
	if err != nil || !created || d1 != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("put: %v %v %s", err, created, d1)
	}
	if _, created, _ := s.Put([]byte("hello")); created {
		t.Fatal("second put reported created")
	}
	got, err := s.Get(d1)
	if err != nil || string(got) != "hello" || !s.Has(d1) {
		t.Fatalf("get: %v %q", err, got)
	}
	d2, _, _ := s.Put([]byte("world"))
	if n, err := s.GC(map[string]bool{d1: true}); err != nil || n != 1 || s.Has(d2) {
		t.Fatalf("gc: %d %v", n, err)
	}
	// Corruption is detected.
	p := s.path(d1)
	os.Chmod(p, 0o640)
	os.WriteFile(p, []byte("tampered"), 0o640)
	if _, err := s.Get(d1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
	if err := s.Delete(d1); err != nil || s.Has(d1) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.Get(d1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := s.Get("../../etc/passwd"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bad digest: %v", err)
	}
}

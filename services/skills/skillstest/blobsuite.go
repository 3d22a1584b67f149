package skillstest

import (
	"errors"
	"slices"
	"testing"

	"github.com/toolplane/toolplane/services/skills/skillsblob"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

// RunBlobSuite runs the conformance suite of skillsstore.Blobs; newBlobs
// returns a fresh, empty store whose GC removes unreferenced blobs at once.
// large is the size of the largest blob the store must hold (the package
// limit); 0 skips that check.
func RunBlobSuite(t *testing.T, newBlobs func(t *testing.T) skillsstore.Blobs, large int) {
	t.Run("PutGetDeleteGC", func(t *testing.T) {
		s := newBlobs(t)
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
		d0, _, err := s.Put(nil)
		if err != nil || !s.Has(d0) {
			t.Fatalf("empty blob: %v", err)
		}
		if b, err := s.Get(d0); err != nil || len(b) != 0 {
			t.Fatalf("empty blob: %q %v", b, err)
		}
		d2, _, _ := s.Put([]byte("world"))
		all, err := s.List()
		if slices.Sort(all); err != nil || !slices.Equal(all, sorted(d0, d1, d2)) {
			t.Fatalf("list: %v %v", all, err)
		}
		if n, err := s.GC(map[string]bool{d1: true}); err != nil || n != 2 || s.Has(d2) || s.Has(d0) || !s.Has(d1) {
			t.Fatalf("gc: %d %v", n, err)
		}
		if err := s.Delete(d1); err != nil || s.Has(d1) {
			t.Fatalf("delete: %v", err)
		}
		if err := s.Delete(d1); err != nil {
			t.Fatalf("delete missing: %v", err)
		}
		if _, err := s.Get(d1); !errors.Is(err, skillsblob.ErrNotFound) {
			t.Fatalf("missing: %v", err)
		}
		if _, err := s.Get("../../etc/passwd"); !errors.Is(err, skillsblob.ErrNotFound) {
			t.Fatalf("bad digest: %v", err)
		}
		if s.Has("nope") {
			t.Fatal("Has(invalid digest)")
		}
	})
	if large > 0 {
		t.Run("PackageLimit", func(t *testing.T) {
			s := newBlobs(t)
			data := make([]byte, large)
			for i := range data {
				data[i] = byte(i * 7)
			}
			d, _, err := s.Put(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(d)
			if err != nil || len(got) != large || skillsblob.Digest(got) != d {
				t.Fatalf("large blob: %d bytes, %v", len(got), err)
			}
		})
	}
}

func sorted(s ...string) []string { slices.Sort(s); return s }

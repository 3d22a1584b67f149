package skillssqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/services/skills/skillsstore"
	"github.com/toolplane/toolplane/services/skills/skillstest"
)

func TestStoreSuite(t *testing.T) {
	skillstest.RunStoreSuite(t, func(t *testing.T) skillsstore.Store {
		s, err := Open(filepath.Join(t.TempDir(), "skills.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skills.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Create(ctx, skillsstore.Integration, "acme", "pack", skillsstore.Content{Digest: "d", Files: []skillsstore.FileRef{{Path: "SKILL.md", Digest: "x"}}},
		skillsstore.HistoryEntry{Action: "install", Author: "a"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if sk, err := s.Get(ctx, skillsstore.Integration, "acme", "pack"); err != nil || sk.Digest != "d" {
		t.Fatalf("%v %+v", err, sk)
	}
}

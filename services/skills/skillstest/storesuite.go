// Package skillstest holds the conformance suite every skillsstore.Store
// implementation passes (docs/conventions.md §6 habit 7).
package skillstest

import (
	"context"
	"errors"
	"testing"

	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

func content(digest string, paths ...string) skillsstore.Content {
	c := skillsstore.Content{Digest: digest}
	for i, p := range paths {
		c.Files = append(c.Files, skillsstore.FileRef{Path: p, Digest: digest[:2] + string(rune('a'+i)), Size: int64(i + 1)})
	}
	return c
}

// RunStoreSuite runs the conformance suite; newStore returns a fresh, empty store.
func RunStoreSuite(t *testing.T, newStore func(t *testing.T) skillsstore.Store) {
	ctx := context.Background()
	ev := func(action string) skillsstore.HistoryEntry {
		return skillsstore.HistoryEntry{Action: action, Author: "default/alice", ScanDecision: "clean", Counts: map[string]int{"LOW": 1}}
	}

	t.Run("CreateGetListScopes", func(t *testing.T) {
		s := newStore(t)
		pub, err := s.Create(ctx, skillsstore.Public, "", "web", content("d1", "SKILL.md"), ev("install"))
		if err != nil || pub.Version != 1 || pub.Digest != "d1" || len(pub.Files) != 1 {
			t.Fatalf("create: %v %+v", err, pub)
		}
		if _, err := s.Create(ctx, skillsstore.Public, "", "web", content("d2", "SKILL.md"), ev("install")); !errors.Is(err, skillsstore.ErrAlreadyExists) {
			t.Fatalf("duplicate: %v", err)
		}
		if _, err := s.Create(ctx, skillsstore.Custom, "default/alice", "web", content("d3", "SKILL.md", "a.py"), ev("install")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, skillsstore.Custom, "default/bob", "web", content("d4", "SKILL.md"), ev("install")); err != nil {
			t.Fatalf("same name other owner: %v", err)
		}
		if _, err := s.Create(ctx, skillsstore.Integration, "acme", "pack", content("d5", "SKILL.md"), ev("install")); err != nil {
			t.Fatal(err)
		}
		list, err := s.List(ctx, "default/alice", "default")
		if err != nil || len(list) != 2 || list[0].Category != skillsstore.Custom || list[1].Category != skillsstore.Public {
			t.Fatalf("list: %v %+v", err, list)
		}
		list, _ = s.List(ctx, "acme/carol", "acme")
		if len(list) != 2 || list[0].Name != "pack" || list[1].Name != "web" || list[1].Category != skillsstore.Public {
			t.Fatalf("tenant list: %+v", list)
		}
		if all, _ := s.ListCategory(ctx, skillsstore.Custom); len(all) != 2 {
			t.Fatalf("list category: %+v", all)
		}
		got, err := s.Get(ctx, skillsstore.Custom, "default/alice", "web")
		if err != nil || got.Digest != "d3" || len(got.Files) != 2 || got.Files[0].Path != "SKILL.md" {
			t.Fatalf("get: %v %+v", err, got)
		}
		if _, err := s.Get(ctx, skillsstore.Custom, "default/carol", "web"); !errors.Is(err, skillsstore.ErrNotFound) {
			t.Fatalf("get missing: %v", err)
		}
	})

	t.Run("VersionsHistoryDelete", func(t *testing.T) {
		s := newStore(t)
		sk, _ := s.Create(ctx, skillsstore.Custom, "u", "x", content("v1", "SKILL.md"), ev("install"))
		sk2, err := s.AddVersion(ctx, sk.ID, content("v2", "SKILL.md", "b"), ev("edit"))
		if err != nil || sk2.Version != 2 || sk2.Digest != "v2" {
			t.Fatalf("add: %v %+v", err, sk2)
		}
		if err := s.Record(ctx, sk.ID, skillsstore.HistoryEntry{Version: 1, Action: "rollback_refused", Author: "u", Digest: "v1", ScanDecision: "blocked"}); err != nil {
			t.Fatal(err)
		}
		c1, err := s.Version(ctx, sk.ID, 1)
		if err != nil || c1.Digest != "v1" || len(c1.Files) != 1 {
			t.Fatalf("version: %v %+v", err, c1)
		}
		if _, err := s.Version(ctx, sk.ID, 9); !errors.Is(err, skillsstore.ErrNotFound) {
			t.Fatalf("missing version: %v", err)
		}
		h, err := s.History(ctx, sk.ID)
		if err != nil || len(h) != 3 || h[0].Action != "rollback_refused" || h[1].Action != "edit" || h[1].Version != 2 || h[2].Counts["LOW"] != 1 {
			t.Fatalf("history: %v %+v", err, h)
		}
		refs, _ := s.ReferencedDigests(ctx)
		if len(refs) != 3 || !refs["v1a"] || !refs["v2b"] {
			t.Fatalf("refs: %v", refs)
		}
		if err := s.Delete(ctx, sk.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, sk.ID); !errors.Is(err, skillsstore.ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		if _, err := s.AddVersion(ctx, sk.ID, content("v3", "SKILL.md"), ev("edit")); !errors.Is(err, skillsstore.ErrNotFound) {
			t.Fatalf("add to deleted: %v", err)
		}
		if h, _ := s.History(ctx, sk.ID); len(h) != 0 {
			t.Fatalf("history survived delete: %+v", h)
		}
	})

	t.Run("EnableStatesIndependent", func(t *testing.T) {
		s := newStore(t)
		a, _ := s.Create(ctx, skillsstore.Custom, "default/alice", "x", content("a1", "SKILL.md"), ev("install"))
		b, _ := s.Create(ctx, skillsstore.Custom, "default/bob", "x", content("b1", "SKILL.md"), ev("install"))
		if err := s.SetEnabled(ctx, a.ID, "default/alice", false, ev("disable")); err != nil {
			t.Fatal(err)
		}
		sa, _ := s.EnableStates(ctx, "default/alice")
		sb, _ := s.EnableStates(ctx, "default/bob")
		if en, ok := sa[a.ID]; !ok || en {
			t.Fatalf("alice: %v", sa)
		}
		if _, ok := sb[b.ID]; ok {
			t.Fatalf("bob affected: %v", sb)
		}
		if err := s.SetEnabled(ctx, a.ID, "default/alice", true, ev("enable")); err != nil {
			t.Fatal(err)
		}
		sa, _ = s.EnableStates(ctx, "default/alice")
		if !sa[a.ID] {
			t.Fatalf("re-enable: %v", sa)
		}
		if err := s.SetEnabled(ctx, 9999, "", false, ev("disable")); !errors.Is(err, skillsstore.ErrNotFound) {
			t.Fatalf("unknown skill: %v", err)
		}
	})
}

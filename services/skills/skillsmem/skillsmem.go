// Package skillsmem is an in-memory skillsstore.Store for tests and
// ephemeral runs. It passes the same conformance suite as skillssqlite
// (skillstest.RunStoreSuite).
package skillsmem

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

type version struct {
	c  skillsstore.Content
	at time.Time
}

type skill struct {
	sk       skillsstore.Skill
	versions map[int]version
	history  []skillsstore.HistoryEntry
	enabled  map[string]bool
}

// Store is the in-memory store.
type Store struct {
	mu     sync.Mutex
	nextID int64
	skills map[int64]*skill
}

var _ skillsstore.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store { return &Store{skills: map[int64]*skill{}} }

func clone(sk skillsstore.Skill) skillsstore.Skill {
	sk.Files = slices.Clone(sk.Files)
	return sk
}

func sortedFiles(fs []skillsstore.FileRef) []skillsstore.FileRef {
	out := slices.Clone(fs)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func (s *Store) filter(keep func(skillsstore.Skill) bool) []skillsstore.Skill {
	var out []skillsstore.Skill
	for _, k := range s.skills {
		if keep(k.sk) {
			out = append(out, clone(k.sk))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		if out[i].Category != out[j].Category {
			return out[i].Category < out[j].Category
		}
		return out[i].Owner < out[j].Owner
	})
	return out
}

// List implements skillsstore.Store.
func (s *Store) List(_ context.Context, owner, tenant string) ([]skillsstore.Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.filter(func(sk skillsstore.Skill) bool {
		return sk.Category == skillsstore.Public || (sk.Category == skillsstore.Integration && sk.Owner == tenant) ||
			(sk.Category == skillsstore.Custom && sk.Owner == owner)
	}), nil
}

// ListCategory implements skillsstore.Store.
func (s *Store) ListCategory(_ context.Context, cat skillsstore.Category) ([]skillsstore.Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.filter(func(sk skillsstore.Skill) bool { return sk.Category == cat }), nil
}

func (s *Store) find(cat skillsstore.Category, owner, name string) *skill {
	for _, k := range s.skills {
		if k.sk.Category == cat && k.sk.Owner == owner && k.sk.Name == name {
			return k
		}
	}
	return nil
}

// Get implements skillsstore.Store.
func (s *Store) Get(_ context.Context, cat skillsstore.Category, owner, name string) (skillsstore.Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.find(cat, owner, name); k != nil {
		return clone(k.sk), nil
	}
	return skillsstore.Skill{}, skillsstore.ErrNotFound
}

func record(k *skill, ev skillsstore.HistoryEntry, now time.Time) {
	if ev.Time.IsZero() {
		ev.Time = now
	}
	if ev.Counts == nil {
		ev.Counts = map[string]int{}
	}
	k.history = append(k.history, ev)
}

// Create implements skillsstore.Store.
func (s *Store) Create(_ context.Context, cat skillsstore.Category, owner, name string, c skillsstore.Content, ev skillsstore.HistoryEntry) (skillsstore.Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.find(cat, owner, name) != nil {
		return skillsstore.Skill{}, skillsstore.ErrAlreadyExists
	}
	now := time.Now().UTC()
	s.nextID++
	c.Files = sortedFiles(c.Files)
	k := &skill{sk: skillsstore.Skill{ID: s.nextID, Category: cat, Owner: owner, Name: name, Version: 1, Digest: c.Digest,
		Files: c.Files, CreatedAt: now, UpdatedAt: now}, versions: map[int]version{1: {c: c, at: now}}, enabled: map[string]bool{}}
	ev.Version, ev.Digest = 1, c.Digest
	record(k, ev, now)
	s.skills[k.sk.ID] = k
	return clone(k.sk), nil
}

// AddVersion implements skillsstore.Store.
func (s *Store) AddVersion(_ context.Context, id int64, c skillsstore.Content, ev skillsstore.HistoryEntry) (skillsstore.Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.skills[id]
	if k == nil {
		return skillsstore.Skill{}, skillsstore.ErrNotFound
	}
	now := time.Now().UTC()
	next := len(k.versions) + 1
	c.Files = sortedFiles(c.Files)
	k.versions[next] = version{c: c, at: now}
	k.sk.Version, k.sk.Digest, k.sk.Files, k.sk.UpdatedAt = next, c.Digest, c.Files, now
	ev.Version, ev.Digest = next, c.Digest
	record(k, ev, now)
	return clone(k.sk), nil
}

// Version implements skillsstore.Store.
func (s *Store) Version(_ context.Context, id int64, v int) (skillsstore.Content, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.skills[id]; k != nil {
		if ver, ok := k.versions[v]; ok {
			c := ver.c
			c.Files = slices.Clone(c.Files)
			return c, nil
		}
	}
	return skillsstore.Content{}, skillsstore.ErrNotFound
}

// Record implements skillsstore.Store.
func (s *Store) Record(_ context.Context, id int64, ev skillsstore.HistoryEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.skills[id]
	if k == nil {
		return skillsstore.ErrNotFound
	}
	record(k, ev, time.Now().UTC())
	return nil
}

// History implements skillsstore.Store.
func (s *Store) History(_ context.Context, id int64) ([]skillsstore.HistoryEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.skills[id]
	if k == nil {
		return nil, nil
	}
	out := slices.Clone(k.history)
	slices.Reverse(out)
	return out, nil
}

// Delete implements skillsstore.Store.
func (s *Store) Delete(_ context.Context, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skills[id] == nil {
		return skillsstore.ErrNotFound
	}
	delete(s.skills, id)
	return nil
}

// EnableStates implements skillsstore.Store.
func (s *Store) EnableStates(_ context.Context, userKey string) (map[int64]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64]bool{}
	for id, k := range s.skills {
		if v, ok := k.enabled[userKey]; ok {
			out[id] = v
		}
	}
	return out, nil
}

// SetEnabled implements skillsstore.Store.
func (s *Store) SetEnabled(_ context.Context, id int64, userKey string, enabled bool, ev skillsstore.HistoryEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.skills[id]
	if k == nil {
		return skillsstore.ErrNotFound
	}
	k.enabled[userKey] = enabled
	record(k, ev, time.Now().UTC())
	return nil
}

// ReferencedDigests implements skillsstore.Store.
func (s *Store) ReferencedDigests(context.Context) (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for _, k := range s.skills {
		for _, v := range k.versions {
			for _, f := range v.c.Files {
				out[f.Digest] = true
			}
		}
	}
	return out, nil
}

// Ping implements skillsstore.Store.
func (s *Store) Ping(context.Context) error { return nil }

// Close implements skillsstore.Store.
func (s *Store) Close() error { return nil }

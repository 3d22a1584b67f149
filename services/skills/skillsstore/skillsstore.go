// Package skillsstore defines the storage seam of the skills service: skill
// metadata, content versions (file manifests pointing into the blob store),
// the edit history and enable state (docs/architecture.md §6, docs/conventions.md §3). File bytes
// live in skillsblob; this interface keeps only digests.
package skillsstore

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors every implementation returns.
var (
	// ErrNotFound: no such skill or version.
	ErrNotFound = errors.New("skillsstore: not found")
	// ErrAlreadyExists: a skill with that (category, owner, name) exists.
	ErrAlreadyExists = errors.New("skillsstore: already exists")
)

// Category of a stored skill (docs/deerflow.md §4.1).
type Category string

// Categories.
const (
	Public      Category = "public"
	Integration Category = "integration"
	Custom      Category = "custom"
)

// FileRef is one file of a content version.
type FileRef struct {
	// Path relative to the skill root ("SKILL.md", "scripts/run.py").
	Path string `json:"path"`
	// Digest is the hex SHA-256 of the bytes (the blob name).
	Digest string `json:"digest"`
	// Size in bytes.
	Size int64 `json:"size"`
	// Executable mirrors the archive's executable bit.
	Executable bool `json:"executable,omitempty"`
}

// Skill is one stored skill with its current content version.
type Skill struct {
	ID       int64
	Category Category
	// Owner is the owning user key ("tenant/subject") of a custom skill, the
	// tenant of an integration skill, "" for public skills.
	Owner string
	Name  string
	// Version is the current content version (1-based).
	Version int
	// Digest is the package digest of the current version.
	Digest string
	// Files is the current manifest, sorted by path.
	Files     []FileRef
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Content is a new content version.
type Content struct {
	Files  []FileRef
	Digest string
}

// HistoryEntry is one recorded event of a skill.
type HistoryEntry struct {
	// Version is the content version the event produced or concerned.
	Version int
	// Action: install, edit, rollback, rollback_refused, enable,
	// enable_refused, disable, upgrade (public skills re-shipped); from
	// ManageSkill also create, patch, write_file, remove_file and
	// manage_refused (a change the scan blocked).
	Action string
	// Author is the user key of whoever acted ("system" for shipped skills,
	// "agent" for a ManageSkill change made by an agent's tool call).
	Author string
	Time   time.Time
	// Digest is the package digest concerned.
	Digest string
	// ScanDecision is "clean", "findings" or "blocked".
	ScanDecision string
	// Counts are findings per severity name.
	Counts map[string]int
	// ThreadID is the agent thread a ManageSkill change came from ("" otherwise).
	ThreadID string
	// FilePath is the file a ManageSkill change concerned ("" = the whole skill).
	FilePath string
}

// Store is the skills metadata store. Implementations are safe for concurrent use.
type Store interface {
	// List returns the public skills, the integration skills of tenant and
	// the custom skills owned by owner, sorted by (name, category).
	List(ctx context.Context, owner, tenant string) ([]Skill, error)
	// ListCategory returns every stored skill of one category (all owners).
	ListCategory(ctx context.Context, cat Category) ([]Skill, error)
	// Get returns one skill; ErrNotFound when missing.
	Get(ctx context.Context, cat Category, owner, name string) (Skill, error)
	// Create stores a new skill with content version 1 and records ev (its
	// Version is set to 1). ErrAlreadyExists when (cat, owner, name) exists.
	Create(ctx context.Context, cat Category, owner, name string, c Content, ev HistoryEntry) (Skill, error)
	// AddVersion stores c as the next content version, makes it current and
	// records ev (its Version is set to the new number). ErrNotFound when the
	// skill is gone.
	AddVersion(ctx context.Context, id int64, c Content, ev HistoryEntry) (Skill, error)
	// Version returns a stored content version; ErrNotFound when missing.
	Version(ctx context.Context, id int64, version int) (Content, error)
	// Record appends a history event that does not change content.
	Record(ctx context.Context, id int64, ev HistoryEntry) error
	// History returns the events of a skill, newest first.
	History(ctx context.Context, id int64) ([]HistoryEntry, error)
	// Delete removes a skill with its versions, history and enable state.
	Delete(ctx context.Context, id int64) error
	// EnableStates returns the explicit enable states stored for userKey
	// (and, with userKey "", the global ones), keyed by skill id. Absent = enabled.
	EnableStates(ctx context.Context, userKey string) (map[int64]bool, error)
	// SetEnabled stores the enable state of a skill for userKey ("" = global)
	// and records ev in the same transaction.
	SetEnabled(ctx context.Context, id int64, userKey string, enabled bool, ev HistoryEntry) error
	// ReferencedDigests returns every blob digest any stored version uses.
	ReferencedDigests(ctx context.Context) (map[string]bool, error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// Blobs is the content-addressed file store: every skill file stored once,
// named by the hex SHA-256 of its bytes. skillsblob keeps them in a folder
// (the default), skillspg in PostgreSQL bytea. Get verifies the digest.
// Implementations are safe for concurrent use; the conformance suite is
// skillstest.RunBlobSuite.
type Blobs interface {
	// Put stores data and returns its digest; created is false when the
	// blob already existed.
	Put(data []byte) (digest string, created bool, err error)
	// Get returns the blob's bytes, verified against the digest; errors wrap
	// skillsblob.ErrNotFound or skillsblob.ErrCorrupt.
	Get(digest string) ([]byte, error)
	// Has reports whether the blob exists.
	Has(digest string) bool
	// Delete removes a blob; deleting a missing blob is not an error.
	Delete(digest string) error
	// List returns every stored digest (unordered).
	List() ([]string, error)
	// GC deletes the blobs not in keep and returns how many it removed.
	GC(keep map[string]bool) (int, error)
}

// Exclusive is implemented by a store that several processes share
// (skillspg): WithLock runs fn while no other process on the store runs a
// WithLock of the same name (a PostgreSQL advisory lock). A store of one
// process need not implement it; in-process locks serialise there.
type Exclusive interface {
	WithLock(ctx context.Context, name string, fn func(ctx context.Context) error) error
}

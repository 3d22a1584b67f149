// Package skillssqlite implements skillsstore.Store on sqlite (modernc,
// through internal/sqlitex: WAL, busy timeout, immediate transactions,
// embedded migrations).
package skillssqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/toolplane/toolplane/internal/sqlitex"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the sqlite skills store.
type Store struct {
	db  *sqlitex.DB
	now func() time.Time
}

var _ skillsstore.Store = (*Store)(nil)

// Open opens (creating and migrating) the store at path.
func Open(path string) (*Store, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	db, err := sqlitex.Open(path, sub)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, now: time.Now}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

const skillCols = `s.id, s.category, s.owner, s.name, s.version, s.created_at, s.updated_at, v.digest, v.manifest`
const skillFrom = ` FROM skills s JOIN skill_versions v ON v.skill_id = s.id AND v.version = s.version`

type scanner interface{ Scan(...any) error }

func scanSkill(r scanner) (skillsstore.Skill, error) {
	var sk skillsstore.Skill
	var cat, manifest string
	var created, updated int64
	if err := r.Scan(&sk.ID, &cat, &sk.Owner, &sk.Name, &sk.Version, &created, &updated, &sk.Digest, &manifest); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return sk, skillsstore.ErrNotFound
		}
		return sk, err
	}
	sk.Category = skillsstore.Category(cat)
	sk.CreatedAt, sk.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	if err := json.Unmarshal([]byte(manifest), &sk.Files); err != nil {
		return sk, fmt.Errorf("skillssqlite: manifest of skill %d: %w", sk.ID, err)
	}
	return sk, nil
}

// List implements skillsstore.Store.
func (s *Store) List(ctx context.Context, owner, tenant string) ([]skillsstore.Skill, error) {
	return s.list(ctx, `SELECT `+skillCols+skillFrom+
		` WHERE s.category = 'public' OR (s.category = 'integration' AND s.owner = ?) OR (s.category = 'custom' AND s.owner = ?)
		ORDER BY s.name, s.category`, tenant, owner)
}

// ListCategory implements skillsstore.Store.
func (s *Store) ListCategory(ctx context.Context, cat skillsstore.Category) ([]skillsstore.Skill, error) {
	return s.list(ctx, `SELECT `+skillCols+skillFrom+` WHERE s.category = ? ORDER BY s.name, s.owner`, string(cat))
}

func (s *Store) list(ctx context.Context, query string, args ...any) ([]skillsstore.Skill, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []skillsstore.Skill
	for rows.Next() {
		sk, err := scanSkill(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sk)
	}
	return out, rows.Err()
}

// Get implements skillsstore.Store.
func (s *Store) Get(ctx context.Context, cat skillsstore.Category, owner, name string) (skillsstore.Skill, error) {
	return scanSkill(s.db.QueryRowContext(ctx, `SELECT `+skillCols+skillFrom+
		` WHERE s.category = ? AND s.owner = ? AND s.name = ?`, string(cat), owner, name))
}

func getByID(ctx context.Context, tx *sql.Tx, id int64) (skillsstore.Skill, error) {
	return scanSkill(tx.QueryRowContext(ctx, `SELECT `+skillCols+skillFrom+` WHERE s.id = ?`, id))
}

func sortedManifest(files []skillsstore.FileRef) (string, error) {
	fs := append([]skillsstore.FileRef(nil), files...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	b, err := json.Marshal(fs)
	return string(b), err
}

func record(ctx context.Context, tx *sql.Tx, id int64, ev skillsstore.HistoryEntry, now time.Time) error {
	if ev.Time.IsZero() {
		ev.Time = now
	}
	counts, err := json.Marshal(ev.Counts)
	if err != nil {
		return err
	}
	if ev.Counts == nil {
		counts = []byte("{}")
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO skill_history (skill_id, version, action, author, at, digest, scan_decision, counts, thread_id, file_path)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, ev.Version, ev.Action, ev.Author, ev.Time.UnixNano(), ev.Digest, ev.ScanDecision, string(counts), ev.ThreadID, ev.FilePath)
	return err
}

// Create implements skillsstore.Store.
func (s *Store) Create(ctx context.Context, cat skillsstore.Category, owner, name string, c skillsstore.Content, ev skillsstore.HistoryEntry) (skillsstore.Skill, error) {
	manifest, err := sortedManifest(c.Files)
	if err != nil {
		return skillsstore.Skill{}, err
	}
	var out skillsstore.Skill
	err = s.db.WithTx(ctx, func(tx *sql.Tx) error {
		now := s.now().UnixNano()
		res, err := tx.ExecContext(ctx, `INSERT INTO skills (category, owner, name, version, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?)`,
			string(cat), owner, name, now, now)
		if err != nil {
			if sqlitex.IsConstraint(err) {
				return skillsstore.ErrAlreadyExists
			}
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO skill_versions (skill_id, version, digest, manifest, created_at) VALUES (?, 1, ?, ?, ?)`,
			id, c.Digest, manifest, now); err != nil {
			return err
		}
		ev.Version, ev.Digest = 1, c.Digest
		if err := record(ctx, tx, id, ev, time.Unix(0, now)); err != nil {
			return err
		}
		out, err = getByID(ctx, tx, id)
		return err
	})
	return out, err
}

// AddVersion implements skillsstore.Store.
func (s *Store) AddVersion(ctx context.Context, id int64, c skillsstore.Content, ev skillsstore.HistoryEntry) (skillsstore.Skill, error) {
	manifest, err := sortedManifest(c.Files)
	if err != nil {
		return skillsstore.Skill{}, err
	}
	var out skillsstore.Skill
	err = s.db.WithTx(ctx, func(tx *sql.Tx) error {
		var maxV int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM skill_versions WHERE skill_id = ?`, id).Scan(&maxV); err != nil {
			return err
		}
		if maxV == 0 {
			return skillsstore.ErrNotFound
		}
		now := s.now().UnixNano()
		next := maxV + 1
		if _, err := tx.ExecContext(ctx, `INSERT INTO skill_versions (skill_id, version, digest, manifest, created_at) VALUES (?, ?, ?, ?, ?)`,
			id, next, c.Digest, manifest, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE skills SET version = ?, updated_at = ? WHERE id = ?`, next, now, id); err != nil {
			return err
		}
		ev.Version, ev.Digest = next, c.Digest
		if err := record(ctx, tx, id, ev, time.Unix(0, now)); err != nil {
			return err
		}
		out, err = getByID(ctx, tx, id)
		return err
	})
	return out, err
}

// Version implements skillsstore.Store.
func (s *Store) Version(ctx context.Context, id int64, version int) (skillsstore.Content, error) {
	var c skillsstore.Content
	var manifest string
	err := s.db.QueryRowContext(ctx, `SELECT digest, manifest FROM skill_versions WHERE skill_id = ? AND version = ?`, id, version).Scan(&c.Digest, &manifest)
	if errors.Is(err, sql.ErrNoRows) {
		return c, skillsstore.ErrNotFound
	}
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal([]byte(manifest), &c.Files)
}

// Record implements skillsstore.Store.
func (s *Store) Record(ctx context.Context, id int64, ev skillsstore.HistoryEntry) error {
	return s.db.WithTx(ctx, func(tx *sql.Tx) error { return record(ctx, tx, id, ev, s.now()) })
}

// History implements skillsstore.Store.
func (s *Store) History(ctx context.Context, id int64) ([]skillsstore.HistoryEntry, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT version, action, author, at, digest, scan_decision, counts, thread_id, file_path FROM skill_history WHERE skill_id = ? ORDER BY id DESC`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []skillsstore.HistoryEntry
	for rows.Next() {
		var ev skillsstore.HistoryEntry
		var at int64
		var counts string
		if err := rows.Scan(&ev.Version, &ev.Action, &ev.Author, &at, &ev.Digest, &ev.ScanDecision, &counts, &ev.ThreadID, &ev.FilePath); err != nil {
			return nil, err
		}
		ev.Time = time.Unix(0, at).UTC()
		if err := json.Unmarshal([]byte(counts), &ev.Counts); err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// Delete implements skillsstore.Store.
func (s *Store) Delete(ctx context.Context, id int64) error {
	return s.db.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM skills WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return skillsstore.ErrNotFound
		}
		return nil
	})
}

// EnableStates implements skillsstore.Store.
func (s *Store) EnableStates(ctx context.Context, userKey string) (map[int64]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT skill_id, enabled FROM skill_enabled WHERE user_key = ?`, userKey)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var id int64
		var en bool
		if err := rows.Scan(&id, &en); err != nil {
			return nil, err
		}
		out[id] = en
	}
	return out, rows.Err()
}

// SetEnabled implements skillsstore.Store.
func (s *Store) SetEnabled(ctx context.Context, id int64, userKey string, enabled bool, ev skillsstore.HistoryEntry) error {
	return s.db.WithTx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO skill_enabled (skill_id, user_key, enabled, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (skill_id, user_key) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at`,
			id, userKey, enabled, now.UnixNano()); err != nil {
			if sqlitex.IsConstraint(err) {
				return skillsstore.ErrNotFound // foreign key: skill gone
			}
			return err
		}
		return record(ctx, tx, id, ev, now)
	})
}

// ReferencedDigests implements skillsstore.Store.
func (s *Store) ReferencedDigests(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT manifest FROM skill_versions`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var manifest string
		if err := rows.Scan(&manifest); err != nil {
			return nil, err
		}
		var files []skillsstore.FileRef
		if err := json.Unmarshal([]byte(manifest), &files); err != nil {
			return nil, err
		}
		for _, f := range files {
			out[f.Digest] = true
		}
	}
	return out, rows.Err()
}

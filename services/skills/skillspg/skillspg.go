// Package skillspg is the skills service's PostgreSQL store (pgx/v5,
// pgxpool) in the schema "skills" of the storage.dsn database: skill
// metadata, content versions, history and enable states (Store, which
// implements skillsstore.Store and passes skillstest.RunStoreSuite like
// skillssqlite), and the file bytes as content-addressed bytea rows (Blobs,
// skillsstore.Blobs, passing skillstest.RunBlobSuite like skillsblob).
// Migrations are embedded and applied at Open under the schema's advisory
// lock (internal/pgstore; docs/decisions/0080-postgresql-stores.md).
package skillspg

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

// Schema is the PostgreSQL schema of the skills tables.
const Schema = "skills"

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Migrations returns the embedded goose migrations.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationsFS, "migrations")
	if err != nil {
		panic(err)
	}
	return sub
}

// Store is the PostgreSQL skills metadata store.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

var (
	_ skillsstore.Store     = (*Store)(nil)
	_ skillsstore.Exclusive = (*Store)(nil)
)

// WithLock implements skillsstore.Exclusive with the advisory lock of
// "skills.<name>".
func (s *Store) WithLock(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	return pgstore.WithLock(ctx, s.pool, "skills."+name, fn)
}

// Open migrates the skills schema (creating it when missing) and returns
// the store over pool. The pool stays the caller's: Close does not close it.
func Open(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if err := pgstore.Migrate(ctx, pool, Schema, Migrations()); err != nil {
		return nil, err
	}
	return &Store{pool: pool, now: time.Now}, nil
}

// Close implements skillsstore.Store; the pool is not closed.
func (s *Store) Close() error { return nil }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

const skillCols = `s.id, s.category, s.owner, s.name, s.version, s.created_at, s.updated_at, v.digest, v.manifest`
const skillFrom = ` FROM skills.skills s JOIN skills.skill_versions v ON v.skill_id = s.id AND v.version = s.version`

func scanSkill(r pgx.Row) (skillsstore.Skill, error) {
	var sk skillsstore.Skill
	var cat string
	var manifest []byte
	var created, updated int64
	if err := r.Scan(&sk.ID, &cat, &sk.Owner, &sk.Name, &sk.Version, &created, &updated, &sk.Digest, &manifest); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return sk, skillsstore.ErrNotFound
		}
		return sk, err
	}
	sk.Category = skillsstore.Category(cat)
	sk.CreatedAt, sk.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	if err := json.Unmarshal(manifest, &sk.Files); err != nil {
		return sk, fmt.Errorf("skillspg: manifest of skill %d: %w", sk.ID, err)
	}
	return sk, nil
}

// List implements skillsstore.Store.
func (s *Store) List(ctx context.Context, owner, tenant string) ([]skillsstore.Skill, error) {
	return s.list(ctx, `SELECT `+skillCols+skillFrom+
		` WHERE s.category = 'public' OR (s.category = 'integration' AND s.owner = $1) OR (s.category = 'custom' AND s.owner = $2)
		ORDER BY s.name COLLATE "C", s.category COLLATE "C"`, tenant, owner)
}

// ListCategory implements skillsstore.Store.
func (s *Store) ListCategory(ctx context.Context, cat skillsstore.Category) ([]skillsstore.Skill, error) {
	return s.list(ctx, `SELECT `+skillCols+skillFrom+` WHERE s.category = $1 ORDER BY s.name COLLATE "C", s.owner COLLATE "C"`, string(cat))
}

func (s *Store) list(ctx context.Context, query string, args ...any) ([]skillsstore.Skill, error) {
	rows, err := s.pool.Query(ctx, query, args...)
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
	return scanSkill(s.pool.QueryRow(ctx, `SELECT `+skillCols+skillFrom+
		` WHERE s.category = $1 AND s.owner = $2 AND s.name = $3`, string(cat), owner, name))
}

func getByID(ctx context.Context, tx pgx.Tx, id int64) (skillsstore.Skill, error) {
	return scanSkill(tx.QueryRow(ctx, `SELECT `+skillCols+skillFrom+` WHERE s.id = $1`, id))
}

func sortedManifest(files []skillsstore.FileRef) (string, error) {
	fs := append([]skillsstore.FileRef(nil), files...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	if fs == nil {
		fs = []skillsstore.FileRef{}
	}
	b, err := json.Marshal(fs)
	return string(b), err
}

func record(ctx context.Context, tx pgx.Tx, id int64, ev skillsstore.HistoryEntry, now time.Time) error {
	if ev.Time.IsZero() {
		ev.Time = now
	}
	counts := []byte("{}")
	if ev.Counts != nil {
		var err error
		if counts, err = json.Marshal(ev.Counts); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO skills.skill_history (skill_id, version, action, author, at, digest, scan_decision, counts, thread_id, file_path)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10)`, id, ev.Version, ev.Action, ev.Author, ev.Time.UnixNano(), ev.Digest, ev.ScanDecision, string(counts), ev.ThreadID, ev.FilePath)
	if pgstore.IsForeignKeyViolation(err) {
		return skillsstore.ErrNotFound
	}
	return err
}

// Create implements skillsstore.Store.
func (s *Store) Create(ctx context.Context, cat skillsstore.Category, owner, name string, c skillsstore.Content, ev skillsstore.HistoryEntry) (skillsstore.Skill, error) {
	manifest, err := sortedManifest(c.Files)
	if err != nil {
		return skillsstore.Skill{}, err
	}
	var out skillsstore.Skill
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now().UnixNano()
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO skills.skills (category, owner, name, version, created_at, updated_at) VALUES ($1, $2, $3, 1, $4, $4) RETURNING id`,
			string(cat), owner, name, now).Scan(&id)
		if pgstore.IsUniqueViolation(err) {
			return skillsstore.ErrAlreadyExists
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO skills.skill_versions (skill_id, version, digest, manifest, created_at) VALUES ($1, 1, $2, $3::jsonb, $4)`,
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

// AddVersion implements skillsstore.Store. The skill's row is locked first,
// so concurrent versions of one skill (from any replica) get consecutive
// numbers.
func (s *Store) AddVersion(ctx context.Context, id int64, c skillsstore.Content, ev skillsstore.HistoryEntry) (skillsstore.Skill, error) {
	manifest, err := sortedManifest(c.Files)
	if err != nil {
		return skillsstore.Skill{}, err
	}
	var out skillsstore.Skill
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM skills.skills WHERE id = $1 FOR UPDATE`, id).Scan(&one); errors.Is(err, pgx.ErrNoRows) {
			return skillsstore.ErrNotFound
		} else if err != nil {
			return err
		}
		var maxV int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM skills.skill_versions WHERE skill_id = $1`, id).Scan(&maxV); err != nil {
			return err
		}
		now := s.now().UnixNano()
		next := maxV + 1
		if _, err := tx.Exec(ctx, `INSERT INTO skills.skill_versions (skill_id, version, digest, manifest, created_at) VALUES ($1, $2, $3, $4::jsonb, $5)`,
			id, next, c.Digest, manifest, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE skills.skills SET version = $1, updated_at = $2 WHERE id = $3`, next, now, id); err != nil {
			return err
		}
		ev.Version, ev.Digest = next, c.Digest
		if err := record(ctx, tx, id, ev, time.Unix(0, now)); err != nil {
			return err
		}
		var err error
		out, err = getByID(ctx, tx, id)
		return err
	})
	return out, err
}

// Version implements skillsstore.Store.
func (s *Store) Version(ctx context.Context, id int64, version int) (skillsstore.Content, error) {
	var c skillsstore.Content
	var manifest []byte
	err := s.pool.QueryRow(ctx, `SELECT digest, manifest FROM skills.skill_versions WHERE skill_id = $1 AND version = $2`, id, version).Scan(&c.Digest, &manifest)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, skillsstore.ErrNotFound
	}
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(manifest, &c.Files)
}

// Record implements skillsstore.Store.
func (s *Store) Record(ctx context.Context, id int64, ev skillsstore.HistoryEntry) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return record(ctx, tx, id, ev, s.now()) })
}

// History implements skillsstore.Store.
func (s *Store) History(ctx context.Context, id int64) ([]skillsstore.HistoryEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT version, action, author, at, digest, scan_decision, counts, thread_id, file_path FROM skills.skill_history WHERE skill_id = $1 ORDER BY id DESC`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []skillsstore.HistoryEntry
	for rows.Next() {
		var ev skillsstore.HistoryEntry
		var at int64
		var counts []byte
		if err := rows.Scan(&ev.Version, &ev.Action, &ev.Author, &at, &ev.Digest, &ev.ScanDecision, &counts, &ev.ThreadID, &ev.FilePath); err != nil {
			return nil, err
		}
		ev.Time = time.Unix(0, at).UTC()
		if err := json.Unmarshal(counts, &ev.Counts); err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// Delete implements skillsstore.Store (versions, history and enable states
// cascade).
func (s *Store) Delete(ctx context.Context, id int64) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM skills.skills WHERE id = $1`, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return skillsstore.ErrNotFound
	}
	return nil
}

// EnableStates implements skillsstore.Store.
func (s *Store) EnableStates(ctx context.Context, userKey string) (map[int64]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT skill_id, enabled FROM skills.skill_enabled WHERE user_key = $1`, userKey)
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
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now()
		if _, err := tx.Exec(ctx, `INSERT INTO skills.skill_enabled (skill_id, user_key, enabled, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (skill_id, user_key) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at`,
			id, userKey, enabled, now.UnixNano()); err != nil {
			if pgstore.IsForeignKeyViolation(err) {
				return skillsstore.ErrNotFound // the skill is gone
			}
			return err
		}
		return record(ctx, tx, id, ev, now)
	})
}

// ReferencedDigests implements skillsstore.Store.
func (s *Store) ReferencedDigests(ctx context.Context) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT f->>'digest' FROM skills.skill_versions, jsonb_array_elements(manifest) AS f`)
	if err != nil {
		return nil, err
	}
	digests, err := pgx.CollectRows(rows, pgx.RowTo[*string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(digests))
	for _, d := range digests {
		if d != nil {
			out[*d] = true
		}
	}
	return out, nil
}

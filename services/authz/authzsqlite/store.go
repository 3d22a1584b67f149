// Package authzsqlite is the authz service's sqlite store (modernc.org/sqlite
// through internal/sqlitex): the policy in Casbin's casbin_rule layout with a
// source per line and a policy version bumped in the same transaction as every
// change, a Casbin adapter over it (adapter.go), and the append-only decision
// log with group commit and retention (log.go).
package authzsqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane/internal/sqlitex"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Sentinel errors (the authzstore ones, for callers of this package).
var (
	ErrNotFound = authzstore.ErrNotFound // a line or link to remove does not exist
	ErrReadOnly = authzstore.ErrReadOnly // the line is owned by the policy file or the DeerFlow import
)

var _ authzstore.Store = (*Store)(nil)

// Store is the sqlite store. It is safe for concurrent use.
type Store struct {
	db  *sqlitex.DB
	now func() time.Time
}

// Open opens (creating and migrating) the store file at path.
func Open(path string) (*Store, error) {
	sub, err := fs.Sub(migrationsFS, "migrations")
	if err != nil {
		return nil, err
	}
	db, err := sqlitex.Open(path, sub)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, now: time.Now}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Ready returns nil when the store answers.
func (s *Store) Ready(ctx context.Context) error { return s.db.Ping(ctx) }

// DB exposes the underlying database (tests inject failures by closing it).
func (s *Store) DB() *sqlitex.DB { return s.db }

// Snapshot reads the whole policy and its version in one SQL statement, so the
// set is always consistent with the version (sqlite gives a statement one
// read snapshot).
func (s *Store) Snapshot(ctx context.Context) (authzcasbin.PolicySet, error) {
	rows, err := s.db.QueryContext(ctx, `
SELECT 0, 'version', CAST(version AS TEXT), '', '', '', '', '', '', '' FROM policy_meta WHERE id = 1
UNION ALL
SELECT id, ptype, v0, v1, v2, v3, v4, v5, v6, source FROM casbin_rule
ORDER BY 1`)
	if err != nil {
		return authzcasbin.PolicySet{}, fmt.Errorf("authz store: read policy: %w", err)
	}
	defer rows.Close()
	var set authzcasbin.PolicySet
	gotVersion := false
	for rows.Next() {
		var id int64
		var ptype, source string
		v := make([]string, 7)
		if err := rows.Scan(&id, &ptype, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &source); err != nil {
			return authzcasbin.PolicySet{}, fmt.Errorf("authz store: read policy: %w", err)
		}
		switch ptype {
		case "version":
			if _, err := fmt.Sscan(v[0], &set.Version); err != nil {
				return authzcasbin.PolicySet{}, fmt.Errorf("authz store: policy version %q: %w", v[0], err)
			}
			gotVersion = true
		case "p":
			r, _ := authzcasbin.RuleFromCasbin(v)
			r.Source = source
			set.Rules = append(set.Rules, r)
		case "g":
			l, _ := authzcasbin.LinkFromCasbin(v[:3])
			l.Source = source
			set.Links = append(set.Links, l)
		default:
			return authzcasbin.PolicySet{}, fmt.Errorf("authz store: row %d: unknown ptype %q", id, ptype)
		}
	}
	if err := rows.Err(); err != nil {
		return authzcasbin.PolicySet{}, fmt.Errorf("authz store: read policy: %w", err)
	}
	if !gotVersion {
		return authzcasbin.PolicySet{}, errors.New("authz store: policy_meta row missing")
	}
	return set, nil
}

// Version returns the stored policy version.
func (s *Store) Version(ctx context.Context) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, `SELECT version FROM policy_meta WHERE id = 1`).Scan(&v)
	return v, err
}

func bump(ctx context.Context, tx *sql.Tx, now time.Time) (int64, error) {
	var v int64
	err := tx.QueryRowContext(ctx, `UPDATE policy_meta SET version = version + 1, updated_ns = ? WHERE id = 1 RETURNING version`, now.UnixNano()).Scan(&v)
	return v, err
}

func currentVersion(ctx context.Context, tx *sql.Tx) (int64, error) {
	var v int64
	err := tx.QueryRowContext(ctx, `SELECT version FROM policy_meta WHERE id = 1`).Scan(&v)
	return v, err
}

func vals(ptype string, v []string) []any {
	out := []any{ptype, "", "", "", "", "", "", ""}
	for i := 0; i < len(v) && i < 7; i++ {
		out[i+1] = v[i]
	}
	return out
}

const insertRow = `INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4, v5, v6, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING`

func insert(ctx context.Context, tx *sql.Tx, ptype string, v []string, source string) (bool, error) {
	res, err := tx.ExecContext(ctx, insertRow, append(vals(ptype, v), source)...)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// sourceOf returns the source of an exact line, or "" when absent.
func sourceOf(ctx context.Context, tx *sql.Tx, ptype string, v []string) (string, error) {
	var src string
	err := tx.QueryRowContext(ctx, `SELECT source FROM casbin_rule WHERE ptype = ? AND v0 = ? AND v1 = ? AND v2 = ? AND v3 = ? AND v4 = ? AND v5 = ? AND v6 = ?`, vals(ptype, v)...).Scan(&src)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return src, err
}

func deleteRow(ctx context.Context, tx *sql.Tx, ptype string, v []string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM casbin_rule WHERE ptype = ? AND v0 = ? AND v1 = ? AND v2 = ? AND v3 = ? AND v4 = ? AND v5 = ? AND v6 = ?`, vals(ptype, v)...)
	return err
}

// Apply applies the change in one transaction and returns the new policy
// version (unchanged when nothing changed) and the number of lines and links
// added or removed. Errors wrap authzcasbin.ErrInvalidPolicy, ErrReadOnly or
// ErrNotFound and name the item (e.g. "policies[2].target: ...").
func (s *Store) Apply(ctx context.Context, ch authzstore.Change) (version int64, changed int, err error) {
	if err := ch.Validate(); err != nil {
		return 0, 0, err
	}
	err = s.db.WithTx(ctx, func(tx *sql.Tx) error {
		changed = 0
		if len(ch.RemoveRuleIDs) > 0 {
			set, err := s.snapshotTx(ctx, tx)
			if err != nil {
				return err
			}
			byID := make(map[string]authzcasbin.Rule, len(set))
			for _, r := range set {
				byID[r.ID()] = r
			}
			for i, id := range ch.RemoveRuleIDs {
				r, ok := byID[id]
				if !ok {
					return fmt.Errorf("%w: policy_ids[%d]: no line with id %q", ErrNotFound, i, id)
				}
				ch.RemoveRules = append(ch.RemoveRules, r)
			}
		}
		for i, r := range ch.RemoveRules {
			src, err := sourceOf(ctx, tx, "p", r.CasbinRule())
			if err != nil {
				return err
			}
			switch {
			case src == "":
				return fmt.Errorf("%w: policies[%d]: no line %s", ErrNotFound, i, r.String())
			case !authzstore.Editable(src):
				return fmt.Errorf("%w: policies[%d]: line %s is owned by source %q", ErrReadOnly, i, r.String(), src)
			}
			if err := deleteRow(ctx, tx, "p", r.CasbinRule()); err != nil {
				return err
			}
			changed++
		}
		for i, l := range ch.RemoveLinks {
			src, err := sourceOf(ctx, tx, "g", l.CasbinRule())
			if err != nil {
				return err
			}
			switch {
			case src == "":
				return fmt.Errorf("%w: role_links[%d]: no link %s", ErrNotFound, i, l.String())
			case !authzstore.Editable(src):
				return fmt.Errorf("%w: role_links[%d]: link %s is owned by source %q", ErrReadOnly, i, l.String(), src)
			}
			if err := deleteRow(ctx, tx, "g", l.CasbinRule()); err != nil {
				return err
			}
			changed++
		}
		for _, r := range ch.AddRules {
			ok, err := insert(ctx, tx, "p", r.CasbinRule(), authzcasbin.SourceAPI)
			if err != nil {
				return err
			}
			if ok {
				changed++
			}
		}
		for _, l := range ch.AddLinks {
			ok, err := insert(ctx, tx, "g", l.CasbinRule(), authzcasbin.SourceAPI)
			if err != nil {
				return err
			}
			if ok {
				changed++
			}
		}
		if changed == 0 {
			version, err = currentVersion(ctx, tx)
			return err
		}
		version, err = bump(ctx, tx, s.now())
		return err
	})
	return version, changed, err
}

func (s *Store) snapshotTx(ctx context.Context, tx *sql.Tx) ([]authzcasbin.Rule, error) {
	rows, err := tx.QueryContext(ctx, `SELECT v0, v1, v2, v3, v4, v5, v6 FROM casbin_rule WHERE ptype = 'p' ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []authzcasbin.Rule
	for rows.Next() {
		v := make([]string, 7)
		if err := rows.Scan(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]); err != nil {
			return nil, err
		}
		r, _ := authzcasbin.RuleFromCasbin(v)
		out = append(out, r)
	}
	return out, rows.Err()
}

// SeedDefault inserts the rules with source "default" only when the store
// holds no line and no link at all (docs/architecture.md §5). It reports whether it
// seeded.
func (s *Store) SeedDefault(ctx context.Context, rules []authzcasbin.Rule) (bool, error) {
	seeded := false
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM casbin_rule`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		for _, r := range rules {
			if _, err := insert(ctx, tx, "p", r.CasbinRule(), authzcasbin.SourceDefault); err != nil {
				return err
			}
		}
		seeded = true
		_, err := bump(ctx, tx, s.now())
		return err
	})
	return seeded, err
}

// ReplaceSource replaces every line and link owned by source (deerflow or
// file) with the given ones, in one transaction. Lines of source "default"
// whose subject is in dropDefaultFor are deleted too (a DeerFlow section owns
// the roles it defines). A new line identical to a line of another source is
// skipped (that line keeps its owner). The version is bumped only when
// something changed; the returned bool says whether it did.
func (s *Store) ReplaceSource(ctx context.Context, source string, rules []authzcasbin.Rule, links []authzcasbin.Link, dropDefaultFor []string) (int64, bool, error) {
	if err := authzstore.ValidateReplace(source, rules, links); err != nil {
		return 0, false, err
	}
	var version int64
	var changed bool
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		before, err := sourceLines(ctx, tx, source)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM casbin_rule WHERE source = ?`, source); err != nil {
			return err
		}
		for _, role := range dropDefaultFor {
			res, err := tx.ExecContext(ctx, `DELETE FROM casbin_rule WHERE source = ? AND ptype = 'p' AND v0 = ?`, authzcasbin.SourceDefault, role)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				changed = true
			}
		}
		for _, r := range rules {
			if _, err := insert(ctx, tx, "p", r.CasbinRule(), source); err != nil {
				return err
			}
		}
		for _, l := range links {
			if _, err := insert(ctx, tx, "g", l.CasbinRule(), source); err != nil {
				return err
			}
		}
		after, err := sourceLines(ctx, tx, source)
		if err != nil {
			return err
		}
		if !slices.Equal(before, after) {
			changed = true
		}
		if !changed {
			return errNoChange // roll back: keep the original ids (store order)
		}
		version, err = bump(ctx, tx, s.now())
		return err
	})
	if errors.Is(err, errNoChange) {
		version, err = s.Version(ctx)
		return version, false, err
	}
	return version, changed, err
}

var errNoChange = errors.New("no change")

func sourceLines(ctx context.Context, tx *sql.Tx, source string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT ptype, v0, v1, v2, v3, v4, v5, v6 FROM casbin_rule WHERE source = ? ORDER BY id`, source)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		v := make([]string, 8)
		if err := rows.Scan(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]); err != nil {
			return nil, err
		}
		out = append(out, strings.Join(v, "\x00"))
	}
	return out, rows.Err()
}

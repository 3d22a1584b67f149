// Package authzpg is the authz service's PostgreSQL store (pgx/v5,
// pgxpool) in the schema "authz" of the storage.dsn database: the policy in
// Casbin's casbin_rule layout with a source per line and a policy version
// bumped in the same transaction as every change, a Casbin adapter over it
// (adapter.go), and the append-only decision log (log.go). It passes the
// authztest conformance suite and the Casbin adapter contract test, like
// authzsqlite.
//
// Every policy write starts by locking the policy_meta row (SELECT ... FOR
// UPDATE): policy writes from any number of replicas serialise like
// sqlite's immediate transactions, so the version is bumped exactly once
// per change and line ids follow commit order
// (docs/decisions/0080-postgresql-stores.md).
package authzpg

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// Schema is the PostgreSQL schema of the authz tables.
const Schema = "authz"

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

// Sentinel errors (the authzstore ones, for callers of this package).
var (
	ErrNotFound = authzstore.ErrNotFound // a line or link to remove does not exist
	ErrReadOnly = authzstore.ErrReadOnly // the line is owned by the policy file or the DeerFlow import
)

var _ authzstore.Store = (*Store)(nil)

// Store is the PostgreSQL store. It is safe for concurrent use.
type Store struct {
	pool        *pgxpool.Pool
	now         func() time.Time
	onListenErr func(error) // notify.go
}

// Open migrates the authz schema (creating it when missing) and returns the
// store over pool. The pool stays the caller's: Close does not close it.
func Open(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if err := pgstore.Migrate(ctx, pool, Schema, Migrations()); err != nil {
		return nil, err
	}
	return &Store{pool: pool, now: time.Now}, nil
}

// Close implements authzstore.Store; the pool is not closed.
func (s *Store) Close() error { return nil }

// Ready returns nil when the database answers.
func (s *Store) Ready(ctx context.Context) error { return s.pool.Ping(ctx) }

// Snapshot reads the whole policy and its version in one SQL statement (one
// statement sees one snapshot), so the set is consistent with the version.
func (s *Store) Snapshot(ctx context.Context) (authzcasbin.PolicySet, error) {
	rows, err := s.pool.Query(ctx, `
SELECT 0::bigint, 'version', version::text, '', '', '', '', '', '', '' FROM authz.policy_meta WHERE id = 1
UNION ALL
SELECT id, ptype, v0, v1, v2, v3, v4, v5, v6, source FROM authz.casbin_rule
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
	err := s.pool.QueryRow(ctx, `SELECT version FROM authz.policy_meta WHERE id = 1`).Scan(&v)
	return v, err
}

// writeTx runs fn in a transaction that first locks the policy_meta row;
// fn gets the version before the change.
func (s *Store) writeTx(ctx context.Context, fn func(tx pgx.Tx, version int64) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var v int64
		if err := tx.QueryRow(ctx, `SELECT version FROM authz.policy_meta WHERE id = 1 FOR UPDATE`).Scan(&v); err != nil {
			return fmt.Errorf("authz store: lock policy: %w", err)
		}
		return fn(tx, v)
	})
}

// bump increments the policy version and queues its notification on
// Channel: PostgreSQL delivers it to every listener when (and only when) the
// transaction commits (notify.go).
func bump(ctx context.Context, tx pgx.Tx, now time.Time) (int64, error) {
	var v int64
	if err := tx.QueryRow(ctx, `UPDATE authz.policy_meta SET version = version + 1, updated_ns = $1 WHERE id = 1 RETURNING version`, now.UnixNano()).Scan(&v); err != nil {
		return 0, err
	}
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, strconv.FormatInt(v, 10))
	return v, err
}

func vals(ptype string, v []string) []any {
	out := []any{ptype, "", "", "", "", "", "", ""}
	for i := 0; i < len(v) && i < 7; i++ {
		out[i+1] = v[i]
	}
	return out
}

const lineMatch = `ptype = $1 AND v0 = $2 AND v1 = $3 AND v2 = $4 AND v3 = $5 AND v4 = $6 AND v5 = $7 AND v6 = $8`

func insert(ctx context.Context, tx pgx.Tx, ptype string, v []string, source string) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO authz.casbin_rule (ptype, v0, v1, v2, v3, v4, v5, v6, source) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT DO NOTHING`, append(vals(ptype, v), source)...)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// sourceOf returns the source of an exact line, or "" when absent.
func sourceOf(ctx context.Context, tx pgx.Tx, ptype string, v []string) (string, error) {
	var src string
	err := tx.QueryRow(ctx, `SELECT source FROM authz.casbin_rule WHERE `+lineMatch, vals(ptype, v)...).Scan(&src)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return src, err
}

func deleteRow(ctx context.Context, tx pgx.Tx, ptype string, v []string) error {
	_, err := tx.Exec(ctx, `DELETE FROM authz.casbin_rule WHERE `+lineMatch, vals(ptype, v)...)
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
	err = s.writeTx(ctx, func(tx pgx.Tx, current int64) error {
		changed = 0
		removeRules := slices.Clone(ch.RemoveRules)
		if len(ch.RemoveRuleIDs) > 0 {
			set, err := rulesTx(ctx, tx)
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
				removeRules = append(removeRules, r)
			}
		}
		for i, r := range removeRules {
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
			version = current
			return nil
		}
		var err error
		version, err = bump(ctx, tx, s.now())
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return version, changed, nil
}

func rulesTx(ctx context.Context, tx pgx.Tx) ([]authzcasbin.Rule, error) {
	rows, err := tx.Query(ctx, `SELECT v0, v1, v2, v3, v4, v5, v6 FROM authz.casbin_rule WHERE ptype = 'p' ORDER BY id`)
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
// holds no line and no link at all (ARCHITECTURE §5). It reports whether it
// seeded; of replicas starting together exactly one seeds.
func (s *Store) SeedDefault(ctx context.Context, rules []authzcasbin.Rule) (bool, error) {
	seeded := false
	err := s.writeTx(ctx, func(tx pgx.Tx, _ int64) error {
		var any bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM authz.casbin_rule)`).Scan(&any); err != nil {
			return err
		}
		if any {
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

var errNoChange = errors.New("no change")

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
	err := s.writeTx(ctx, func(tx pgx.Tx, current int64) error {
		changed = false
		version = current
		before, err := sourceLines(ctx, tx, source)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM authz.casbin_rule WHERE source = $1`, source); err != nil {
			return err
		}
		for _, role := range dropDefaultFor {
			tag, err := tx.Exec(ctx, `DELETE FROM authz.casbin_rule WHERE source = $1 AND ptype = 'p' AND v0 = $2`, authzcasbin.SourceDefault, role)
			if err != nil {
				return err
			}
			if tag.RowsAffected() > 0 {
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
		return version, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return version, changed, nil
}

func sourceLines(ctx context.Context, tx pgx.Tx, source string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT ptype, v0, v1, v2, v3, v4, v5, v6 FROM authz.casbin_rule WHERE source = $1 ORDER BY id`, source)
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

// FileImportLock is the advisory lock whose holder imports the file-owned
// policy (authz.policy_file and the authz.authorization section) into the
// database; the other replicas follow through NOTIFY
// (docs/decisions/0085-policy-propagation.md).
const FileImportLock = "authz.file_import"

// NewFileImportLock returns FileImportLock on a connection of its own (not
// yet taken).
func (s *Store) NewFileImportLock() *pgstore.SessionLock {
	return pgstore.NewSessionLock(s.pool, FileImportLock, "toolplane-authz-file-import")
}

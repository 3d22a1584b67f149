package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane/services/authz/authzsqlite"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
	"github.com/toolplane/toolplane/services/runtime/runtimesqlite"
	"github.com/toolplane/toolplane/services/skills/skillsblob"
	"github.com/toolplane/toolplane/services/skills/skillssqlite"
)

// CopyCount is one table's row count in the sqlite source and, after the
// copy, in PostgreSQL.
type CopyCount struct {
	// Table is the target table ("runtime.messages"; "skills.blobs" counts
	// the blob files).
	Table string
	// Source and Target are the row counts.
	Source, Target int64
}

// tableCopy copies one sqlite table into one PostgreSQL table.
type tableCopy struct {
	// query selects the source rows, in the order identities must keep.
	query string
	// target is schema.table; cols its columns, in query's order.
	target string
	cols   []string
	// conv converts one row in place (sqlite int booleans, text JSON, ...).
	conv func(row []any) error
	// identity is the identity column whose sequence follows the copied
	// maximum ("" = none).
	identity string
}

// serviceCopy is what one service's sqlite file holds.
type serviceCopy struct {
	service, file string
	// upgrade opens and closes the file with the service's own store, which
	// applies its sqlite migrations and backfills first.
	upgrade func(path string) error
	tables  []tableCopy
}

func nonEmptyJSON(i int, empty any) func(row []any) error {
	return func(row []any) error {
		if s, ok := row[i].(string); ok && s == "" {
			row[i] = empty
		}
		return nil
	}
}

// textTimes converts the RFC 3339 text times of columns cols (catalogstore
// writes them so) to time.Time; NULL stays NULL; a time that does not
// parse fails the copy, naming the column.
func textTimes(cols ...int) func(row []any) error {
	return func(row []any) error {
		for _, i := range cols {
			if row[i] == nil {
				continue
			}
			var text string
			switch v := row[i].(type) {
			case string:
				text = v
			case []byte:
				text = string(v)
			default:
				return fmt.Errorf("column %d: %T, want a text time", i, row[i])
			}
			t, err := time.Parse(time.RFC3339Nano, text)
			if err != nil {
				return fmt.Errorf("column %d: %q is not an RFC 3339 time", i, text)
			}
			row[i] = t.UTC()
		}
		return nil
	}
}

func intBool(i int) func(row []any) error {
	return func(row []any) error {
		n, ok := row[i].(int64)
		if !ok {
			return fmt.Errorf("column %d: %T, want an integer", i, row[i])
		}
		row[i] = n != 0
		return nil
	}
}

var copies = []serviceCopy{
	{service: "catalog", file: "catalog.db",
		upgrade: func(p string) error { s, err := catalogstore.Open(p); return closeAfter(s, err) },
		tables: []tableCopy{{
			query:  `SELECT key, model, dim, vec, created_at FROM vectors ORDER BY key`,
			target: "catalog.vectors", cols: []string{"key", "model", "dim", "vec", "created_at"},
			conv: func(row []any) error {
				t, err := time.Parse(time.RFC3339Nano, fmt.Sprint(row[4]))
				if err != nil {
					t = time.Now().UTC() // an unreadable time only ages the cache entry
				}
				row[4] = t
				return nil
			}},
			// Names, pins and their audit (docs/architecture.md §7): a copy
			// without them would re-assign names and forget approved and
			// rejected definitions. The applied configuration (§10.2) and
			// the sealed OAuth tokens and clients (the same additional data
			// in both stores, so they open with the same keys) too; pending
			// logins (minutes long) are not copied.
			{query: `SELECT scope, server, tool, base, name, assigned_at, last_seen_at FROM tool_names ORDER BY scope, server, tool`,
				target: "catalog.tool_names", cols: []string{"scope", "server", "tool", "base", "name", "assigned_at", "last_seen_at"}, conv: textTimes(5, 6)},
			{query: `SELECT scope, server, tool, approved_hash, approved_definition, rejected_hash, updated_at FROM tool_pins ORDER BY scope, server, tool`,
				target: "catalog.tool_pins", cols: []string{"scope", "server", "tool", "approved_hash", "approved_definition", "rejected_hash", "updated_at"}, conv: textTimes(6)},
			{query: `SELECT id, at, actor, action, scope, server, tool, name, previous_hash, definition_hash, diff FROM tool_audit ORDER BY id`,
				target: "catalog.tool_audit", cols: []string{"id", "at", "actor", "action", "scope", "server", "tool", "name", "previous_hash", "definition_hash", "diff"},
				conv: textTimes(1), identity: "id"},
			{query: `SELECT path, sha256, content, applied_at FROM applied_config ORDER BY path`,
				target: "catalog.applied_config", cols: []string{"path", "sha256", "content", "applied_at"}, conv: textTimes(3)},
			{query: `SELECT server, tenant, subject, key_id, sealed, expires_at, updated_at FROM oauth_tokens ORDER BY server, tenant, subject`,
				target: "catalog.oauth_tokens", cols: []string{"server", "tenant", "subject", "key_id", "sealed", "expires_at", "updated_at"}, conv: textTimes(5, 6)},
			{query: `SELECT server, issuer, key_id, sealed, updated_at FROM oauth_clients ORDER BY server, issuer`,
				target: "catalog.oauth_clients", cols: []string{"server", "issuer", "key_id", "sealed", "updated_at"}, conv: textTimes(4)},
		}},
	{service: "authz", file: "authz.db",
		upgrade: func(p string) error { s, err := authzsqlite.Open(p); return closeAfter(s, err) },
		tables: []tableCopy{
			{query: `SELECT id, ptype, v0, v1, v2, v3, v4, v5, v6, source FROM casbin_rule ORDER BY id`,
				target: "authz.casbin_rule", cols: []string{"id", "ptype", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "source"}, identity: "id"},
			{query: `SELECT seq, id, kind, time_ns, tenant, subject, resource, allow, policy_version, record FROM decisions ORDER BY seq`,
				target: "authz.decisions", cols: []string{"seq", "id", "kind", "time_ns", "tenant", "subject", "resource", "allow", "policy_version", "record"},
				conv: intBool(7), identity: "seq"},
		}},
	{service: "skills", file: "skills.db",
		upgrade: func(p string) error { s, err := skillssqlite.Open(p); return closeAfter(s, err) },
		tables: []tableCopy{
			{query: `SELECT id, category, owner, name, version, created_at, updated_at FROM skills ORDER BY id`,
				target: "skills.skills", cols: []string{"id", "category", "owner", "name", "version", "created_at", "updated_at"}, identity: "id"},
			{query: `SELECT skill_id, version, digest, manifest, created_at FROM skill_versions ORDER BY skill_id, version`,
				target: "skills.skill_versions", cols: []string{"skill_id", "version", "digest", "manifest", "created_at"},
				conv: nonEmptyJSON(3, "[]")},
			{query: `SELECT id, skill_id, version, action, author, at, digest, scan_decision, counts FROM skill_history ORDER BY id`,
				target: "skills.skill_history", cols: []string{"id", "skill_id", "version", "action", "author", "at", "digest", "scan_decision", "counts"},
				conv: nonEmptyJSON(8, "{}"), identity: "id"},
			{query: `SELECT skill_id, user_key, enabled, updated_at FROM skill_enabled ORDER BY skill_id, user_key`,
				target: "skills.skill_enabled", cols: []string{"skill_id", "user_key", "enabled", "updated_at"}, conv: intBool(2)},
		}},
	{service: "runtime", file: "runtime.db",
		upgrade: func(p string) error { s, err := runtimesqlite.Open(p); return closeAfter(s, err) },
		tables: []tableCopy{
			{query: `SELECT id, owner_tenant, owner_subject, create_ns, update_ns, state, read_marks, parent_id, child FROM threads ORDER BY create_ns, id`,
				target: "runtime.threads", cols: []string{"id", "owner_tenant", "owner_subject", "create_ns", "update_ns", "state", "read_marks", "parent_id", "child"},
				conv: func(row []any) error {
					_ = nonEmptyJSON(6, "{}")(row)
					return nonEmptyJSON(8, nil)(row)
				}},
			{query: `SELECT seq, thread_id, body, create_ns, role FROM messages ORDER BY seq`,
				target: "runtime.messages", cols: []string{"seq", "thread_id", "body", "create_ns", "role"}, identity: "seq"},
			{query: `SELECT seq, thread_id, kind, detail, time_ns FROM events ORDER BY seq`,
				target: "runtime.events", cols: []string{"seq", "thread_id", "kind", "detail", "time_ns"}, identity: "seq"},
			// ins (the tie-break of ListRuns) is assigned in rowid order.
			{query: `SELECT run_id, thread_id, status, start_ns, body, event_seq FROM runs ORDER BY rowid`,
				target: "runtime.runs", cols: []string{"run_id", "thread_id", "status", "start_ns", "body", "event_seq"}},
			{query: `SELECT name, body FROM agents ORDER BY name`,
				target: "runtime.agents", cols: []string{"name", "body"}},
		}},
}

type closer interface{ Close() error }

func closeAfter[T closer](s T, err error) error {
	if err != nil {
		return err
	}
	return s.Close()
}

// targetTables lists every table a copy writes (for the emptiness check).
func targetTables() []string {
	out := []string{"skills.blobs"}
	for _, sc := range copies {
		for _, tc := range sc.tables {
			out = append(out, tc.target)
		}
	}
	return out
}

// CopyToPostgres copies an existing sqlite deployment — the <service>.db
// files of dataDir and the skill blobs of dataDir/skills/blobs — into the
// PostgreSQL database of dsn, which must hold no Toolplane data yet
// (`toolplane storage migrate`). The target schemas are migrated first
// (OpenStorage); each sqlite file is brought to its newest schema by its own
// store, then read. Everything is written in one transaction with the
// original ids and sequence numbers (identity sequences continue after
// them); the transaction commits only when every table's row count in
// PostgreSQL equals the source's, so a failed copy leaves the target as it
// was. Absent files are skipped (a split deployment keeps each service's
// file on its own host).
func CopyToPostgres(ctx context.Context, dataDir, dsn string) ([]CopyCount, error) {
	if dsn == "" {
		return nil, errors.New("no target DSN")
	}
	if fi, err := os.Stat(dataDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("data directory %s: not a directory", dataDir)
	}
	pool, err := OpenStorage(ctx, dsn, AllServices)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	var counts []CopyCount
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, t := range targetTables() {
			var n int64
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+t).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("the target database already holds Toolplane data (%s has %d rows); copy into an empty database", t, n)
			}
		}
		for _, sc := range copies {
			path := filepath.Join(dataDir, sc.file)
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err := sc.upgrade(path); err != nil {
				return fmt.Errorf("%s: open %s: %w", sc.service, sc.file, err)
			}
			c, err := copyFile(ctx, tx, path, sc)
			counts = append(counts, c...)
			if err != nil {
				return fmt.Errorf("%s: %w", sc.service, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dataDir, "skills", "blobs")); err == nil {
			c, err := copyBlobs(ctx, tx, filepath.Join(dataDir, "skills", "blobs"))
			counts = append(counts, c)
			if err != nil {
				return fmt.Errorf("skills: blobs: %w", err)
			}
		}
		for _, c := range counts {
			if c.Source != c.Target {
				return fmt.Errorf("%s: %d rows copied, the source has %d", c.Table, c.Target, c.Source)
			}
		}
		return nil
	})
	if err != nil {
		return counts, err
	}
	return counts, nil
}

func copyFile(ctx context.Context, tx pgx.Tx, path string, sc serviceCopy) ([]CopyCount, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// One read transaction: the tables are read from one snapshot.
	rtx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = rtx.Rollback() }()
	var out []CopyCount
	for _, tc := range sc.tables {
		c, err := copyTable(ctx, tx, rtx, tc)
		out = append(out, c)
		if err != nil {
			return out, fmt.Errorf("%s: %w", tc.target, err)
		}
	}
	if sc.service == "authz" {
		var v, ns int64
		if err := rtx.QueryRowContext(ctx, `SELECT version, updated_ns FROM policy_meta WHERE id = 1`).Scan(&v, &ns); err != nil {
			return out, fmt.Errorf("policy version: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE authz.policy_meta SET version = $1, updated_ns = $2 WHERE id = 1`, v, ns); err != nil {
			return out, err
		}
	}
	return out, nil
}

func copyTable(ctx context.Context, tx pgx.Tx, rtx *sql.Tx, tc tableCopy) (CopyCount, error) {
	c := CopyCount{Table: tc.target}
	rows, err := rtx.QueryContext(ctx, tc.query)
	if err != nil {
		return c, err
	}
	defer rows.Close()
	var rowErr error
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if !rows.Next() {
			return nil, rows.Err()
		}
		vals := make([]any, len(tc.cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		if tc.conv != nil {
			if err := tc.conv(vals); err != nil {
				rowErr = err
				return nil, err
			}
		}
		c.Source++
		return vals, nil
	})
	schema, table, _ := strings.Cut(tc.target, ".")
	n, err := tx.CopyFrom(ctx, pgx.Identifier{schema, table}, tc.cols, src)
	if err != nil {
		if rowErr != nil {
			return c, rowErr
		}
		return c, err
	}
	c.Target = n
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+tc.target).Scan(&c.Target); err != nil {
		return c, err
	}
	if tc.identity != "" {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%s', '%s'), GREATEST((SELECT max(%s) FROM %s), 1), (SELECT count(*) > 0 FROM %s))`,
			tc.target, tc.identity, tc.identity, tc.target, tc.target)); err != nil {
			return c, fmt.Errorf("identity %s: %w", tc.identity, err)
		}
	}
	return c, nil
}

// copyBlobs copies every blob file (each verified against its digest on
// read) into skills.blobs.
func copyBlobs(ctx context.Context, tx pgx.Tx, dir string) (CopyCount, error) {
	c := CopyCount{Table: "skills.blobs"}
	bs, err := skillsblob.Open(dir)
	if err != nil {
		return c, err
	}
	digests, err := bs.List()
	if err != nil {
		return c, err
	}
	c.Source = int64(len(digests))
	now := time.Now().UnixNano()
	i := 0
	var readErr error
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == len(digests) {
			return nil, nil
		}
		d := digests[i]
		i++
		data, err := bs.Get(d)
		if err != nil {
			readErr = err
			return nil, err
		}
		return []any{d, data, now}, nil
	})
	if c.Target, err = tx.CopyFrom(ctx, pgx.Identifier{"skills", "blobs"}, []string{"digest", "data", "touched_ns"}, src); err != nil {
		if readErr != nil {
			return c, readErr
		}
		return c, err
	}
	return c, nil
}

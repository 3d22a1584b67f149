// Package sqlitex opens service stores on modernc.org/sqlite (pure Go, CGO
// off) with the settings every store uses: WAL journal, busy timeout,
// foreign keys, immediate write transactions, a single writer connection,
// embedded migrations and retry on SQLITE_BUSY (docs/conventions.md §4).
package sqlitex

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DB is an open store. Writes go through WithTx on a single connection;
// reads may use the embedded *sql.DB (a separate pool of readers).
type DB struct {
	*sql.DB
	writer *sql.DB
	path   string
	// Prepared statements (stmts.go) of the readers and of the writer.
	readStmts, writeStmts stmtCache
}

// Open opens (creating if needed) the sqlite file at path and applies the
// migrations in migrations: files named NNN_name.sql at the root of the FS,
// applied in lexical order, each once, recorded in schema_migrations. A nil
// FS applies none. The path ":memory:" is not supported (use a temp file).
func Open(path string, migrations fs.FS) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlitex: empty path")
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(5000)", "foreign_keys(ON)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	writer, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitex: open %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	readers, err := sql.Open("sqlite", dsn)
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("sqlitex: open %s: %w", path, err)
	}
	readers.SetMaxOpenConns(4)
	db := &DB{DB: readers, writer: writer, path: path}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := writer.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitex: open %s: %w", path, err)
	}
	if migrations != nil {
		if err := db.migrate(ctx, migrations); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// Path returns the file path of the store.
func (db *DB) Path() string { return db.path }

// Close closes both pools.
func (db *DB) Close() error {
	db.readStmts.close()
	db.writeStmts.close()
	return errors.Join(db.DB.Close(), db.writer.Close())
}

// Ping checks that the store answers.
func (db *DB) Ping(ctx context.Context) error { return db.writer.PingContext(ctx) }

// WithTx runs fn in an immediate write transaction on the single writer
// connection, committing when fn returns nil and rolling back otherwise. A
// SQLITE_BUSY or SQLITE_LOCKED failure is retried up to 5 times with backoff.
func (db *DB) WithTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := 0; attempt < 6; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt*attempt) * 10 * time.Millisecond):
			}
		}
		err = db.tx(ctx, fn)
		if err == nil || !IsBusy(err) {
			return err
		}
	}
	return err
}

func (db *DB) tx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (db *DB) migrate(ctx context.Context, migrations fs.FS) error {
	names, err := fs.Glob(migrations, "*.sql")
	if err != nil {
		return fmt.Errorf("sqlitex: list migrations: %w", err)
	}
	sort.Strings(names)
	return db.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
			return fmt.Errorf("sqlitex: create schema_migrations: %w", err)
		}
		for _, name := range names {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE name = ?`, name).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			body, err := fs.ReadFile(migrations, name)
			if err != nil {
				return fmt.Errorf("sqlitex: read migration %s: %w", name, err)
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("sqlitex: apply migration %s: %w", path.Base(name), err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)`, name, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
				return err
			}
		}
		return nil
	})
}

func code(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// IsBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED (any extended code).
func IsBusy(err error) bool {
	c := code(err) & 0xff
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED ||
		(err != nil && strings.Contains(err.Error(), "database is locked"))
}

// IsConstraint reports whether err is a constraint violation (UNIQUE, PRIMARY
// KEY, FOREIGN KEY, CHECK, NOT NULL).
func IsConstraint(err error) bool {
	return code(err)&0xff == sqlite3.SQLITE_CONSTRAINT
}

// IsNotFound reports whether err is sql.ErrNoRows.
func IsNotFound(err error) bool { return errors.Is(err, sql.ErrNoRows) }

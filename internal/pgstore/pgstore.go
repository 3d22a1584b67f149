// Package pgstore is what every service's PostgreSQL store shares: opening
// the process's pgxpool from storage.dsn, and applying a service's embedded
// migrations to its own schema (catalog, authz, skills, runtime) with goose
// under a PostgreSQL session-level advisory lock, so replicas starting
// together migrate once (docs/decisions/0080-postgresql-stores.md).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// ConnectTimeout bounds connecting to the server (and the first ping).
const ConnectTimeout = 10 * time.Second

// DefaultMaxConns is the pool size when the DSN does not set
// pool_max_conns: the four services of an all-in-one process share the
// pool (pgx's own default, max(4, CPUs), is too small for that).
const DefaultMaxConns = 20

// Open parses dsn (a libpq URL or key=value string), opens a pool and
// pings the server. The error never contains the DSN (it may hold a
// password); it says whether the DSN is malformed or the server is
// unreachable.
func Open(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("invalid DSN: " + redact(err))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > ConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.MaxConnIdleTime = 5 * time.Minute
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errors.New("invalid DSN: " + redact(err))
	}
	pctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot connect to the server at %s:%d: %s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, redact(err))
	}
	return pool, nil
}

// redact returns the error text of a pgx parse or connect error without
// the connection string (pgx masks the password in it; the rest is dropped
// too) and without the "failed to connect to `...`" prefix.
func redact(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if pe.Unwrap() != nil {
			return pe.Unwrap().Error()
		}
		s := pe.Error() // "cannot parse `<DSN, password masked>`: <reason>"
		if i := strings.LastIndex(s, "`: "); i >= 0 {
			return s[i+3:]
		}
		return "cannot parse"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		return ce.Unwrap().Error()
	}
	return err.Error()
}

var schemaName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// lockID is the advisory lock key of a schema's migrations (of
// "toolplane.migrate.<schema>"), distinct per schema so that the four
// services migrate independently.
func lockID(schema string) int64 { return lockKey("toolplane.migrate." + schema) }

// Migrate creates schema when missing and applies the goose migrations in
// migrations (files NNN_name.sql with -- +goose Up sections) that are not
// yet applied, recording them in <schema>.goose_db_version. It holds the
// session advisory lock of the schema while it runs; a replica that starts
// meanwhile waits for it (at most a minute) and then finds nothing to do.
// Migration files qualify every object with the schema name, so one
// database holds every service.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string, migrations fs.FS) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("migrate: invalid schema name %q", schema)
	}
	// CREATE SCHEMA IF NOT EXISTS races with itself (a unique violation in
	// pg_namespace): serialise it on the same key, transaction-scoped.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockID(schema)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize())
		return err
	}); err != nil {
		return fmt.Errorf("migrate %s: create schema: %w", schema, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID(schema)), lock.WithLockTimeout(1, 60), lock.WithUnlockTimeout(1, 10))
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations,
		goose.WithTableName(schema+".goose_db_version"),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrate %s: %w", schema, err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", schema, err)
	}
	return nil
}

// Version returns the newest applied migration of schema (0 = none).
func Version(ctx context.Context, pool *pgxpool.Pool, schema string, migrations fs.FS) (int64, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations, goose.WithTableName(schema+".goose_db_version"), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

// IsUniqueViolation reports whether err is a PostgreSQL unique_violation
// (SQLSTATE 23505).
func IsUniqueViolation(err error) bool { return hasCode(err, "23505") }

// IsForeignKeyViolation reports whether err is a PostgreSQL
// foreign_key_violation (SQLSTATE 23503).
func IsForeignKeyViolation(err error) bool { return hasCode(err, "23503") }

func hasCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// Retryable reports whether a transaction failed for a reason that a retry
// may not meet: serialization_failure (40001) or deadlock_detected (40P01).
func Retryable(err error) bool { return hasCode(err, "40001") || hasCode(err, "40P01") }

// InTx runs fn in a transaction, retrying it (at most 5 times, with a short
// backoff) when it failed with a serialization failure or a deadlock.
func InTx(ctx context.Context, pool *pgxpool.Pool, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = pgx.BeginTxFunc(ctx, pool, opts, fn)
		if !Retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
	return err
}

// lockKey is the advisory lock key of a name (FNV-1a, 63 bits).
func lockKey(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int64(h.Sum64() & (1<<63 - 1))
}

// Acquire takes the session-level advisory lock named name on one
// connection of pool, waiting while another session holds it (bounded by
// ctx), and returns the function that releases it and the connection. For
// locks held across calls (the runtime's read-before-write gate).
func Acquire(ctx context.Context, pool *pgxpool.Pool, name string) (unlock func(), err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	key := lockKey(name)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		// A cancelled wait may leave the lock request behind: drop the
		// session rather than return it to the pool.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
	}, nil
}

// WithLock runs fn while holding the session-level advisory lock named
// name (e.g. "skills.public_sync") on one connection of pool: across every
// process on the database, one fn of that name runs at a time. Waiting for
// the lock ends with ctx. The lock is released when fn returns; if the
// release fails the connection is closed, which releases it too. Each
// waiter holds a pool connection while it waits, and fn's own queries need
// another: callers keep concurrent WithLock calls of one process well
// below the pool size (a start-up task per service, not per request).
func WithLock(ctx context.Context, pool *pgxpool.Pool, name string, fn func(ctx context.Context) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	defer conn.Release()
	key := lockKey(name)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
			_ = conn.Conn().Close(uctx)
		}
	}()
	return fn(ctx)
}

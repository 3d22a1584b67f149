package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SessionLock is a session-level advisory lock held on a dedicated
// connection (not one of the pool's), for a role one process takes among
// its replicas, such as importing a file ("catalog.file_import"). TryLock
// never waits; the lock lasts while the connection does, so when the
// holding process dies (or its connection breaks) PostgreSQL releases it
// and another replica's next TryLock takes it over. Held checks the
// connection: a holder that lost it stops acting on the role. Safe for
// concurrent use.
type SessionLock struct {
	pool    *pgxpool.Pool
	name    string
	key     int64
	appName string

	mu   sync.Mutex
	conn *pgx.Conn // nil: not connected
	held bool
}

// NewSessionLock returns the lock named name over the settings of pool;
// nothing is connected until TryLock.
func NewSessionLock(pool *pgxpool.Pool, name, appName string) *SessionLock {
	return &SessionLock{pool: pool, name: name, key: lockKey(name), appName: appName}
}

// TryLock takes the lock when no session holds it (pg_try_advisory_lock)
// and reports whether this process holds it now. Holding it already, it
// checks the connection (Held).
func (l *SessionLock) TryLock(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		return l.checkLocked(ctx)
	}
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := dedicated(ctx, l.pool, l.appName)
		if err != nil {
			return false, fmt.Errorf("lock %s: %w", l.name, err)
		}
		l.conn = conn
	}
	var ok bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, l.key).Scan(&ok); err != nil {
		l.dropLocked()
		return false, fmt.Errorf("lock %s: %w", l.name, err)
	}
	l.held = ok
	return ok, nil
}

// Held reports whether this process still holds the lock: its connection
// answers (bounded by ctx). A broken connection released the lock on the
// server: Held drops it and says false.
func (l *SessionLock) Held(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return false, nil
	}
	return l.checkLocked(ctx)
}

func (l *SessionLock) checkLocked(ctx context.Context) (bool, error) {
	if l.conn == nil || l.conn.IsClosed() {
		l.dropLocked()
		return false, fmt.Errorf("lock %s: connection closed", l.name)
	}
	if err := l.conn.Ping(ctx); err != nil {
		l.dropLocked()
		return false, fmt.Errorf("lock %s: connection lost: %w", l.name, err)
	}
	return true, nil
}

// dropLocked closes the connection (which releases the lock if held).
func (l *SessionLock) dropLocked() {
	l.held = false
	if l.conn != nil {
		closeConn(l.conn)
		l.conn = nil
	}
}

// Release gives the lock up and closes the connection.
func (l *SessionLock) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held && l.conn != nil && !l.conn.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, l.key)
		cancel()
		_ = err // closing the connection releases it anyway
	}
	l.dropLocked()
}

package sqlitex

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// maxCachedStmts bounds the prepared statements kept per pool: queries are
// constant strings of the stores, but one built with a variable shape
// beyond the bound is simply prepared afresh each time.
const maxCachedStmts = 128

// stmtCache keeps prepared statements of one pool by query text. Parsing
// and planning a statement (sqlite3_prepare_v2) was about 12% of the
// process's CPU on the runtime's ExecuteToolCall path (docs/performance.md):
// modernc.org/sqlite prepares every QueryContext/ExecContext afresh.
type stmtCache struct {
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool // being prepared in the background
	closed  bool
}

func (c *stmtCache) lookup(query string) (*sql.Stmt, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[query]
	return st, ok
}

// get returns the cached statement of query, preparing it on pool now when
// it is not cached yet (cached false: the caller owns a statement beyond
// the bound).
func (c *stmtCache) get(ctx context.Context, pool *sql.DB, query string) (*sql.Stmt, bool, error) {
	if st, ok := c.lookup(query); ok {
		return st, true, nil
	}
	st, err := pool.PrepareContext(ctx, query)
	if err != nil {
		return nil, false, err
	}
	if kept := c.keep(query, st); kept != nil {
		return kept, true, nil
	}
	return st, false, nil
}

// keep caches st for query unless the cache is full or closed; it returns
// the statement now cached for query (st, or one prepared concurrently,
// st then being closed), or nil when st was not kept.
func (c *stmtCache) keep(query string, st *sql.Stmt) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[query]; ok {
		_ = st.Close()
		return prev
	}
	if c.closed || len(c.m) >= maxCachedStmts {
		return nil
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = st
	return st
}

// warm prepares query on pool in the background, once: the writer pool
// has a single connection, which the transaction asking holds, so the
// statement can only be prepared once that transaction has ended.
func (c *stmtCache) warm(pool *sql.DB, query string) {
	c.mu.Lock()
	if c.closed || c.pending[query] || len(c.m)+len(c.pending) >= maxCachedStmts {
		c.mu.Unlock()
		return
	}
	if c.pending == nil {
		c.pending = map[string]bool{}
	}
	c.pending[query] = true
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := pool.PrepareContext(ctx, query)
		c.mu.Lock()
		delete(c.pending, query)
		c.mu.Unlock()
		if err == nil && c.keep(query, st) == nil {
			_ = st.Close()
		}
	}()
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		_ = st.Close()
	}
	c.m, c.closed = nil, true
}

// Stmt is a prepared statement of a store's hot path; Close it when done
// (a no-op for a cached one).
type Stmt struct {
	*sql.Stmt
	own bool // not cached: Close closes it
}

// Close releases a statement that was not cached.
func (s Stmt) Close() error {
	if s.own {
		return s.Stmt.Close()
	}
	return nil
}

// Prepared returns query as a statement prepared once and kept (a bounded
// cache per pool), bound to tx, or on the pool of readers when tx is nil.
// The first use of a query inside a transaction cannot prepare it on the
// writer (its one connection is the transaction's): ok is then false, the
// caller runs the query unprepared, and the statement is prepared in the
// background for the next call.
func (db *DB) Prepared(ctx context.Context, tx *sql.Tx, query string) (st Stmt, ok bool, err error) {
	if tx == nil {
		s, cached, err := db.readStmts.get(ctx, db.DB, query)
		if err != nil {
			return Stmt{}, false, err
		}
		return Stmt{Stmt: s, own: !cached}, true, nil
	}
	s, found := db.writeStmts.lookup(query)
	if !found {
		db.writeStmts.warm(db.writer, query)
		return Stmt{}, false, nil
	}
	// Released with tx; the cached statement stays prepared on the
	// writer's connection.
	return Stmt{Stmt: tx.StmtContext(ctx, s)}, true, nil
}

package runtimesqlite

import (
	"context"
	"database/sql"

	"github.com/toolplane/toolplane/internal/sqlitex"
)

// prepared runs the store's queries as statements prepared once
// (sqlitex.DB.Prepared): on the tool-call path (GetThread, ClaimToolCall,
// UpdateThread) parsing the SQL afresh each time was the largest single
// cost of the process (docs/performance.md). tx nil means the readers.
// When a statement is not prepared yet inside a transaction, or cannot be
// prepared, the query runs unprepared (an error is then the query's own).
type prepared struct {
	db *sqlitex.DB
	tx *sql.Tx
}

func (p prepared) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, ok, err := p.db.Prepared(ctx, p.tx, q)
	if err != nil || !ok {
		if p.tx != nil {
			return p.tx.QueryRowContext(ctx, q, args...)
		}
		return p.db.QueryRowContext(ctx, q, args...)
	}
	defer st.Close() // the row keeps an uncached statement until it is scanned
	return st.QueryRowContext(ctx, args...)
}

func (p prepared) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, ok, err := p.db.Prepared(ctx, p.tx, q)
	if err != nil || !ok {
		if p.tx != nil {
			return p.tx.QueryContext(ctx, q, args...)
		}
		return p.db.QueryContext(ctx, q, args...)
	}
	defer st.Close()
	return st.QueryContext(ctx, args...)
}

func (p prepared) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, ok, err := p.db.Prepared(ctx, p.tx, q)
	if err != nil || !ok {
		if p.tx != nil {
			return p.tx.ExecContext(ctx, q, args...)
		}
		return p.db.ExecContext(ctx, q, args...)
	}
	defer st.Close()
	return st.ExecContext(ctx, args...)
}

package runtimesqlite

import (
	"context"
	"database/sql"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimestore/runsql"
)

// dialect is runsql's seam for sqlite: unqualified tables, ?N placeholders,
// no row locks (a write transaction is exclusive: BEGIN IMMEDIATE).
var dialect = runsql.Dialect{Runs: "runs", Threads: "threads", Calls: "tool_calls", Question: true}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// sqlTx runs the shared SQL of runsql as prepared statements (prepared.go).
type sqlTx struct{ tx prepared }

func (t sqlTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqlTx) Query(ctx context.Context, q string, args ...any) (runsql.Rows, error) {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (s *Store) inTx(ctx context.Context, fn func(tx runsql.Tx) error) error {
	return s.db.WithTx(ctx, func(tx *sql.Tx) error { return fn(sqlTx{prepared{s.db, tx}}) })
}

// StartRun implements runtimestore.RunLeases.
func (s *Store) StartRun(ctx context.Context, r *runtimev1.Run, l runtimestore.Lease, now time.Time) error {
	return s.inTx(ctx, func(tx runsql.Tx) error { return dialect.StartRun(ctx, tx, r, l, now) })
}

// RenewLeases implements runtimestore.RunLeases.
func (s *Store) RenewLeases(ctx context.Context, owner string, until time.Time) (out []runtimestore.LeasedRun, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error { out, err = dialect.RenewLeases(ctx, tx, owner, until); return err })
	return out, err
}

// CancelRequested implements runtimestore.RunLeases.
func (s *Store) CancelRequested(ctx context.Context, owner string) (out []runtimestore.RunRef, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error { out, err = dialect.CancelRequested(ctx, tx, owner); return err })
	return out, err
}

// RequestCancel implements runtimestore.RunLeases.
func (s *Store) RequestCancel(ctx context.Context, threadID, runID string) (owner string, ok bool, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error { owner, ok, err = dialect.RequestCancel(ctx, tx, threadID, runID); return err })
	return owner, ok, err
}

// InterruptExpired implements runtimestore.RunLeases.
func (s *Store) InterruptExpired(ctx context.Context, reason string, now time.Time) (n int, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error { n, err = dialect.InterruptExpired(ctx, tx, reason, now); return err })
	return n, err
}

// ClaimToolCall implements runtimestore.ToolCalls.
func (s *Store) ClaimToolCall(ctx context.Context, threadID, callID, fingerprint string, l runtimestore.Lease) (claimed bool, c runtimestore.ToolCall, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error {
		claimed, c, err = dialect.ClaimToolCall(ctx, tx, threadID, callID, fingerprint, l, time.Now())
		return err
	})
	return claimed, c, err
}

// GetToolCall implements runtimestore.ToolCalls.
func (s *Store) GetToolCall(ctx context.Context, threadID, callID string) (c runtimestore.ToolCall, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error { c, err = dialect.GetToolCall(ctx, tx, threadID, callID); return err })
	return c, err
}

// SettleToolCall implements runtimestore.ToolCalls.
func (s *Store) SettleToolCall(ctx context.Context, threadID, callID string, result []byte, now time.Time) (c runtimestore.ToolCall, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error {
		c, err = dialect.SettleToolCall(ctx, tx, threadID, callID, result, now)
		return err
	})
	return c, err
}

// ReleaseToolCall implements runtimestore.ToolCalls.
func (s *Store) ReleaseToolCall(ctx context.Context, threadID, callID, owner string) error {
	return s.inTx(ctx, func(tx runsql.Tx) error { return dialect.ReleaseToolCall(ctx, tx, threadID, callID, owner) })
}

// PurgeToolCallsBefore implements runtimestore.ToolCalls.
func (s *Store) PurgeToolCallsBefore(ctx context.Context, t time.Time) (n int, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error { n, err = dialect.PurgeToolCallsBefore(ctx, tx, t); return err })
	return n, err
}

// EndRunUnlessLeased implements runtimestore.RunLeases.
func (s *Store) EndRunUnlessLeased(ctx context.Context, r *runtimev1.Run, now time.Time) (ok bool, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error { ok, err = dialect.EndRunUnlessLeased(ctx, tx, r, now); return err })
	return ok, err
}

// SetEventSeq implements runtimestore.RunLeases.
func (s *Store) SetEventSeq(ctx context.Context, threadID, runID string, seq int64) error {
	return s.inTx(ctx, func(tx runsql.Tx) error { return dialect.SetEventSeq(ctx, tx, threadID, runID, seq) })
}

// EventSeq implements runtimestore.RunLeases.
func (s *Store) EventSeq(ctx context.Context, threadID, runID string) (seq int64, err error) {
	err = s.inTx(ctx, func(tx runsql.Tx) error { seq, err = dialect.EventSeq(ctx, tx, threadID, runID); return err })
	return seq, err
}

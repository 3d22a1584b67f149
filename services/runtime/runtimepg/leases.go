package runtimepg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane/internal/pgstore"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimestore/runsql"
)

// dialect is runsql's seam for PostgreSQL: qualified tables, row locks.
var dialect = runsql.Dialect{Runs: "runtime.runs", Threads: "runtime.threads", Calls: "runtime.tool_calls", LockSuffix: " FOR UPDATE"}

type pgRows struct{ pgx.Rows }

func (r pgRows) Close() { r.Rows.Close() }

type pgTx struct{ tx pgx.Tx }

func (t pgTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t pgTx) Query(ctx context.Context, q string, args ...any) (runsql.Rows, error) {
	rows, err := t.tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

// Lock implements runtimestore.Locker with a session-level advisory lock
// on one pooled connection, held until unlock.
func (s *Store) Lock(ctx context.Context, name string) (func(), error) {
	return pgstore.Acquire(ctx, s.pool, name)
}

// Shared implements runtimestore.Shared: replicas share the database.
func (s *Store) Shared() bool { return true }

func (s *Store) inTx(ctx context.Context, fn func(tx runsql.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(pgTx{tx}) })
}

// StartRun implements runtimestore.RunLeases: the thread row is locked
// (FOR UPDATE), so two replicas starting a run in one thread serialise.
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

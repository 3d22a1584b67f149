// Package runsql is the SQL of run leases and idempotent tool calls shared
// by runtimesqlite and runtimepg (docs/decisions/0081-run-leases.md,
// docs/decisions/0082-idempotent-tool-calls.md): one text per statement,
// written for PostgreSQL, and a small seam — the table names, the row lock
// of the thread and the placeholder style — for each dialect, so the two
// stores do not carry two copies of the same logic.
package runsql

import (
	"context"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Rows is the subset of a result set the statements read.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Tx runs statements inside one transaction of the store.
type Tx interface {
	// Exec runs a statement and returns the rows it affected.
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	// Query runs a query.
	Query(ctx context.Context, q string, args ...any) (Rows, error)
}

// Dialect is what differs between the backends.
type Dialect struct {
	// Runs, Threads and Calls are the qualified table names.
	Runs, Threads, Calls string
	// LockSuffix is appended to the SELECT that reads the thread row in
	// StartRun (" FOR UPDATE" on PostgreSQL; "" on sqlite, whose write
	// transactions are exclusive).
	LockSuffix string
	// Question rewrites $N placeholders as ?N (sqlite).
	Question bool
}

func (d Dialect) q(s string) string {
	s = strings.NewReplacer("{runs}", d.Runs, "{threads}", d.Threads, "{calls}", d.Calls, "{lock}", d.LockSuffix).Replace(s)
	if d.Question {
		s = strings.ReplaceAll(s, "$", "?")
	}
	return s
}

const running = int32(runtimev1.RunStatus_RUN_STATUS_RUNNING)

// StartRun implements runtimestore.RunLeases.StartRun inside tx.
func (d Dialect) StartRun(ctx context.Context, tx Tx, r *runtimev1.Run, l runtimestore.Lease, now time.Time) error {
	rows, err := tx.Query(ctx, d.q(`SELECT 1 FROM {threads} WHERE id = $1{lock}`), r.GetThreadId())
	if err != nil {
		return err
	}
	found := rows.Next()
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if !found {
		return runtimestore.ErrNotFound
	}
	rows, err = tx.Query(ctx, d.q(`SELECT 1 FROM {runs} WHERE thread_id = $1 AND status = $2 AND lease_ns > $3
		AND (run_id <> $4 OR owner <> $5) LIMIT 1`), r.GetThreadId(), running, now.UnixNano(), r.GetRunId(), l.Owner)
	if err != nil {
		return err
	}
	busy := rows.Next()
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if busy {
		return runtimestore.ErrRunBusy
	}
	b, err := proto.Marshal(r)
	if err != nil {
		return err
	}
	start := int64(0)
	if r.GetStartTime() != nil {
		start = r.GetStartTime().AsTime().UnixNano()
	}
	_, err = tx.Exec(ctx, d.q(`INSERT INTO {runs} (run_id, thread_id, status, start_ns, body, owner, lease_ns, cancel_requested)
		VALUES ($1, $2, $3, $4, $5, $6, $7, false)
		ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, start_ns = excluded.start_ns, body = excluded.body,
		owner = excluded.owner, lease_ns = excluded.lease_ns, cancel_requested = false`),
		r.GetRunId(), r.GetThreadId(), int32(r.GetStatus()), start, b, l.Owner, l.Until.UnixNano())
	return err
}

// RenewLeases implements runtimestore.RunLeases.RenewLeases inside tx.
func (d Dialect) RenewLeases(ctx context.Context, tx Tx, owner string, until time.Time) ([]runtimestore.LeasedRun, error) {
	rows, err := tx.Query(ctx, d.q(`UPDATE {runs} SET lease_ns = $1 WHERE owner = $2 AND status = $3
		RETURNING thread_id, run_id, cancel_requested`), until.UnixNano(), owner, running)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []runtimestore.LeasedRun
	for rows.Next() {
		var lr runtimestore.LeasedRun
		if err := rows.Scan(&lr.ThreadID, &lr.RunID, &lr.CancelRequested); err != nil {
			return nil, err
		}
		out = append(out, lr)
	}
	return out, rows.Err()
}

// CancelRequested implements runtimestore.RunLeases.CancelRequested.
func (d Dialect) CancelRequested(ctx context.Context, tx Tx, owner string) ([]runtimestore.RunRef, error) {
	rows, err := tx.Query(ctx, d.q(`SELECT thread_id, run_id FROM {runs} WHERE owner = $1 AND status = $2 AND cancel_requested`), owner, running)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []runtimestore.RunRef
	for rows.Next() {
		var r runtimestore.RunRef
		if err := rows.Scan(&r.ThreadID, &r.RunID); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RequestCancel implements runtimestore.RunLeases.RequestCancel inside tx.
func (d Dialect) RequestCancel(ctx context.Context, tx Tx, threadID, runID string) (string, bool, error) {
	rows, err := tx.Query(ctx, d.q(`SELECT status, owner FROM {runs} WHERE thread_id = $1 AND run_id = $2{lock}`), threadID, runID)
	if err != nil {
		return "", false, err
	}
	var st int32
	var owner string
	found := rows.Next()
	if found {
		err = rows.Scan(&st, &owner)
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return "", false, err
	}
	if !found {
		return "", false, runtimestore.ErrNotFound
	}
	if st != running {
		return owner, false, nil
	}
	_, err = tx.Exec(ctx, d.q(`UPDATE {runs} SET cancel_requested = true WHERE run_id = $1`), runID)
	return owner, err == nil, err
}

// InterruptExpired implements runtimestore.RunLeases.InterruptExpired
// inside tx: the expired rows are read (locked on PostgreSQL), rewritten and
// written back in the same transaction; a row renewed meanwhile is not
// touched (the UPDATE repeats the lease condition).
func (d Dialect) InterruptExpired(ctx context.Context, tx Tx, reason string, now time.Time) (int, error) {
	rows, err := tx.Query(ctx, d.q(`SELECT run_id, body FROM {runs} WHERE status = $1 AND lease_ns < $2{lock}`), running, now.UnixNano())
	if err != nil {
		return 0, err
	}
	type upd struct {
		id string
		b  []byte
	}
	var ups []upd
	for rows.Next() {
		var u upd
		if err := rows.Scan(&u.id, &u.b); err != nil {
			rows.Close()
			return 0, err
		}
		ups = append(ups, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, u := range ups {
		nb, err := runtimestore.Interrupted(u.b, reason, now)
		if err != nil {
			return 0, err
		}
		k, err := tx.Exec(ctx, d.q(`UPDATE {runs} SET status = $1, body = $2 WHERE run_id = $3 AND status = $4 AND lease_ns < $5`),
			int32(runtimev1.RunStatus_RUN_STATUS_INTERRUPTED), nb, u.id, running, now.UnixNano())
		if err != nil {
			return 0, err
		}
		n += int(k)
	}
	return n, nil
}

func (d Dialect) threadExists(ctx context.Context, tx Tx, threadID string) error {
	rows, err := tx.Query(ctx, d.q(`SELECT 1 FROM {threads} WHERE id = $1`), threadID)
	if err != nil {
		return err
	}
	found := rows.Next()
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if !found {
		return runtimestore.ErrNotFound
	}
	return nil
}

// ClaimToolCall implements runtimestore.ToolCalls.ClaimToolCall inside tx.
func (d Dialect) ClaimToolCall(ctx context.Context, tx Tx, threadID, callID, fingerprint string, l runtimestore.Lease, now time.Time) (bool, runtimestore.ToolCall, error) {
	if err := d.threadExists(ctx, tx, threadID); err != nil {
		return false, runtimestore.ToolCall{}, err
	}
	n, err := tx.Exec(ctx, d.q(`INSERT INTO {calls} (thread_id, call_id, state, fingerprint, owner, lease_ns, create_ns)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (thread_id, call_id) DO NOTHING`),
		threadID, callID, int32(runtimestore.CallRunning), fingerprint, l.Owner, l.Until.UnixNano(), now.UnixNano())
	if err != nil || n == 1 {
		return n == 1, runtimestore.ToolCall{}, err
	}
	c, err := d.GetToolCall(ctx, tx, threadID, callID)
	return false, c, err
}

// GetToolCall implements runtimestore.ToolCalls.GetToolCall.
func (d Dialect) GetToolCall(ctx context.Context, tx Tx, threadID, callID string) (runtimestore.ToolCall, error) {
	rows, err := tx.Query(ctx, d.q(`SELECT state, fingerprint, owner, lease_ns, result FROM {calls} WHERE thread_id = $1 AND call_id = $2`), threadID, callID)
	if err != nil {
		return runtimestore.ToolCall{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return runtimestore.ToolCall{}, err
		}
		return runtimestore.ToolCall{}, runtimestore.ErrNotFound
	}
	var c runtimestore.ToolCall
	var st int32
	var until int64
	if err := rows.Scan(&st, &c.Fingerprint, &c.Lease.Owner, &until, &c.Result); err != nil {
		return c, err
	}
	c.State, c.Lease.Until = runtimestore.CallState(st), time.Unix(0, until)
	return c, rows.Err()
}

// SettleToolCall implements runtimestore.ToolCalls.SettleToolCall inside tx.
func (d Dialect) SettleToolCall(ctx context.Context, tx Tx, threadID, callID string, result []byte, now time.Time) (runtimestore.ToolCall, error) {
	if _, err := tx.Exec(ctx, d.q(`UPDATE {calls} SET state = $1, result = $2 WHERE thread_id = $3 AND call_id = $4 AND state = $5 AND lease_ns < $6`),
		int32(runtimestore.CallDone), result, threadID, callID, int32(runtimestore.CallRunning), now.UnixNano()); err != nil {
		return runtimestore.ToolCall{}, err
	}
	return d.GetToolCall(ctx, tx, threadID, callID)
}

// ReleaseToolCall implements runtimestore.ToolCalls.ReleaseToolCall.
func (d Dialect) ReleaseToolCall(ctx context.Context, tx Tx, threadID, callID, owner string) error {
	_, err := tx.Exec(ctx, d.q(`DELETE FROM {calls} WHERE thread_id = $1 AND call_id = $2 AND state = $3 AND owner = $4`),
		threadID, callID, int32(runtimestore.CallRunning), owner)
	return err
}

// PurgeToolCallsBefore implements runtimestore.ToolCalls.PurgeToolCallsBefore.
func (d Dialect) PurgeToolCallsBefore(ctx context.Context, tx Tx, t time.Time) (int, error) {
	n, err := tx.Exec(ctx, d.q(`DELETE FROM {calls} WHERE create_ns < $1`), t.UnixNano())
	return int(n), err
}

// RecordSQL is the statement UpdateThread runs under
// runtimestore.WithCallResult (arguments: result, thread id, call id).
func (d Dialect) RecordSQL() string {
	return d.q(`UPDATE {calls} SET state = 2, result = $1 WHERE thread_id = $2 AND call_id = $3`)
}

// EndRunUnlessLeased implements runtimestore.RunLeases.EndRunUnlessLeased
// inside tx: one conditional UPDATE.
func (d Dialect) EndRunUnlessLeased(ctx context.Context, tx Tx, r *runtimev1.Run, now time.Time) (bool, error) {
	b, err := proto.Marshal(r)
	if err != nil {
		return false, err
	}
	n, err := tx.Exec(ctx, d.q(`UPDATE {runs} SET status = $1, body = $2 WHERE thread_id = $3 AND run_id = $4 AND NOT (status = $5 AND lease_ns > $6)`),
		int32(r.GetStatus()), b, r.GetThreadId(), r.GetRunId(), running, now.UnixNano())
	if err != nil || n == 1 {
		return n == 1, err
	}
	rows, err := tx.Query(ctx, d.q(`SELECT 1 FROM {runs} WHERE thread_id = $1 AND run_id = $2`), r.GetThreadId(), r.GetRunId())
	if err != nil {
		return false, err
	}
	found := rows.Next()
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	if !found {
		return false, runtimestore.ErrNotFound
	}
	return false, nil
}

// SetEventSeq implements runtimestore.RunLeases.SetEventSeq inside tx.
func (d Dialect) SetEventSeq(ctx context.Context, tx Tx, threadID, runID string, seq int64) error {
	n, err := tx.Exec(ctx, d.q(`UPDATE {runs} SET event_seq = $1 WHERE thread_id = $2 AND run_id = $3`), seq, threadID, runID)
	if err != nil {
		return err
	}
	if n == 0 {
		return runtimestore.ErrNotFound
	}
	return nil
}

// EventSeq implements runtimestore.RunLeases.EventSeq inside tx.
func (d Dialect) EventSeq(ctx context.Context, tx Tx, threadID, runID string) (int64, error) {
	rows, err := tx.Query(ctx, d.q(`SELECT event_seq FROM {runs} WHERE thread_id = $1 AND run_id = $2`), threadID, runID)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, err
		}
		return 0, runtimestore.ErrNotFound
	}
	var seq int64
	if err := rows.Scan(&seq); err != nil {
		return 0, err
	}
	return seq, rows.Err()
}

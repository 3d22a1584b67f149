// Package runtimepg is the runtime's PostgreSQL store (pgx/v5, pgxpool) in
// the schema "runtime" of the storage.dsn database; migrations are embedded
// and applied at Open under the schema's advisory lock (internal/pgstore).
// It stores what runtimesqlite stores — threads (with promotions, read
// marks, artifacts, the subagent marker), messages, events, runs and custom
// agents — and passes the same conformance suite (runtimetest).
//
// UpdateThread reads the thread with SELECT ... FOR UPDATE, applies the
// caller's mutation (the promotion reducer runtimestore.MergePromoted among
// them) and writes it back with the appended messages in the same
// transaction: concurrent updates of one thread serialise on its row lock,
// from any number of processes, and none is lost. AppendMessages takes the
// same lock, so a thread's message sequence numbers follow commit order
// and paging by sequence never skips a message
// (docs/decisions/0080-postgresql-stores.md).
package runtimepg

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Schema is the PostgreSQL schema of the runtime's tables.
const Schema = "runtime"

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

// Store implements runtimestore.Store on PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
}

var _ runtimestore.Store = (*Store)(nil)

// Open migrates the runtime schema (creating it when missing) and returns
// the store over pool. The pool stays the caller's: Close does not close it.
func Open(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if err := pgstore.Migrate(ctx, pool, Schema, Migrations()); err != nil {
		return nil, err
	}
	return &Store{pool: pool}, nil
}

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Close implements runtimestore.Store; the pool is not closed.
func (s *Store) Close() error { return nil }

func ns(ts *timestamppb.Timestamp) int64 {
	if ts == nil {
		return 0
	}
	return ts.AsTime().UnixNano()
}

// childRow is the JSON form of runtimestore.Child (the agent override as
// protobuf bytes, base64 in JSON) — the layout runtimesqlite uses.
type childRow struct {
	ParentThreadID string `json:"parent_thread_id"`
	ParentRunID    string `json:"parent_run_id,omitempty"`
	SubagentType   string `json:"subagent_type,omitempty"`
	Agent          []byte `json:"agent,omitempty"`
}

func encodeChild(c *runtimestore.Child) (string, any, error) {
	if c == nil {
		return "", nil, nil
	}
	if c.ParentThreadID == "" {
		return "", nil, errors.New("runtimepg: child thread without parent_thread_id")
	}
	r := childRow{ParentThreadID: c.ParentThreadID, ParentRunID: c.ParentRunID, SubagentType: c.SubagentType}
	if c.Agent != nil {
		b, err := proto.Marshal(c.Agent)
		if err != nil {
			return "", nil, err
		}
		r.Agent = b
	}
	j, err := json.Marshal(r)
	return c.ParentThreadID, string(j), err
}

func decodeThread(state []byte, marks map[string]string, child []byte) (*runtimestore.Thread, error) {
	p := &runtimev1.Thread{}
	if err := proto.Unmarshal(state, p); err != nil {
		return nil, fmt.Errorf("runtimepg: thread state: %w", err)
	}
	if marks == nil {
		marks = map[string]string{}
	}
	t := &runtimestore.Thread{Proto: p, ReadMarks: marks}
	if len(child) > 0 {
		var r childRow
		if err := json.Unmarshal(child, &r); err != nil {
			return nil, fmt.Errorf("runtimepg: child: %w", err)
		}
		t.Child = &runtimestore.Child{ParentThreadID: r.ParentThreadID, ParentRunID: r.ParentRunID, SubagentType: r.SubagentType}
		if r.Agent != nil {
			t.Child.Agent = &runtimev1.Agent{}
			if err := proto.Unmarshal(r.Agent, t.Child.Agent); err != nil {
				return nil, fmt.Errorf("runtimepg: child agent: %w", err)
			}
		}
	}
	return t, nil
}

func marksOf(t *runtimestore.Thread) map[string]string {
	if t.ReadMarks == nil {
		return map[string]string{}
	}
	return t.ReadMarks
}

// CreateThread implements runtimestore.Store.
func (s *Store) CreateThread(ctx context.Context, t *runtimestore.Thread) error {
	state, err := proto.Marshal(t.Proto)
	if err != nil {
		return err
	}
	parent, child, err := encodeChild(t.Child)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO runtime.threads (id, owner_tenant, owner_subject, create_ns, update_ns, state, read_marks, parent_id, child)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		t.Proto.GetThreadId(), t.Proto.GetOwnerTenant(), t.Proto.GetOwnerSubject(), ns(t.Proto.GetCreateTime()), ns(t.Proto.GetUpdateTime()),
		state, marksOf(t), parent, child)
	if pgstore.IsUniqueViolation(err) {
		return fmt.Errorf("%w: thread %s", runtimestore.ErrExists, t.Proto.GetThreadId())
	}
	return err
}

func getThread(ctx context.Context, q pgx.Tx, pool *pgxpool.Pool, id string, forUpdate bool) (*runtimestore.Thread, error) {
	sql := `SELECT state, read_marks, child FROM runtime.threads WHERE id = $1`
	var row pgx.Row
	if forUpdate {
		row = q.QueryRow(ctx, sql+` FOR UPDATE`, id)
	} else {
		row = pool.QueryRow(ctx, sql, id)
	}
	var state, child []byte
	var marks map[string]string
	if err := row.Scan(&state, &marks, &child); errors.Is(err, pgx.ErrNoRows) {
		return nil, runtimestore.ErrNotFound
	} else if err != nil {
		return nil, err
	}
	return decodeThread(state, marks, child)
}

// GetThread implements runtimestore.Store.
func (s *Store) GetThread(ctx context.Context, id string) (*runtimestore.Thread, error) {
	return getThread(ctx, nil, s.pool, id, false)
}

// ListThreads implements runtimestore.Store. The page token is
// "<create_ns>:<id>" of the last row returned (keyset pagination).
func (s *Store) ListThreads(ctx context.Context, tenant, subject string, p runtimestore.Page) ([]*runtimestore.Thread, string, error) {
	q := `SELECT id, create_ns, state, read_marks FROM runtime.threads WHERE owner_tenant = $1 AND owner_subject = $2 AND parent_id = ''`
	args := []any{tenant, subject}
	if p.Token != "" {
		c, id, ok := strings.Cut(p.Token, ":")
		cn, err := strconv.ParseInt(c, 10, 64)
		if !ok || err != nil {
			return nil, "", fmt.Errorf("runtimepg: bad page token")
		}
		q += ` AND (create_ns, id) < ($3, $4)`
		args = append(args, cn, id)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	q += fmt.Sprintf(` ORDER BY create_ns DESC, id DESC LIMIT $%d`, len(args)+1)
	args = append(args, limit+1)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []*runtimestore.Thread
	var lastKey string
	for rows.Next() {
		var id string
		var cns int64
		var state []byte
		var marks map[string]string
		if err := rows.Scan(&id, &cns, &state, &marks); err != nil {
			return nil, "", err
		}
		if len(out) == limit {
			return out, lastKey, nil
		}
		t, err := decodeThread(state, marks, nil)
		if err != nil {
			return nil, "", err
		}
		out = append(out, t)
		lastKey = strconv.FormatInt(cns, 10) + ":" + id
	}
	return out, "", rows.Err()
}

// UpdateThread implements runtimestore.Store: the locked read, fn and the
// write (with appended messages) happen in one transaction.
func (s *Store) UpdateThread(ctx context.Context, id string, fn runtimestore.Update) (*runtimestore.Thread, error) {
	var out *runtimestore.Thread
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := getThread(ctx, tx, nil, id, true)
		if err != nil {
			return err
		}
		msgs, err := fn(t)
		if err != nil {
			return err
		}
		if runtimestore.Touches(ctx) {
			t.Proto.UpdateTime = timestamppb.Now()
		}
		runtimestore.SyncReadFiles(t)
		state, err := proto.Marshal(t.Proto)
		if err != nil {
			return err
		}
		// The write and the appended messages go in one round trip: the row
		// lock is held for as few as possible.
		b := &pgx.Batch{}
		b.Queue(`UPDATE runtime.threads SET state = $1, read_marks = $2, update_ns = $3 WHERE id = $4`,
			state, marksOf(t), ns(t.Proto.UpdateTime), id)
		if err := queueMessages(b, id, msgs); err != nil {
			return err
		}
		if r, ok := runtimestore.CallResultOf(ctx); ok {
			b.Queue(dialect.RecordSQL(), r.Result, id, r.CallID)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func appendMessages(ctx context.Context, tx pgx.Tx, threadID string, msgs []*runtimev1.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if err := queueMessages(b, threadID, msgs); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

// queueMessages queues the inserts of msgs (ids and times filled) on b.
func queueMessages(b *pgx.Batch, threadID string, msgs []*runtimev1.Message) error {
	for _, m := range msgs {
		c := proto.Clone(m).(*runtimev1.Message)
		runtimestore.FillMessage(c)
		body, err := proto.Marshal(c)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO runtime.messages (thread_id, body, create_ns, role) VALUES ($1, $2, $3, $4)`, threadID, body, ns(c.GetCreateTime()), int32(c.GetRole()))
	}
	return nil
}

// ChildThreads implements runtimestore.Store.
func (s *Store) ChildThreads(ctx context.Context, parentID string) ([]string, error) {
	if parentID == "" {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM runtime.threads WHERE parent_id = $1 ORDER BY id`, parentID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// DeleteThread implements runtimestore.Store (messages, events and runs
// cascade).
func (s *Store) DeleteThread(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM runtime.threads WHERE id = $1`, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return runtimestore.ErrNotFound
	}
	return nil
}

// lockThread takes the thread's row lock, or returns ErrNotFound.
func lockThread(ctx context.Context, tx pgx.Tx, id string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM runtime.threads WHERE id = $1 FOR UPDATE`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return runtimestore.ErrNotFound
	}
	return err
}

// AppendMessages implements runtimestore.Store.
func (s *Store) AppendMessages(ctx context.Context, threadID string, msgs ...*runtimev1.Message) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockThread(ctx, tx, threadID); err != nil {
			return err
		}
		return appendMessages(ctx, tx, threadID, msgs)
	})
}

// ListMessages implements runtimestore.Store; the page token is the last seq.
func (s *Store) ListMessages(ctx context.Context, threadID string, p runtimestore.Page) ([]*runtimev1.Message, string, error) {
	after := int64(0)
	if p.Token != "" {
		v, err := strconv.ParseInt(p.Token, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("runtimepg: bad page token")
		}
		after = v
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, body FROM runtime.messages WHERE thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, threadID, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []*runtimev1.Message
	var last int64
	for rows.Next() {
		var seq int64
		var b []byte
		if err := rows.Scan(&seq, &b); err != nil {
			return nil, "", err
		}
		if len(out) == limit {
			return out, strconv.FormatInt(last, 10), nil
		}
		m := &runtimev1.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			return nil, "", err
		}
		out = append(out, m)
		last = seq
	}
	return out, "", rows.Err()
}

// AppendEvent implements runtimestore.Store.
func (s *Store) AppendEvent(ctx context.Context, e runtimestore.Event) error {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO runtime.events (thread_id, kind, detail, time_ns) VALUES ($1, $2, $3, $4)`, e.ThreadID, e.Kind, e.Detail, e.Time.UnixNano())
	if pgstore.IsForeignKeyViolation(err) {
		return runtimestore.ErrNotFound
	}
	return err
}

// ListEvents implements runtimestore.Store.
func (s *Store) ListEvents(ctx context.Context, threadID string) ([]runtimestore.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, kind, detail, time_ns FROM runtime.events WHERE thread_id = $1 ORDER BY seq`, threadID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []runtimestore.Event
	for rows.Next() {
		e := runtimestore.Event{ThreadID: threadID}
		var tns int64
		if err := rows.Scan(&e.Seq, &e.Kind, &e.Detail, &tns); err != nil {
			return nil, err
		}
		e.Time = time.Unix(0, tns)
		out = append(out, e)
	}
	return out, rows.Err()
}

// PutRun implements runtimestore.Store.
func (s *Store) PutRun(ctx context.Context, r *runtimev1.Run) error {
	b, err := proto.Marshal(r)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO runtime.runs (run_id, thread_id, status, start_ns, body) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, start_ns = excluded.start_ns, body = excluded.body`,
		r.GetRunId(), r.GetThreadId(), int32(r.GetStatus()), ns(r.GetStartTime()), b)
	if pgstore.IsForeignKeyViolation(err) {
		return runtimestore.ErrNotFound
	}
	return err
}

func decodeRun(b []byte) (*runtimev1.Run, error) {
	r := &runtimev1.Run{}
	return r, proto.Unmarshal(b, r)
}

// GetRun implements runtimestore.Store.
func (s *Store) GetRun(ctx context.Context, threadID, runID string) (*runtimev1.Run, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT body FROM runtime.runs WHERE thread_id = $1 AND run_id = $2`, threadID, runID).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, runtimestore.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return decodeRun(b)
}

// ListRuns implements runtimestore.Store.
func (s *Store) ListRuns(ctx context.Context, threadID string) ([]*runtimev1.Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT body FROM runtime.runs WHERE thread_id = $1 ORDER BY start_ns DESC, ins DESC`, threadID)
	if err != nil {
		return nil, err
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, err
	}
	out := make([]*runtimev1.Run, 0, len(bodies))
	for _, b := range bodies {
		r, err := decodeRun(b)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// InterruptUnfinished implements runtimestore.Store: the RUNNING runs are
// locked, rewritten and committed in one transaction.
func (s *Store) InterruptUnfinished(ctx context.Context, reason string, now time.Time) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT run_id, body FROM runtime.runs WHERE status = $1 FOR UPDATE`, int32(runtimev1.RunStatus_RUN_STATUS_RUNNING))
		if err != nil {
			return err
		}
		type upd struct {
			id string
			b  []byte
		}
		var ups []upd
		for rows.Next() {
			var id string
			var b []byte
			if err := rows.Scan(&id, &b); err != nil {
				rows.Close()
				return err
			}
			r, err := decodeRun(b)
			if err != nil {
				rows.Close()
				return err
			}
			r.Status = runtimev1.RunStatus_RUN_STATUS_INTERRUPTED
			r.Reason = reason
			r.EndTime = timestamppb.New(now)
			nb, err := proto.Marshal(r)
			if err != nil {
				rows.Close()
				return err
			}
			ups = append(ups, upd{id, nb})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, u := range ups {
			if _, err := tx.Exec(ctx, `UPDATE runtime.runs SET status = $1, body = $2 WHERE run_id = $3`, int32(runtimev1.RunStatus_RUN_STATUS_INTERRUPTED), u.b, u.id); err != nil {
				return err
			}
		}
		n = len(ups)
		return nil
	})
	return n, err
}

// PutAgent implements runtimestore.Store.
func (s *Store) PutAgent(ctx context.Context, a *runtimev1.Agent) error {
	b, err := proto.Marshal(a)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO runtime.agents (name, body) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET body = excluded.body`, a.GetName(), b)
	return err
}

// GetAgent implements runtimestore.Store.
func (s *Store) GetAgent(ctx context.Context, name string) (*runtimev1.Agent, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT body FROM runtime.agents WHERE name = $1`, name).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, runtimestore.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	a := &runtimev1.Agent{}
	return a, proto.Unmarshal(b, a)
}

// ListAgents implements runtimestore.Store.
func (s *Store) ListAgents(ctx context.Context) ([]*runtimev1.Agent, error) {
	rows, err := s.pool.Query(ctx, `SELECT body FROM runtime.agents ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, err
	}
	out := make([]*runtimev1.Agent, 0, len(bodies))
	for _, b := range bodies {
		a := &runtimev1.Agent{}
		if err := proto.Unmarshal(b, a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// DeleteAgent implements runtimestore.Store.
func (s *Store) DeleteAgent(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM runtime.agents WHERE name = $1`, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return runtimestore.ErrNotFound
	}
	return nil
}

// PurgeRunsBefore implements runtimestore.Store.
func (s *Store) PurgeRunsBefore(ctx context.Context, t time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM runtime.runs WHERE start_ns < $1 AND status NOT IN ($2, $3)`, t.UnixNano(),
		int32(runtimev1.RunStatus_RUN_STATUS_RUNNING), int32(runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT))
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// purgeMessages is the turn rule of runtimestore.CutTurns in one
// statement: per thread with a message before the cutoff, k is its first
// message at or after the cutoff and b the last USER message at or before
// k; everything goes when there is no k, everything before b when there is
// a b, nothing otherwise.
const purgeMessages = `
WITH old AS (
  SELECT DISTINCT thread_id FROM runtime.messages WHERE create_ns < $1
), cut AS (
  SELECT o.thread_id, k.k,
    (SELECT max(m.seq) FROM runtime.messages m WHERE m.thread_id = o.thread_id AND m.seq <= k.k AND m.role = $2) AS b
  FROM old o
  CROSS JOIN LATERAL (SELECT min(m.seq) AS k FROM runtime.messages m WHERE m.thread_id = o.thread_id AND m.create_ns >= $1) k
)
DELETE FROM runtime.messages m USING cut
WHERE m.thread_id = cut.thread_id AND (cut.k IS NULL OR (cut.b IS NOT NULL AND m.seq < cut.b))`

// PurgeMessagesBefore implements runtimestore.Store.
func (s *Store) PurgeMessagesBefore(ctx context.Context, t time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, purgeMessages, t.UnixNano(), int32(runtimev1.MessageRole_MESSAGE_ROLE_USER))
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// IdleThreads implements runtimestore.IdleThreadScanner.
func (s *Store) IdleThreads(ctx context.Context, t time.Time, after string, limit int) ([]*runtimestore.Thread, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := s.pool.Query(ctx, `SELECT state, read_marks, child FROM runtime.threads WHERE update_ns < $1 AND id > $2 ORDER BY id LIMIT $3`, t.UnixNano(), after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*runtimestore.Thread
	for rows.Next() {
		var state, child []byte
		var marks map[string]string
		if err := rows.Scan(&state, &marks, &child); err != nil {
			return nil, err
		}
		th, err := decodeThread(state, marks, child)
		if err != nil {
			return nil, err
		}
		out = append(out, th)
	}
	return out, rows.Err()
}

// PurgeThreadsBefore implements runtimestore.Store.
func (s *Store) PurgeThreadsBefore(ctx context.Context, t time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `DELETE FROM runtime.threads WHERE update_ns < $1 RETURNING id`, t.UnixNano())
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

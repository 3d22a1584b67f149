// Package runtimesqlite is the runtime's sqlite store (internal/sqlitex:
// WAL, immediate write transactions, embedded migrations) in
// <data dir>/runtime.db. Thread state is kept as one protobuf blob per
// thread so that UpdateThread is a read-modify-write inside one immediate
// write transaction: concurrent updates (e.g. parallel tool_search
// promotions) serialise and none is lost.
package runtimesqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/sqlitex"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Store implements runtimestore.Store on sqlite.
type Store struct {
	db *sqlitex.DB
}

var _ runtimestore.Store = (*Store)(nil)

// Open opens (creating and migrating) the store at path.
func Open(path string) (*Store, error) {
	sub, err := fs.Sub(migrationsFS, "migrations")
	if err != nil {
		return nil, err
	}
	db, err := sqlitex.Open(path, sub)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db}
	if err := s.fillMessageColumns(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("runtimesqlite: fill message columns: %w", err)
	}
	return s, nil
}

// fillMessageColumns sets create_ns and role of messages written before
// migration 003 from their bodies, 500 rows per transaction.
func (s *Store) fillMessageColumns(ctx context.Context) error {
	for {
		n := 0
		err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, `SELECT seq, body FROM messages WHERE create_ns < 0 LIMIT 500`)
			if err != nil {
				return err
			}
			type row struct {
				seq  int64
				body []byte
			}
			var todo []row
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.seq, &r.body); err != nil {
					rows.Close()
					return err
				}
				todo = append(todo, r)
			}
			rows.Close()
			for _, r := range todo {
				m := &runtimev1.Message{}
				if err := proto.Unmarshal(r.body, m); err != nil {
					return fmt.Errorf("message %d: %w", r.seq, err)
				}
				if _, err := tx.ExecContext(ctx, `UPDATE messages SET create_ns = ?, role = ? WHERE seq = ?`, max(ns(m.GetCreateTime()), 0), int32(m.GetRole()), r.seq); err != nil {
					return err
				}
			}
			n = len(todo)
			return nil
		})
		if err != nil || n == 0 {
			return err
		}
	}
}

// Ping checks the store answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

// Close implements runtimestore.Store.
func (s *Store) Close() error { return s.db.Close() }

func ns(ts *timestamppb.Timestamp) int64 {
	if ts == nil {
		return 0
	}
	return ts.AsTime().UnixNano()
}

func encodeThread(t *runtimestore.Thread) ([]byte, string, error) {
	b, err := proto.Marshal(t.Proto)
	if err != nil {
		return nil, "", err
	}
	marks := t.ReadMarks
	if marks == nil {
		marks = map[string]string{}
	}
	j, err := json.Marshal(marks)
	return b, string(j), err
}

// childRow is the JSON form of runtimestore.Child (the agent override as
// protobuf bytes).
type childRow struct {
	ParentThreadID string `json:"parent_thread_id"`
	ParentRunID    string `json:"parent_run_id,omitempty"`
	SubagentType   string `json:"subagent_type,omitempty"`
	Agent          []byte `json:"agent,omitempty"`
}

// encodeChild returns the parent_id and child columns.
func encodeChild(c *runtimestore.Child) (string, string, error) {
	if c == nil {
		return "", "", nil
	}
	if c.ParentThreadID == "" {
		return "", "", errors.New("runtimesqlite: child thread without parent_thread_id")
	}
	r := childRow{ParentThreadID: c.ParentThreadID, ParentRunID: c.ParentRunID, SubagentType: c.SubagentType}
	if c.Agent != nil {
		b, err := proto.Marshal(c.Agent)
		if err != nil {
			return "", "", err
		}
		r.Agent = b
	}
	j, err := json.Marshal(r)
	return c.ParentThreadID, string(j), err
}

func decodeThread(state []byte, marks, child string) (*runtimestore.Thread, error) {
	p := &runtimev1.Thread{}
	if err := proto.Unmarshal(state, p); err != nil {
		return nil, fmt.Errorf("runtimesqlite: thread state: %w", err)
	}
	t := &runtimestore.Thread{Proto: p, ReadMarks: map[string]string{}}
	if err := json.Unmarshal([]byte(marks), &t.ReadMarks); err != nil {
		return nil, fmt.Errorf("runtimesqlite: read marks: %w", err)
	}
	if child != "" {
		var r childRow
		if err := json.Unmarshal([]byte(child), &r); err != nil {
			return nil, fmt.Errorf("runtimesqlite: child: %w", err)
		}
		t.Child = &runtimestore.Child{ParentThreadID: r.ParentThreadID, ParentRunID: r.ParentRunID, SubagentType: r.SubagentType}
		if r.Agent != nil {
			t.Child.Agent = &runtimev1.Agent{}
			if err := proto.Unmarshal(r.Agent, t.Child.Agent); err != nil {
				return nil, fmt.Errorf("runtimesqlite: child agent: %w", err)
			}
		}
	}
	return t, nil
}

// CreateThread implements runtimestore.Store.
func (s *Store) CreateThread(ctx context.Context, t *runtimestore.Thread) error {
	state, marks, err := encodeThread(t)
	if err != nil {
		return err
	}
	parent, child, err := encodeChild(t.Child)
	if err != nil {
		return err
	}
	return s.db.WithTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO threads(id, owner_tenant, owner_subject, create_ns, update_ns, state, read_marks, parent_id, child) VALUES (?,?,?,?,?,?,?,?,?)`,
			t.Proto.GetThreadId(), t.Proto.GetOwnerTenant(), t.Proto.GetOwnerSubject(), ns(t.Proto.GetCreateTime()), ns(t.Proto.GetUpdateTime()), state, marks, parent, child)
		if sqlitex.IsConstraint(err) {
			return fmt.Errorf("%w: thread %s", runtimestore.ErrExists, t.Proto.GetThreadId())
		}
		return err
	})
}

type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

func getThread(ctx context.Context, q querier, id string) (*runtimestore.Thread, error) {
	var state []byte
	var marks, child string
	err := q.QueryRowContext(ctx, `SELECT state, read_marks, child FROM threads WHERE id = ?`, id).Scan(&state, &marks, &child)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, runtimestore.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return decodeThread(state, marks, child)
}

// GetThread implements runtimestore.Store.
func (s *Store) GetThread(ctx context.Context, id string) (*runtimestore.Thread, error) {
	return getThread(ctx, prepared{db: s.db}, id)
}

// ListThreads implements runtimestore.Store. The page token is
// "<create_ns>:<id>" of the last row returned (keyset pagination).
func (s *Store) ListThreads(ctx context.Context, tenant, subject string, p runtimestore.Page) ([]*runtimestore.Thread, string, error) {
	q := `SELECT id, create_ns, state, read_marks FROM threads WHERE owner_tenant = ? AND owner_subject = ? AND parent_id = ''`
	args := []any{tenant, subject}
	if p.Token != "" {
		c, id, ok := strings.Cut(p.Token, ":")
		cn, err := strconv.ParseInt(c, 10, 64)
		if !ok || err != nil {
			return nil, "", fmt.Errorf("runtimesqlite: bad page token")
		}
		q += ` AND (create_ns < ? OR (create_ns = ? AND id < ?))`
		args = append(args, cn, cn, id)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	q += ` ORDER BY create_ns DESC, id DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []*runtimestore.Thread
	var lastKey string
	for rows.Next() {
		var id, marks string
		var cns int64
		var state []byte
		if err := rows.Scan(&id, &cns, &state, &marks); err != nil {
			return nil, "", err
		}
		if len(out) == limit {
			return out, lastKey, rows.Err()
		}
		t, err := decodeThread(state, marks, "")
		if err != nil {
			return nil, "", err
		}
		out = append(out, t)
		lastKey = strconv.FormatInt(cns, 10) + ":" + id
	}
	return out, "", rows.Err()
}

// UpdateThread implements runtimestore.Store: the read, fn and the write
// (with appended messages) happen in one immediate write transaction.
func (s *Store) UpdateThread(ctx context.Context, id string, fn runtimestore.Update) (*runtimestore.Thread, error) {
	var out *runtimestore.Thread
	err := s.db.WithTx(ctx, func(sqlTx *sql.Tx) error {
		tx := prepared{s.db, sqlTx}
		t, err := getThread(ctx, tx, id)
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
		state, marks, err := encodeThread(t)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE threads SET state = ?, read_marks = ?, update_ns = ? WHERE id = ?`, state, marks, ns(t.Proto.UpdateTime), id); err != nil {
			return err
		}
		if err := appendMessages(ctx, tx, id, msgs); err != nil {
			return err
		}
		if r, ok := runtimestore.CallResultOf(ctx); ok {
			if _, err := tx.ExecContext(ctx, dialect.RecordSQL(), r.Result, id, r.CallID); err != nil {
				return err
			}
		}
		out = t
		return nil
	})
	return out, err
}

func appendMessages(ctx context.Context, tx execer, threadID string, msgs []*runtimev1.Message) error {
	for _, m := range msgs {
		c := proto.Clone(m).(*runtimev1.Message)
		runtimestore.FillMessage(c)
		b, err := proto.Marshal(c)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO messages(thread_id, body, create_ns, role) VALUES (?, ?, ?, ?)`, threadID, b, ns(c.GetCreateTime()), int32(c.GetRole())); err != nil {
			return err
		}
	}
	return nil
}

// ChildThreads implements runtimestore.Store.
func (s *Store) ChildThreads(ctx context.Context, parentID string) ([]string, error) {
	if parentID == "" {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM threads WHERE parent_id = ? ORDER BY id`, parentID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// DeleteThread implements runtimestore.Store (messages, events and runs
// cascade).
func (s *Store) DeleteThread(ctx context.Context, id string) error {
	return s.db.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM threads WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return runtimestore.ErrNotFound
		}
		return nil
	})
}

func exists(ctx context.Context, tx *sql.Tx, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return runtimestore.ErrNotFound
	}
	return err
}

// AppendMessages implements runtimestore.Store.
func (s *Store) AppendMessages(ctx context.Context, threadID string, msgs ...*runtimev1.Message) error {
	return s.db.WithTx(ctx, func(tx *sql.Tx) error {
		if err := exists(ctx, tx, threadID); err != nil {
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
			return nil, "", fmt.Errorf("runtimesqlite: bad page token")
		}
		after = v
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, body FROM messages WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?`, threadID, after, limit+1)
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
			return out, strconv.FormatInt(last, 10), rows.Err()
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
	return s.db.WithTx(ctx, func(tx *sql.Tx) error {
		if err := exists(ctx, tx, e.ThreadID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO events(thread_id, kind, detail, time_ns) VALUES (?,?,?,?)`, e.ThreadID, e.Kind, e.Detail, e.Time.UnixNano())
		return err
	})
}

// ListEvents implements runtimestore.Store.
func (s *Store) ListEvents(ctx context.Context, threadID string) ([]runtimestore.Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, kind, detail, time_ns FROM events WHERE thread_id = ? ORDER BY seq`, threadID)
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
	return s.db.WithTx(ctx, func(tx *sql.Tx) error {
		if err := exists(ctx, tx, r.GetThreadId()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO runs(run_id, thread_id, status, start_ns, body) VALUES (?,?,?,?,?)
			ON CONFLICT(run_id) DO UPDATE SET status = excluded.status, start_ns = excluded.start_ns, body = excluded.body`,
			r.GetRunId(), r.GetThreadId(), int32(r.GetStatus()), ns(r.GetStartTime()), b)
		return err
	})
}

// GetRun implements runtimestore.Store.
func (s *Store) GetRun(ctx context.Context, threadID, runID string) (*runtimev1.Run, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, `SELECT body FROM runs WHERE thread_id = ? AND run_id = ?`, threadID, runID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, runtimestore.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	r := &runtimev1.Run{}
	return r, proto.Unmarshal(b, r)
}

// ListRuns implements runtimestore.Store.
func (s *Store) ListRuns(ctx context.Context, threadID string) ([]*runtimev1.Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM runs WHERE thread_id = ? ORDER BY start_ns DESC, rowid DESC`, threadID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*runtimev1.Run
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		r := &runtimev1.Run{}
		if err := proto.Unmarshal(b, r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// InterruptUnfinished implements runtimestore.Store.
func (s *Store) InterruptUnfinished(ctx context.Context, reason string, now time.Time) (int, error) {
	n := 0
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT run_id, body FROM runs WHERE status = ?`, int32(runtimev1.RunStatus_RUN_STATUS_RUNNING))
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
			r := &runtimev1.Run{}
			if err := proto.Unmarshal(b, r); err != nil {
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
		for _, u := range ups {
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, body = ? WHERE run_id = ?`, int32(runtimev1.RunStatus_RUN_STATUS_INTERRUPTED), u.b, u.id); err != nil {
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
	return s.db.WithTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO agents(name, body) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET body = excluded.body`, a.GetName(), b)
		return err
	})
}

// GetAgent implements runtimestore.Store.
func (s *Store) GetAgent(ctx context.Context, name string) (*runtimev1.Agent, error) {
	var b []byte
	err := prepared{db: s.db}.QueryRowContext(ctx, `SELECT body FROM agents WHERE name = ?`, name).Scan(&b) // on every tool call
	if errors.Is(err, sql.ErrNoRows) {
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
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM agents ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*runtimev1.Agent
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		a := &runtimev1.Agent{}
		if err := proto.Unmarshal(b, a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// DeleteAgent implements runtimestore.Store.
func (s *Store) DeleteAgent(ctx context.Context, name string) error {
	return s.db.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM agents WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return runtimestore.ErrNotFound
		}
		return nil
	})
}

// PurgeRunsBefore implements runtimestore.Store.
func (s *Store) PurgeRunsBefore(ctx context.Context, t time.Time) (int, error) {
	var n int64
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE start_ns < ? AND status NOT IN (?, ?)`, t.UnixNano(),
			int32(runtimev1.RunStatus_RUN_STATUS_RUNNING), int32(runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// PurgeMessagesBefore implements runtimestore.Store (the turn rule of
// runtimestore.CutTurns, in SQL).
func (s *Store) PurgeMessagesBefore(ctx context.Context, t time.Time) (int, error) {
	var n int64
	cut := t.UnixNano()
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		n = 0
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT thread_id FROM messages WHERE create_ns < ?`, cut)
		if err != nil {
			return err
		}
		var threads []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			threads = append(threads, id)
		}
		rows.Close()
		for _, id := range threads {
			var k, b sql.NullInt64
			if err := tx.QueryRowContext(ctx, `SELECT MIN(seq) FROM messages WHERE thread_id = ? AND create_ns >= ?`, id, cut).Scan(&k); err != nil {
				return err
			}
			var res sql.Result
			if !k.Valid {
				res, err = tx.ExecContext(ctx, `DELETE FROM messages WHERE thread_id = ?`, id)
			} else {
				if err := tx.QueryRowContext(ctx, `SELECT MAX(seq) FROM messages WHERE thread_id = ? AND seq <= ? AND role = ?`, id, k.Int64, int32(runtimev1.MessageRole_MESSAGE_ROLE_USER)).Scan(&b); err != nil {
					return err
				}
				if !b.Valid {
					continue
				}
				res, err = tx.ExecContext(ctx, `DELETE FROM messages WHERE thread_id = ? AND seq < ?`, id, b.Int64)
			}
			if err != nil {
				return err
			}
			d, _ := res.RowsAffected()
			n += d
		}
		return nil
	})
	return int(n), err
}

// IdleThreads implements runtimestore.IdleThreadScanner.
func (s *Store) IdleThreads(ctx context.Context, t time.Time, after string, limit int) ([]*runtimestore.Thread, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := s.db.QueryContext(ctx, `SELECT state, read_marks, child FROM threads WHERE update_ns < ? AND id > ? ORDER BY id LIMIT ?`, t.UnixNano(), after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*runtimestore.Thread
	for rows.Next() {
		var state []byte
		var marks, child string
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
	var ids []string
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM threads WHERE update_ns < ? ORDER BY id`, t.UnixNano())
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		_, err = tx.ExecContext(ctx, `DELETE FROM threads WHERE update_ns < ?`, t.UnixNano())
		return err
	})
	return ids, err
}

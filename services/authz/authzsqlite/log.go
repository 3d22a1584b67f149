package authzsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

// Kind is the kind of a decision record.
type Kind int

// Kinds of decision records (authz.proto DecisionKind).
const (
	KindAuthorize Kind = 1 // one Authorize decision
	KindFilter    Kind = 2 // one summary per FilterResources call
)

// CallContext is the trusted call context kept with a record.
type CallContext struct {
	Agent      string `json:"agent,omitempty"`
	IsSubagent bool   `json:"is_subagent,omitempty"`
	ThreadID   string `json:"thread_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// DecisionRecord is one entry of the append-only decision log.
type DecisionRecord struct {
	Seq            int64                `json:"-"` // store sequence (set when read)
	ID             string               `json:"id"`
	Kind           Kind                 `json:"kind"`
	Time           time.Time            `json:"time"`
	Tenant         string               `json:"tenant"`
	Subject        string               `json:"subject"`
	Roles          []string             `json:"roles,omitempty"`
	Attributes     map[string]string    `json:"attributes,omitempty"`
	Resource       string               `json:"resource"`
	Action         string               `json:"action"`
	Target         string               `json:"target,omitempty"`
	CallContext    *CallContext         `json:"call_context,omitempty"`
	Input          map[string]any       `json:"input,omitempty"` // bounded copy (see BoundInput)
	Allow          bool                 `json:"allow"`
	Reasons        []authzcasbin.Reason `json:"reasons,omitempty"`
	PolicyID       string               `json:"policy_id,omitempty"`
	PolicyVersion  int64                `json:"policy_version"`
	CandidateCount int                  `json:"candidate_count,omitempty"`
	AllowedCount   int                  `json:"allowed_count,omitempty"`
	Denied         []string             `json:"denied,omitempty"`
}

func insertDecisions(ctx context.Context, tx *sql.Tx, recs []*DecisionRecord, bodies [][]byte) error {
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO decisions (id, kind, time_ns, tenant, subject, resource, allow, policy_version, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i, r := range recs {
		var body []byte
		if bodies != nil {
			body = bodies[i]
		} else if body, err = json.Marshal(r); err != nil {
			return fmt.Errorf("decision %s: %w", r.ID, err)
		}
		allow := 0
		if r.Allow {
			allow = 1
		}
		if _, err := stmt.ExecContext(ctx, r.ID, int(r.Kind), r.Time.UnixNano(), r.Tenant, r.Subject, r.Resource, allow, r.PolicyVersion, string(body)); err != nil {
			return fmt.Errorf("decision %s: %w", r.ID, err)
		}
	}
	return nil
}

// AppendDecisions writes records in one transaction.
func (s *Store) AppendDecisions(ctx context.Context, recs []*DecisionRecord) error {
	return s.db.WithTx(ctx, func(tx *sql.Tx) error { return insertDecisions(ctx, tx, recs, nil) })
}

// Filter selects decision records. Tenant is required (the log is
// tenant-scoped); the other fields are optional.
type Filter struct {
	Tenant   string
	Subject  string
	Allow    *bool
	Resource string
	Kind     Kind
	Since    time.Time
}

// ListDecisions returns up to limit records matching f, newest first, with
// sequence numbers below before (0 = from the newest), and the sequence to
// pass as before for the next page (0 on the last page).
func (s *Store) ListDecisions(ctx context.Context, f Filter, limit int, before int64) ([]*DecisionRecord, int64, error) {
	if f.Tenant == "" {
		return nil, 0, errors.New("authz store: decisions filter needs a tenant")
	}
	q := strings.Builder{}
	q.WriteString(`SELECT seq, record FROM decisions WHERE tenant = ?`)
	args := []any{f.Tenant}
	if before > 0 {
		q.WriteString(` AND seq < ?`)
		args = append(args, before)
	}
	if f.Subject != "" {
		q.WriteString(` AND subject = ?`)
		args = append(args, f.Subject)
	}
	if f.Allow != nil {
		q.WriteString(` AND allow = ?`)
		if *f.Allow {
			args = append(args, 1)
		} else {
			args = append(args, 0)
		}
	}
	if f.Resource != "" {
		q.WriteString(` AND resource = ?`)
		args = append(args, f.Resource)
	}
	if f.Kind != 0 {
		q.WriteString(` AND kind = ?`)
		args = append(args, int(f.Kind))
	}
	if !f.Since.IsZero() {
		q.WriteString(` AND time_ns >= ?`)
		args = append(args, f.Since.UnixNano())
	}
	q.WriteString(` ORDER BY seq DESC LIMIT ?`)
	args = append(args, limit+1)
	rows, err := s.db.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("authz store: list decisions: %w", err)
	}
	defer rows.Close()
	var out []*DecisionRecord
	for rows.Next() {
		var seq int64
		var body string
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, 0, err
		}
		r := &DecisionRecord{}
		if err := json.Unmarshal([]byte(body), r); err != nil {
			return nil, 0, fmt.Errorf("authz store: decision %d: %w", seq, err)
		}
		r.Seq = seq
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	var next int64
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].Seq
	}
	return out, next, nil
}

// Prune deletes records older than olderThan (zero = no age limit) and then
// all but the newest maxRows records (0 = no row limit). It returns the
// number of records deleted.
func (s *Store) Prune(ctx context.Context, olderThan time.Time, maxRows int64) (int64, error) {
	var n int64
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		n = 0
		if !olderThan.IsZero() {
			res, err := tx.ExecContext(ctx, `DELETE FROM decisions WHERE time_ns < ?`, olderThan.UnixNano())
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += k
		}
		if maxRows > 0 {
			res, err := tx.ExecContext(ctx, `DELETE FROM decisions WHERE seq <= (SELECT seq FROM decisions ORDER BY seq DESC LIMIT 1 OFFSET ?)`, maxRows)
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += k
		}
		return nil
	})
	return n, err
}

// Log writes decision records with group commit: concurrent appends are
// batched into one transaction by a single writer goroutine. Append with
// wait=true returns only after the record's transaction committed (or
// failed), so a deny is durable before Authorize answers.
type Log struct {
	s        *Store
	ch       chan *entry
	maxBatch int
	mu       sync.RWMutex
	closed   bool
	done     chan struct{}
}

type entry struct {
	rec  *DecisionRecord
	body []byte     // JSON of rec, marshalled by the caller (in parallel)
	res  chan error // nil: fire and forget
}

// ErrLogClosed is returned by Append after Close.
var ErrLogClosed = errors.New("decision log closed")

// NewLog starts the log writer; maxBatch bounds one transaction (default 512).
func (s *Store) NewLog(maxBatch int) *Log {
	if maxBatch <= 0 {
		maxBatch = 512
	}
	l := &Log{s: s, ch: make(chan *entry, 4*maxBatch), maxBatch: maxBatch, done: make(chan struct{})}
	go l.run()
	return l
}

// Append queues the record; with wait it blocks until the record is
// committed and returns the commit error. Without wait, a write error is
// lost for this caller (it is still counted by the returned error of a
// waiting caller in the same batch).
func (l *Log) Append(ctx context.Context, rec *DecisionRecord, wait bool) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("decision %s: %w", rec.ID, err)
	}
	e := &entry{rec: rec, body: body}
	if wait {
		e.res = make(chan error, 1)
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrLogClosed
	}
	select {
	case l.ch <- e:
		l.mu.RUnlock()
	case <-ctx.Done():
		l.mu.RUnlock()
		return ctx.Err()
	}
	if !wait {
		return nil
	}
	select {
	case err := <-e.res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Log) run() {
	defer close(l.done)
	batch := make([]*entry, 0, l.maxBatch)
	recs := make([]*DecisionRecord, 0, l.maxBatch)
	bodies := make([][]byte, 0, l.maxBatch)
	for first := range l.ch {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < l.maxBatch {
			select {
			case e, ok := <-l.ch:
				if !ok {
					break drain
				}
				batch = append(batch, e)
			default:
				break drain
			}
		}
		recs, bodies = recs[:0], bodies[:0]
		for _, e := range batch {
			recs = append(recs, e.rec)
			bodies = append(bodies, e.body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := l.s.db.WithTx(ctx, func(tx *sql.Tx) error { return insertDecisions(ctx, tx, recs, bodies) })
		cancel()
		for _, e := range batch {
			if e.res != nil {
				e.res <- err
			}
		}
	}
}

// Close stops accepting records, writes the queued ones and waits for the
// writer to finish.
func (l *Log) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.ch)
	}
	l.mu.Unlock()
	<-l.done
	return nil
}

// BoundInput returns a copy of the input bounded for the log: strings longer
// than maxString bytes are truncated (with a "…" marker), nesting deeper than
// 8 levels is replaced by "…", and once the copy's JSON size passes maxTotal
// bytes the remaining fields are dropped and "_truncated": true is set.
func BoundInput(in map[string]any, maxString, maxTotal int) map[string]any {
	if in == nil {
		return nil
	}
	budget := maxTotal
	out, truncated := boundMap(in, maxString, &budget, 0)
	if truncated {
		out["_truncated"] = true
	}
	return out
}

func boundMap(in map[string]any, maxString int, budget *int, depth int) (map[string]any, bool) {
	out := make(map[string]any, len(in))
	truncated := false
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if *budget <= 0 {
			return out, true
		}
		*budget -= len(k) + 4
		v, t := boundValue(in[k], maxString, budget, depth+1)
		out[k] = v
		truncated = truncated || t
	}
	return out, truncated
}

func boundValue(v any, maxString int, budget *int, depth int) (any, bool) {
	if depth > 8 {
		*budget -= 3
		return "…", true
	}
	switch x := v.(type) {
	case string:
		if len(x) > maxString {
			*budget -= maxString + 3
			return x[:maxString] + "…", true
		}
		*budget -= len(x) + 2
		return x, false
	case map[string]any:
		return boundMap(x, maxString, budget, depth)
	case []any:
		out := make([]any, 0, len(x))
		t := false
		for _, e := range x {
			if *budget <= 0 {
				return out, true
			}
			ev, et := boundValue(e, maxString, budget, depth+1)
			out = append(out, ev)
			t = t || et
		}
		return out, t
	default:
		*budget -= 8
		return x, false
	}
}

package authzsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolplane/toolplane/services/authz/authzstore"
)

func insertDecisions(ctx context.Context, tx *sql.Tx, recs []*authzstore.DecisionRecord) error {
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO decisions (id, kind, time_ns, tenant, subject, resource, allow, policy_version, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, r := range recs {
		body := r.Encoded
		if body == nil {
			if body, err = json.Marshal(r); err != nil {
				return fmt.Errorf("decision %s: %w", r.ID, err)
			}
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
func (s *Store) AppendDecisions(ctx context.Context, recs []*authzstore.DecisionRecord) error {
	return s.db.WithTx(ctx, func(tx *sql.Tx) error { return insertDecisions(ctx, tx, recs) })
}

// ListDecisions returns up to limit records matching f, newest first, with
// sequence numbers below before (0 = from the newest), and the sequence to
// pass as before for the next page (0 on the last page).
func (s *Store) ListDecisions(ctx context.Context, f authzstore.Filter, limit int, before int64) ([]*authzstore.DecisionRecord, int64, error) {
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
	var out []*authzstore.DecisionRecord
	for rows.Next() {
		var seq int64
		var body string
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, 0, err
		}
		r := &authzstore.DecisionRecord{}
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

// Prune applies retention (authzstore.Retention): by age, allows and
// summaries and denies each with their own bound; then per tenant over the
// cap, that tenant's oldest allows and summaries.
func (s *Store) Prune(ctx context.Context, r authzstore.Retention) (int64, error) {
	var n int64
	evictable := fmt.Sprintf("(allow = 1 OR kind = %d)", authzstore.KindFilter)
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		n = 0
		exec := func(q string, args ...any) error {
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += k
			return nil
		}
		if !r.AllowsBefore.IsZero() {
			if err := exec(`DELETE FROM decisions WHERE time_ns < ? AND `+evictable, r.AllowsBefore.UnixNano()); err != nil {
				return err
			}
		}
		if !r.DeniesBefore.IsZero() {
			if err := exec(`DELETE FROM decisions WHERE time_ns < ? AND NOT `+evictable, r.DeniesBefore.UnixNano()); err != nil {
				return err
			}
		}
		if r.MaxRowsPerTenant <= 0 {
			return nil
		}
		rows, err := tx.QueryContext(ctx, `SELECT tenant, COUNT(*) FROM decisions GROUP BY tenant HAVING COUNT(*) > ?`, r.MaxRowsPerTenant)
		if err != nil {
			return err
		}
		over := map[string]int64{}
		for rows.Next() {
			var t string
			var c int64
			if err := rows.Scan(&t, &c); err != nil {
				rows.Close()
				return err
			}
			over[t] = c - r.MaxRowsPerTenant
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for t, excess := range over {
			if err := exec(`DELETE FROM decisions WHERE seq IN (SELECT seq FROM decisions WHERE tenant = ? AND `+evictable+` ORDER BY seq LIMIT ?)`, t, excess); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

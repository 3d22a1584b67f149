package authzpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// AppendDecisions writes records in one transaction (authzstore.Log batches
// concurrent appends into one call). The transaction commits with
// synchronous_commit on whatever the server's default, so a record whose
// Append(wait=true) returned is on the server's WAL: a deny is durable
// before Authorize answers, as with authzsqlite.
func (s *Store) AppendDecisions(ctx context.Context, recs []*authzstore.DecisionRecord) error {
	if len(recs) == 0 {
		return nil
	}
	rows := make([][]any, 0, len(recs))
	for _, r := range recs {
		body := r.Encoded
		if body == nil {
			var err error
			if body, err = json.Marshal(r); err != nil {
				return fmt.Errorf("decision %s: %w", r.ID, err)
			}
		}
		rows = append(rows, []any{r.ID, int32(r.Kind), r.Time.UnixNano(), r.Tenant, r.Subject, r.Resource, r.Allow, r.PolicyVersion, string(body)})
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, r := range rows {
			b.Queue(`INSERT INTO authz.decisions (id, kind, time_ns, tenant, subject, resource, allow, policy_version, record) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)`, r...)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("authz store: append decisions: %w", err)
		}
		return nil
	})
}

// ListDecisions returns up to limit records matching f, newest first, with
// sequence numbers below before (0 = from the newest), and the sequence to
// pass as before for the next page (0 on the last page).
func (s *Store) ListDecisions(ctx context.Context, f authzstore.Filter, limit int, before int64) ([]*authzstore.DecisionRecord, int64, error) {
	if f.Tenant == "" {
		return nil, 0, errors.New("authz store: decisions filter needs a tenant")
	}
	q := strings.Builder{}
	args := []any{f.Tenant}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	q.WriteString(`SELECT seq, record FROM authz.decisions WHERE tenant = $1`)
	if before > 0 {
		q.WriteString(` AND seq < ` + arg(before))
	}
	if f.Subject != "" {
		q.WriteString(` AND subject = ` + arg(f.Subject))
	}
	if f.Allow != nil {
		q.WriteString(` AND allow = ` + arg(*f.Allow))
	}
	if f.Resource != "" {
		q.WriteString(` AND resource = ` + arg(f.Resource))
	}
	if f.Kind != 0 {
		q.WriteString(` AND kind = ` + arg(int32(f.Kind)))
	}
	if !f.Since.IsZero() {
		q.WriteString(` AND time_ns >= ` + arg(f.Since.UnixNano()))
	}
	q.WriteString(` ORDER BY seq DESC LIMIT ` + arg(limit+1))
	rows, err := s.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("authz store: list decisions: %w", err)
	}
	defer rows.Close()
	var out []*authzstore.DecisionRecord
	for rows.Next() {
		var seq int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, 0, err
		}
		r := &authzstore.DecisionRecord{}
		if err := json.Unmarshal(body, r); err != nil {
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
	evictable := fmt.Sprintf("(allow OR kind = %d)", authzstore.KindFilter)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		n = 0
		exec := func(q string, args ...any) error {
			tag, err := tx.Exec(ctx, q, args...)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
			return nil
		}
		if !r.AllowsBefore.IsZero() {
			if err := exec(`DELETE FROM authz.decisions WHERE time_ns < $1 AND `+evictable, r.AllowsBefore.UnixNano()); err != nil {
				return err
			}
		}
		if !r.DeniesBefore.IsZero() {
			if err := exec(`DELETE FROM authz.decisions WHERE time_ns < $1 AND NOT `+evictable, r.DeniesBefore.UnixNano()); err != nil {
				return err
			}
		}
		if r.MaxRowsPerTenant <= 0 {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT tenant, COUNT(*) FROM authz.decisions GROUP BY tenant HAVING COUNT(*) > $1`, r.MaxRowsPerTenant)
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
			if err := exec(`DELETE FROM authz.decisions WHERE seq IN (SELECT seq FROM authz.decisions WHERE tenant = $1 AND `+evictable+` ORDER BY seq LIMIT $2)`, t, excess); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

package authzpg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"
	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// adapterTimeout bounds one adapter call (Casbin's adapter interface has
// no context).
const adapterTimeout = 30 * time.Second

// Adapter is a Casbin adapter (persist.Adapter and persist.BatchAdapter) over
// the store's authz.casbin_rule table. Lines written through it get source
// "api" and every write bumps the policy version in the same transaction, so
// the authz engine notices them like API changes. Lines whose source is not
// API-editable (file, deerflow) cannot be removed through it (ErrReadOnly).
// Policy lines and role links of the default model shape are validated
// before they are stored. It behaves as authzsqlite's adapter does.
type Adapter struct {
	s *Store
}

var (
	_ persist.Adapter      = (*Adapter)(nil)
	_ persist.BatchAdapter = (*Adapter)(nil)
)

// Adapter returns a Casbin adapter over the store.
func (s *Store) Adapter() *Adapter { return &Adapter{s: s} }

func actx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), adapterTimeout)
}

// LoadPolicy loads every row, in store order, into the model. Each row gets
// as many values as the model's definition of its ptype has tokens.
func (a *Adapter) LoadPolicy(m model.Model) error {
	ctx, cancel := actx()
	defer cancel()
	rows, err := a.s.pool.Query(ctx, `SELECT ptype, v0, v1, v2, v3, v4, v5, v6 FROM authz.casbin_rule ORDER BY id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var ptype string
		v := make([]string, 7)
		if err := rows.Scan(&ptype, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]); err != nil {
			return err
		}
		sec := ptype[:1]
		ast, ok := m[sec][ptype]
		if !ok {
			return fmt.Errorf("casbin adapter: model has no %s definition", ptype)
		}
		n := len(ast.Tokens)
		if n > 7 {
			return fmt.Errorf("casbin adapter: %s has %d tokens, at most 7 are stored", ptype, n)
		}
		if err := persist.LoadPolicyArray(append([]string{ptype}, v[:n]...), m); err != nil {
			return err
		}
	}
	return rows.Err()
}

// SavePolicy replaces the whole table with the model's lines (source "api"
// for new lines; a line that was already stored keeps its source).
func (a *Adapter) SavePolicy(m model.Model) error {
	ctx, cancel := actx()
	defer cancel()
	return a.s.writeTx(ctx, func(tx pgx.Tx, _ int64) error {
		sources := map[string]string{}
		rows, err := tx.Query(ctx, `SELECT ptype, v0, v1, v2, v3, v4, v5, v6, source FROM authz.casbin_rule`)
		if err != nil {
			return err
		}
		for rows.Next() {
			v := make([]string, 9)
			if err := rows.Scan(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]); err != nil {
				rows.Close()
				return err
			}
			sources[strings.Join(v[:8], "\x00")] = v[8]
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM authz.casbin_rule`); err != nil {
			return err
		}
		for _, sec := range []string{"p", "g"} {
			for ptype, ast := range m[sec] {
				for _, rule := range ast.Policy {
					src, ok := sources[strings.Join(vals8(ptype, rule), "\x00")]
					if !ok {
						src = authzcasbin.SourceAPI
					}
					if _, err := insert(ctx, tx, ptype, rule, src); err != nil {
						return err
					}
				}
			}
		}
		_, err = bump(ctx, tx, a.s.now())
		return err
	})
}

func vals8(ptype string, rule []string) []string {
	out := []string{ptype, "", "", "", "", "", "", ""}
	copy(out[1:], rule)
	return out
}

func validateRule(ptype string, rule []string) error {
	if len(rule) > 7 {
		return fmt.Errorf("casbin adapter: %d values, at most 7 are stored", len(rule))
	}
	switch {
	case ptype == "p" && len(rule) == 7:
		r, _ := authzcasbin.RuleFromCasbin(rule)
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%w: %v", authzcasbin.ErrInvalidPolicy, err)
		}
	case ptype == "g" && len(rule) == 3:
		l, _ := authzcasbin.LinkFromCasbin(rule)
		if err := l.Validate(); err != nil {
			return fmt.Errorf("%w: %v", authzcasbin.ErrInvalidPolicy, err)
		}
	}
	return nil
}

// AddPolicy adds one line (auto-save).
func (a *Adapter) AddPolicy(sec, ptype string, rule []string) error {
	return a.AddPolicies(sec, ptype, [][]string{rule})
}

// AddPolicies adds lines atomically (auto-save).
func (a *Adapter) AddPolicies(_ string, ptype string, rules [][]string) error {
	for _, r := range rules {
		if err := validateRule(ptype, r); err != nil {
			return err
		}
	}
	ctx, cancel := actx()
	defer cancel()
	return a.s.writeTx(ctx, func(tx pgx.Tx, _ int64) error {
		for _, r := range rules {
			if _, err := insert(ctx, tx, ptype, r, authzcasbin.SourceAPI); err != nil {
				return err
			}
		}
		_, err := bump(ctx, tx, a.s.now())
		return err
	})
}

// RemovePolicy removes one line (auto-save).
func (a *Adapter) RemovePolicy(sec, ptype string, rule []string) error {
	return a.RemovePolicies(sec, ptype, [][]string{rule})
}

// RemovePolicies removes lines atomically (auto-save); a missing line is not
// an error (Casbin checks presence in its model first).
func (a *Adapter) RemovePolicies(_ string, ptype string, rules [][]string) error {
	ctx, cancel := actx()
	defer cancel()
	return a.s.writeTx(ctx, func(tx pgx.Tx, _ int64) error {
		for _, r := range rules {
			src, err := sourceOf(ctx, tx, ptype, r)
			if err != nil {
				return err
			}
			if src != "" && !authzstore.Editable(src) {
				return fmt.Errorf("%w: %s %v is owned by source %q", ErrReadOnly, ptype, r, src)
			}
			if err := deleteRow(ctx, tx, ptype, r); err != nil {
				return err
			}
		}
		_, err := bump(ctx, tx, a.s.now())
		return err
	})
}

// RemoveFilteredPolicy removes the lines whose values from fieldIndex on
// equal fieldValues ("" matches anything), like Casbin's own adapters.
func (a *Adapter) RemoveFilteredPolicy(_ string, ptype string, fieldIndex int, fieldValues ...string) error {
	if fieldIndex < 0 || fieldIndex+len(fieldValues) > 7 {
		return errors.New("casbin adapter: filter out of range")
	}
	q := `FROM authz.casbin_rule WHERE ptype = $1`
	args := []any{ptype}
	for i, v := range fieldValues {
		if v != "" {
			args = append(args, v)
			q += fmt.Sprintf(" AND v%d = $%d", fieldIndex+i, len(args))
		}
	}
	ctx, cancel := actx()
	defer cancel()
	return a.s.writeTx(ctx, func(tx pgx.Tx, _ int64) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) `+q+` AND source NOT IN ('api', 'default')`, args...).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %d matching lines are owned by the policy file or DeerFlow import", ErrReadOnly, n)
		}
		if _, err := tx.Exec(ctx, `DELETE `+q, args...); err != nil {
			return err
		}
		_, err := bump(ctx, tx, a.s.now())
		return err
	})
}

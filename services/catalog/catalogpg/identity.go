package catalogpg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

var _ catalogstore.IdentityStore = (*Store)(nil)

// LoadNames implements catalogstore.IdentityStore.
func (s *Store) LoadNames(ctx context.Context) ([]catalogstore.NameRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT scope, server, tool, base, name, assigned_at, last_seen_at FROM catalog.tool_names`)
	if err != nil {
		return nil, fmt.Errorf("catalogpg: load names: %w", err)
	}
	var out []catalogstore.NameRow
	var r catalogstore.NameRow
	_, err = pgx.ForEachRow(rows, []any{&r.Scope, &r.Server, &r.Tool, &r.Base, &r.Name, &r.AssignedAt, &r.LastSeenAt}, func() error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalogpg: load names: %w", err)
	}
	return out, nil
}

// ApplyNames implements catalogstore.IdentityStore: deletes, then one
// multi-row upsert, in one transaction. A name another replica assigned
// first fails the call (unique violation); the caller reloads.
func (s *Store) ApplyNames(ctx context.Context, upsert []catalogstore.NameRow, del []catalogstore.PairKey) error {
	if len(upsert) == 0 && len(del) == 0 {
		return nil
	}
	n := len(upsert)
	scopes, servers, tools, bases, names := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	assigned, seen := make([]time.Time, n), make([]time.Time, n)
	for i, r := range upsert {
		if r.Name == "" {
			return fmt.Errorf("catalogpg: apply names: pair %s/%s: empty name", r.Server, r.Tool)
		}
		scopes[i], servers[i], tools[i], bases[i], names[i], assigned[i], seen[i] = r.Scope, r.Server, r.Tool, r.Base, r.Name, r.AssignedAt.UTC(), r.LastSeenAt.UTC()
	}
	err := pgstore.InTx(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, k := range del {
			if _, err := tx.Exec(ctx, `DELETE FROM catalog.tool_names WHERE scope = $1 AND server = $2 AND tool = $3`, k.Scope, k.Server, k.Tool); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM catalog.tool_pins WHERE scope = $1 AND server = $2 AND tool = $3`, k.Scope, k.Server, k.Tool); err != nil {
				return err
			}
		}
		if n == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO catalog.tool_names (scope, server, tool, base, name, assigned_at, last_seen_at)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[])
			ON CONFLICT (scope, server, tool) DO UPDATE SET base = excluded.base, name = excluded.name,
				assigned_at = excluded.assigned_at, last_seen_at = excluded.last_seen_at`,
			scopes, servers, tools, bases, names, assigned, seen)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalogpg: apply names: %w", err)
	}
	return nil
}

// LoadPins implements catalogstore.IdentityStore.
func (s *Store) LoadPins(ctx context.Context) ([]catalogstore.PinRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT scope, server, tool, approved_hash, approved_definition, rejected_hash, updated_at FROM catalog.tool_pins`)
	if err != nil {
		return nil, fmt.Errorf("catalogpg: load pins: %w", err)
	}
	var out []catalogstore.PinRow
	var p catalogstore.PinRow
	_, err = pgx.ForEachRow(rows, []any{&p.Scope, &p.Server, &p.Tool, &p.ApprovedHash, &p.ApprovedDefinition, &p.RejectedHash, &p.UpdatedAt}, func() error {
		c := p
		c.ApprovedDefinition = append([]byte(nil), p.ApprovedDefinition...)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalogpg: load pins: %w", err)
	}
	return out, nil
}

const upsertPin = `INSERT INTO catalog.tool_pins (scope, server, tool, approved_hash, approved_definition, rejected_hash, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (scope, server, tool) DO UPDATE SET approved_hash = excluded.approved_hash,
		approved_definition = excluded.approved_definition, rejected_hash = excluded.rejected_hash, updated_at = excluded.updated_at`

func pinArgs(p catalogstore.PinRow) []any {
	def := p.ApprovedDefinition
	if def == nil {
		def = []byte{}
	}
	return []any{p.Scope, p.Server, p.Tool, p.ApprovedHash, def, p.RejectedHash, p.UpdatedAt.UTC()}
}

// PutPins implements catalogstore.IdentityStore.
func (s *Store) PutPins(ctx context.Context, pins []catalogstore.PinRow) error {
	if len(pins) == 0 {
		return nil
	}
	err := pgstore.InTx(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, p := range pins {
			if _, err := tx.Exec(ctx, upsertPin, pinArgs(p)...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("catalogpg: put pins: %w", err)
	}
	return nil
}

// Review implements catalogstore.IdentityStore.
func (s *Store) Review(ctx context.Context, pin catalogstore.PinRow, a catalogstore.AuditRow) (int64, error) {
	if a.Action != "approve" && a.Action != "reject" {
		return 0, fmt.Errorf("catalogpg: review: action %q is not approve or reject", a.Action)
	}
	var id int64
	err := pgstore.InTx(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, upsertPin, pinArgs(pin)...); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO catalog.tool_audit (at, actor, action, scope, server, tool, name, previous_hash, definition_hash, diff)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`, a.At.UTC(), a.Actor, a.Action, a.Scope, a.Server, a.Tool, a.Name,
			a.PreviousHash, a.DefinitionHash, a.Diff).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("catalogpg: review: %w", err)
	}
	return id, nil
}

// ListAudit implements catalogstore.IdentityStore.
func (s *Store) ListAudit(ctx context.Context, limit int) ([]catalogstore.AuditRow, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT id, at, actor, action, scope, server, tool, name, previous_hash, definition_hash, diff
		FROM catalog.tool_audit ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("catalogpg: list audit: %w", err)
	}
	var out []catalogstore.AuditRow
	var a catalogstore.AuditRow
	_, err = pgx.ForEachRow(rows, []any{&a.ID, &a.At, &a.Actor, &a.Action, &a.Scope, &a.Server, &a.Tool, &a.Name, &a.PreviousHash, &a.DefinitionHash, &a.Diff}, func() error {
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalogpg: list audit: %w", err)
	}
	return out, nil
}

// AppliedConfig implements catalogstore.IdentityStore.
func (s *Store) AppliedConfig(ctx context.Context, path string) ([]byte, bool, error) {
	var content []byte
	var sum string
	err := s.pool.QueryRow(ctx, `SELECT content, sha256 FROM catalog.applied_config WHERE path = $1`, path).Scan(&content, &sum)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("catalogpg: applied config: %w", err)
	}
	if h := sha256.Sum256(content); hex.EncodeToString(h[:]) != sum {
		return nil, false, fmt.Errorf("catalogpg: applied config of %s: content does not match its sha256 (corrupt row)", path)
	}
	return content, true, nil
}

// PutAppliedConfig implements catalogstore.IdentityStore.
func (s *Store) PutAppliedConfig(ctx context.Context, path string, content []byte) error {
	h := sha256.Sum256(content)
	_, err := s.pool.Exec(ctx, `INSERT INTO catalog.applied_config (path, sha256, content, applied_at) VALUES ($1, $2, $3, now())
		ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256, content = excluded.content, applied_at = excluded.applied_at`,
		path, hex.EncodeToString(h[:]), content)
	if err != nil {
		return fmt.Errorf("catalogpg: put applied config: %w", err)
	}
	return nil
}

package catalogstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// IdentityStore is the part of the catalog store that keeps tool identity:
// stable exposed names, definition pins with their audit trail, and the last
// applied extensions_config.json (docs/decisions/0100-0102). The sqlite
// Store implements it; a PostgreSQL store mirrors the tables of migrations
// 002-004 one to one.
type IdentityStore interface {
	// LoadNames returns every name assignment (all scopes).
	LoadNames(ctx context.Context) ([]NameRow, error)
	// ApplyNames upserts rows and deletes the assignments (and pins) of del
	// in one transaction.
	ApplyNames(ctx context.Context, upsert []NameRow, del []PairKey) error
	// LoadPins returns every pin.
	LoadPins(ctx context.Context) ([]PinRow, error)
	// PutPins upserts pins in one transaction.
	PutPins(ctx context.Context, pins []PinRow) error
	// Review upserts pin and appends audit in one transaction; it returns
	// the audit record's id.
	Review(ctx context.Context, pin PinRow, audit AuditRow) (int64, error)
	// ListAudit returns the newest audit records first, at most limit.
	ListAudit(ctx context.Context, limit int) ([]AuditRow, error)
	// AppliedConfig returns the last applied content of the file at path.
	AppliedConfig(ctx context.Context, path string) (content []byte, ok bool, err error)
	// PutAppliedConfig records content as the last applied content of path.
	PutAppliedConfig(ctx context.Context, path string, content []byte) error
}

var _ IdentityStore = (*Store)(nil)

// PairKey identifies a tool by its visibility scope and original pair.
type PairKey struct {
	// Scope is the visibility scope ("*" for global servers).
	Scope string
	// Server is the origin server, Tool the original tool name.
	Server, Tool string
}

// NameRow is one row of tool_names.
type NameRow struct {
	PairKey
	// Base is the plain name the pair asked for when assigned.
	Base string
	// Name is the exposed name.
	Name string
	// AssignedAt and LastSeenAt (UTC).
	AssignedAt, LastSeenAt time.Time
}

// PinRow is one row of tool_pins.
type PinRow struct {
	PairKey
	// ApprovedHash is the approved definition hash ("" = none yet).
	ApprovedHash string
	// ApprovedDefinition is the canonical JSON of the approved definition.
	ApprovedDefinition []byte
	// RejectedHash is the last rejected definition hash ("" = none).
	RejectedHash string
	// UpdatedAt (UTC).
	UpdatedAt time.Time
}

// AuditRow is one row of tool_audit.
type AuditRow struct {
	// ID is assigned by the store.
	ID int64
	// At (UTC); Actor "tenant/subject"; Action "approve" or "reject".
	At            time.Time
	Actor, Action string
	PairKey
	// Name is the exposed name at decision time.
	Name string
	// PreviousHash is the hash pinned before; DefinitionHash the decided one.
	PreviousHash, DefinitionHash string
	// Diff is the JSON array of changes.
	Diff string
}

const ts = time.RFC3339Nano

func fmtTime(t time.Time) string { return t.UTC().Format(ts) }

func parseTime(s string) time.Time {
	t, err := time.Parse(ts, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// LoadNames implements IdentityStore.
func (s *Store) LoadNames(ctx context.Context) ([]NameRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT scope, server, tool, base, name, assigned_at, last_seen_at FROM tool_names`)
	if err != nil {
		return nil, fmt.Errorf("catalogstore: load names: %w", err)
	}
	defer rows.Close()
	var out []NameRow
	for rows.Next() {
		var r NameRow
		var a, l string
		if err := rows.Scan(&r.Scope, &r.Server, &r.Tool, &r.Base, &r.Name, &a, &l); err != nil {
			return nil, fmt.Errorf("catalogstore: load names: %w", err)
		}
		r.AssignedAt, r.LastSeenAt = parseTime(a), parseTime(l)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalogstore: load names: %w", err)
	}
	return out, nil
}

// namesPerStatement bounds the rows of one multi-row INSERT (sqlite's
// default limit of bound parameters is 32766; 7 per row).
const namesPerStatement = 400

// ApplyNames implements IdentityStore. Deletes run first, so a name freed by
// a deleted row can be taken by an upserted one in the same call. Rows are
// written with multi-row INSERTs, all in one transaction.
func (s *Store) ApplyNames(ctx context.Context, upsert []NameRow, del []PairKey) error {
	if len(upsert) == 0 && len(del) == 0 {
		return nil
	}
	for _, r := range upsert {
		if r.Name == "" {
			return fmt.Errorf("catalogstore: apply names: pair %s/%s: empty name", r.Server, r.Tool)
		}
	}
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		for _, k := range del {
			if _, err := tx.ExecContext(ctx, `DELETE FROM tool_names WHERE scope = ? AND server = ? AND tool = ?`, k.Scope, k.Server, k.Tool); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM tool_pins WHERE scope = ? AND server = ? AND tool = ?`, k.Scope, k.Server, k.Tool); err != nil {
				return err
			}
		}
		for start := 0; start < len(upsert); start += namesPerStatement {
			chunk := upsert[start:min(start+namesPerStatement, len(upsert))]
			args := make([]any, 0, 7*len(chunk))
			for _, r := range chunk {
				args = append(args, r.Scope, r.Server, r.Tool, r.Base, r.Name, fmtTime(r.AssignedAt), fmtTime(r.LastSeenAt))
			}
			q := `INSERT INTO tool_names (scope, server, tool, base, name, assigned_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)` +
				strings.Repeat(`, (?, ?, ?, ?, ?, ?, ?)`, len(chunk)-1) +
				` ON CONFLICT (scope, server, tool) DO UPDATE SET base = excluded.base, name = excluded.name,
				assigned_at = excluded.assigned_at, last_seen_at = excluded.last_seen_at`
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("catalogstore: apply names: %w", err)
	}
	return nil
}

// LoadPins implements IdentityStore.
func (s *Store) LoadPins(ctx context.Context) ([]PinRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT scope, server, tool, approved_hash, approved_definition, rejected_hash, updated_at FROM tool_pins`)
	if err != nil {
		return nil, fmt.Errorf("catalogstore: load pins: %w", err)
	}
	defer rows.Close()
	var out []PinRow
	for rows.Next() {
		var r PinRow
		var u string
		if err := rows.Scan(&r.Scope, &r.Server, &r.Tool, &r.ApprovedHash, &r.ApprovedDefinition, &r.RejectedHash, &u); err != nil {
			return nil, fmt.Errorf("catalogstore: load pins: %w", err)
		}
		r.UpdatedAt = parseTime(u)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalogstore: load pins: %w", err)
	}
	return out, nil
}

const upsertPin = `INSERT INTO tool_pins (scope, server, tool, approved_hash, approved_definition, rejected_hash, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (scope, server, tool) DO UPDATE SET approved_hash = excluded.approved_hash,
		approved_definition = excluded.approved_definition, rejected_hash = excluded.rejected_hash,
		updated_at = excluded.updated_at`

func pinArgs(p PinRow) []any {
	def := p.ApprovedDefinition
	if def == nil {
		def = []byte{}
	}
	return []any{p.Scope, p.Server, p.Tool, p.ApprovedHash, def, p.RejectedHash, fmtTime(p.UpdatedAt)}
}

// PutPins implements IdentityStore.
func (s *Store) PutPins(ctx context.Context, pins []PinRow) error {
	if len(pins) == 0 {
		return nil
	}
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		for _, p := range pins {
			if _, err := tx.ExecContext(ctx, upsertPin, pinArgs(p)...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("catalogstore: put pins: %w", err)
	}
	return nil
}

// Review implements IdentityStore.
func (s *Store) Review(ctx context.Context, pin PinRow, a AuditRow) (int64, error) {
	if a.Action != "approve" && a.Action != "reject" {
		return 0, fmt.Errorf("catalogstore: review: action %q is not approve or reject", a.Action)
	}
	var id int64
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, upsertPin, pinArgs(pin)...); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO tool_audit (at, actor, action, scope, server, tool, name, previous_hash, definition_hash, diff)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, fmtTime(a.At), a.Actor, a.Action, a.Scope, a.Server, a.Tool, a.Name,
			a.PreviousHash, a.DefinitionHash, a.Diff)
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("catalogstore: review: %w", err)
	}
	return id, nil
}

// ListAudit implements IdentityStore.
func (s *Store) ListAudit(ctx context.Context, limit int) ([]AuditRow, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, at, actor, action, scope, server, tool, name, previous_hash, definition_hash, diff
		FROM tool_audit ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("catalogstore: list audit: %w", err)
	}
	defer rows.Close()
	var out []AuditRow
	for rows.Next() {
		var a AuditRow
		var at string
		if err := rows.Scan(&a.ID, &at, &a.Actor, &a.Action, &a.Scope, &a.Server, &a.Tool, &a.Name, &a.PreviousHash, &a.DefinitionHash, &a.Diff); err != nil {
			return nil, fmt.Errorf("catalogstore: list audit: %w", err)
		}
		a.At = parseTime(at)
		out = append(out, a)
	}
	return out, rows.Err()
}

// AppliedConfig implements IdentityStore.
func (s *Store) AppliedConfig(ctx context.Context, path string) ([]byte, bool, error) {
	var content []byte
	var sum string
	err := s.db.QueryRowContext(ctx, `SELECT content, sha256 FROM applied_config WHERE path = ?`, path).Scan(&content, &sum)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("catalogstore: applied config: %w", err)
	}
	if h := sha256.Sum256(content); hex.EncodeToString(h[:]) != sum {
		return nil, false, fmt.Errorf("catalogstore: applied config of %s: content does not match its sha256 (corrupt row)", path)
	}
	return content, true, nil
}

// PutAppliedConfig implements IdentityStore.
func (s *Store) PutAppliedConfig(ctx context.Context, path string, content []byte) error {
	h := sha256.Sum256(content)
	err := s.db.WithTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO applied_config (path, sha256, content, applied_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256, content = excluded.content, applied_at = excluded.applied_at`,
			path, hex.EncodeToString(h[:]), content, fmtTime(time.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("catalogstore: put applied config: %w", err)
	}
	return nil
}

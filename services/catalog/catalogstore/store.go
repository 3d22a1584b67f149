// Package catalogstore is the catalog's own sqlite store,
// DataDir/catalog.db (internal/sqlitex: WAL, busy timeout, immediate
// transactions, embedded migrations). It holds the vectors of the remote
// embedder keyed by content hash (docs/search.md; docs/architecture.md §6),
// so a restart does not re-embed unchanged tools, and the identity of tools
// (identity.go, IdentityStore): stable names, definition pins with their
// audit trail, and the last applied extensions_config.json
// (docs/architecture.md §7, §7.1, §10.2).
package catalogstore

import (
	"context"
	"database/sql"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"time"

	"github.com/toolplane/toolplane/internal/search"
	"github.com/toolplane/toolplane/internal/sqlitex"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the catalog sqlite store.
type Store struct {
	db *sqlitex.DB
}

// Open opens (creating and migrating) the store at path.
func Open(path string) (*Store, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	db, err := sqlitex.Open(path, sub)
	if err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

// Vectors returns the search.VectorCache view of the store that records
// model in the rows it writes (keys already include the model, see
// search.VectorKey; the column is for inspection and pruning).
func (s *Store) Vectors(model string) *VectorCache { return &VectorCache{db: s.db, model: model} }

// VectorCache is a search.VectorCache on the vectors table: float32
// little-endian blobs, batch reads in one read transaction and batch writes
// in one write transaction. Safe for concurrent use.
type VectorCache struct {
	db    *sqlitex.DB
	model string
}

var _ search.VectorCache = (*VectorCache)(nil)

// keysPerQuery bounds the bound parameters of one SELECT (sqlite's default
// limit is 32766).
const keysPerQuery = 500

// GetVectors implements search.VectorCache. Keys that are absent, or whose
// row is corrupt (blob length not 4·dim), are absent from the result.
func (c *VectorCache) GetVectors(ctx context.Context, keys []string) (map[string][]float32, error) {
	out := make(map[string][]float32, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	tx, err := c.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("catalogstore: get vectors: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for start := 0; start < len(keys); start += keysPerQuery {
		chunk := keys[start:min(start+keysPerQuery, len(keys))]
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = k
		}
		q := `SELECT key, dim, vec FROM vectors WHERE key IN (?` + strings.Repeat(",?", len(chunk)-1) + `)`
		if err := func() error {
			rows, err := tx.QueryContext(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var key string
				var dim int
				var blob []byte
				if err := rows.Scan(&key, &dim, &blob); err != nil {
					return err
				}
				if v, ok := decode(blob, dim); ok {
					out[key] = v
				}
			}
			return rows.Err()
		}(); err != nil {
			return nil, fmt.Errorf("catalogstore: get vectors: %w", err)
		}
	}
	return out, nil
}

// PutVectors implements search.VectorCache: it inserts or replaces every
// vector in one transaction (all or nothing). Empty vectors are rejected.
func (c *VectorCache) PutVectors(ctx context.Context, vecs map[string][]float32) error {
	if len(vecs) == 0 {
		return nil
	}
	for k, v := range vecs {
		if k == "" {
			return errors.New("catalogstore: put vectors: empty key")
		}
		if len(v) == 0 {
			return fmt.Errorf("catalogstore: put vectors: key %s: empty vector", k)
		}
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	err := c.db.WithTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO vectors (key, model, dim, vec, created_at) VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for k, v := range vecs {
			if _, err := st.ExecContext(ctx, k, c.model, len(v), encode(v), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("catalogstore: put vectors: %w", err)
	}
	return nil
}

// Count returns the number of stored vectors of every model.
func (c *VectorCache) Count(ctx context.Context) (int, error) {
	var n int
	err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM vectors`).Scan(&n)
	return n, err
}

// encode returns v as little-endian float32s.
func encode(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// decode is the inverse of encode; ok is false when the blob does not hold
// exactly dim > 0 values.
func decode(b []byte, dim int) ([]float32, bool) {
	if dim <= 0 || len(b) != 4*dim {
		return nil, false
	}
	v := make([]float32, dim)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, true
}

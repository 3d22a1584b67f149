// Package catalogpg is the catalog's PostgreSQL store (pgx/v5, pgxpool) in
// the schema "catalog" of the storage.dsn database. It holds what
// catalogstore holds in DataDir/catalog.db — the vectors of the remote
// embedder keyed by content hash, shared by every catalog replica so none
// re-embeds a tool another has embedded — and passes the same
// search.VectorCache conformance suite (catalogstore/vectortest).
// Migrations are embedded and applied at Open under the schema's advisory
// lock (internal/pgstore; docs/decisions/0080-postgresql-stores.md).
package catalogpg

import (
	"context"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/internal/search"
)

// Schema is the PostgreSQL schema of the catalog tables.
const Schema = "catalog"

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

// Store is the catalog PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
}

// Open migrates the catalog schema (creating it when missing) and returns
// the store over pool. The pool stays the caller's: Close does not close it.
func Open(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if err := pgstore.Migrate(ctx, pool, Schema, Migrations()); err != nil {
		return nil, err
	}
	return &Store{pool: pool}, nil
}

// Close releases nothing (the pool is the caller's).
func (s *Store) Close() error { return nil }

// Pool returns the store's pool (tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Vectors returns the search.VectorCache view of the store that records
// model in the rows it writes (keys already include the model, see
// search.VectorKey; the column is for inspection and pruning).
func (s *Store) Vectors(model string) *VectorCache { return &VectorCache{pool: s.pool, model: model} }

// VectorCache is a search.VectorCache on catalog.vectors: float32
// little-endian bytea, a batch read in one statement and a batch write in
// one statement (all or nothing). Safe for concurrent use.
type VectorCache struct {
	pool  *pgxpool.Pool
	model string
}

var _ search.VectorCache = (*VectorCache)(nil)

// keysPerQuery bounds the keys of one SELECT (one array parameter).
const keysPerQuery = 10000

// GetVectors implements search.VectorCache. Keys that are absent, or whose
// row is corrupt (length not 4·dim), are absent from the result.
func (c *VectorCache) GetVectors(ctx context.Context, keys []string) (map[string][]float32, error) {
	out := make(map[string][]float32, len(keys))
	for start := 0; start < len(keys); start += keysPerQuery {
		chunk := keys[start:min(start+keysPerQuery, len(keys))]
		rows, err := c.pool.Query(ctx, `SELECT key, dim, vec FROM catalog.vectors WHERE key = ANY($1)`, chunk)
		if err != nil {
			return nil, fmt.Errorf("catalogpg: get vectors: %w", err)
		}
		var key string
		var dim int
		var blob []byte
		_, err = pgx.ForEachRow(rows, []any{&key, &dim, &blob}, func() error {
			if v, ok := decode(blob, dim); ok {
				out[key] = v
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("catalogpg: get vectors: %w", err)
		}
	}
	return out, nil
}

// PutVectors implements search.VectorCache: it inserts or replaces every
// vector in one statement (all or nothing). Empty vectors are rejected.
func (c *VectorCache) PutVectors(ctx context.Context, vecs map[string][]float32) error {
	if len(vecs) == 0 {
		return nil
	}
	keys := make([]string, 0, len(vecs))
	dims := make([]int32, 0, len(vecs))
	blobs := make([][]byte, 0, len(vecs))
	for k, v := range vecs {
		if k == "" {
			return errors.New("catalogpg: put vectors: empty key")
		}
		if len(v) == 0 {
			return fmt.Errorf("catalogpg: put vectors: key %s: empty vector", k)
		}
		keys = append(keys, k)
		dims = append(dims, int32(len(v)))
		blobs = append(blobs, encode(v))
	}
	_, err := c.pool.Exec(ctx, `INSERT INTO catalog.vectors (key, model, dim, vec)
		SELECT k, $1, d, v FROM unnest($2::text[], $3::integer[], $4::bytea[]) AS t(k, d, v)
		ON CONFLICT (key) DO UPDATE SET model = excluded.model, dim = excluded.dim, vec = excluded.vec, created_at = now()`,
		c.model, keys, dims, blobs)
	if err != nil {
		return fmt.Errorf("catalogpg: put vectors: %w", err)
	}
	return nil
}

// Count returns the number of stored vectors of every model.
func (c *VectorCache) Count(ctx context.Context) (int, error) {
	var n int
	err := c.pool.QueryRow(ctx, `SELECT count(*) FROM catalog.vectors`).Scan(&n)
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

// decode is the inverse of encode; ok is false when b does not hold
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

package catalogpg

import (
	"context"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/search"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
	"github.com/toolplane/toolplane/services/catalog/catalogstore/identitytest"
	"github.com/toolplane/toolplane/services/catalog/catalogstore/vectortest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func openStore(t *testing.T, pool *pgxpool.Pool) *Store {
	t.Helper()
	s, err := Open(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVectorCacheConformance(t *testing.T) {
	vectortest.RunVectorCacheSuite(t, func(t *testing.T) search.VectorCache {
		return openStore(t, pgtest.Pool(t)).Vectors("m")
	})
}

// TestVectorsSharedAcrossStores: a vector one store (replica) wrote is a
// hit for a second store on a new pool.
func TestVectorsSharedAcrossStores(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool := func() *pgxpool.Pool {
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	if err := openStore(t, pool()).Vectors("model-a").PutVectors(ctx, map[string][]float32{"k": {0.5, -1}}); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, pool())
	got, err := s2.Vectors("model-a").GetVectors(ctx, []string{"k"})
	if err != nil || !reflect.DeepEqual(got["k"], []float32{0.5, -1}) {
		t.Fatalf("second store: %v, %v", got, err)
	}
	if n, err := s2.Vectors("").Count(ctx); err != nil || n != 1 {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
}

// TestRowLayout pins the stored format (the one catalogstore uses): model
// and dim columns, float32 little-endian bytes; a row whose length does not
// match dim is a miss; a batch with an empty vector stores nothing.
func TestRowLayout(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	s := openStore(t, pool)
	if err := s.Vectors("text-embedding-3-small").PutVectors(ctx, map[string][]float32{"k": {1, -2}}); err != nil {
		t.Fatal(err)
	}
	var model string
	var dim int
	var blob []byte
	if err := pool.QueryRow(ctx, `SELECT model, dim, vec FROM catalog.vectors WHERE key = 'k'`).Scan(&model, &dim, &blob); err != nil {
		t.Fatal(err)
	}
	if model != "text-embedding-3-small" || dim != 2 || hex.EncodeToString(blob) != "0000803f000000c0" {
		t.Fatalf("row = %q, %d, %x", model, dim, blob)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO catalog.vectors (key, model, dim, vec) VALUES ('bad', 'm', 3, '\x0000803f')`); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Vectors("m").GetVectors(ctx, []string{"bad"}); err != nil || len(got) != 0 {
		t.Fatalf("corrupt row: %v, %v; want a miss", got, err)
	}
	c := s.Vectors("m")
	if err := c.PutVectors(ctx, map[string][]float32{"good": {1}, "empty": {}}); err == nil {
		t.Fatal("PutVectors with an empty vector succeeded")
	}
	if n, _ := c.Count(ctx); n != 2 {
		t.Fatalf("%d rows after a rejected batch; want the 2 from before", n)
	}
}

// TestMigrationsExpandOnly: every migration of the schema can run while the
// previous release still uses it (internal/pgstore.ContractingStatements).
func TestMigrationsExpandOnly(t *testing.T) {
	bad, err := pgstore.ContractingStatements(Migrations())
	if err != nil || len(bad) > 0 {
		t.Fatalf("%v\n%s", err, strings.Join(bad, "\n"))
	}
}

// TestIdentityConformance runs the identity suite of the sqlite store on
// PostgreSQL; reopen is a second store on a new pool (a restart or another
// replica).
func TestIdentityConformance(t *testing.T) {
	identitytest.RunIdentitySuite(t, func(t *testing.T) (catalogstore.IdentityStore, func() catalogstore.IdentityStore) {
		dsn := pgtest.DSN(t)
		open := func() catalogstore.IdentityStore {
			p, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			return openStore(t, p)
		}
		return open(), open
	})
}

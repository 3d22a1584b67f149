package catalogstore

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/toolplane/toolplane/internal/search"
	"github.com/toolplane/toolplane/services/catalog/catalogstore/vectortest"
)

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLiteVectorCacheConformance(t *testing.T) {
	vectortest.RunVectorCacheSuite(t, func(t *testing.T) search.VectorCache {
		return openStore(t, filepath.Join(t.TempDir(), "catalog.db")).Vectors("m")
	})
}

func TestMemoryCacheConformance(t *testing.T) {
	vectortest.RunVectorCacheSuite(t, func(*testing.T) search.VectorCache { return search.NewMemoryCache(0) })
}

func TestVectorsPersistAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Vectors("model-a").PutVectors(ctx, map[string][]float32{"k": {0.5, -1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, path) // migrations are applied once; reopening must work
	got, err := s2.Vectors("model-a").GetVectors(ctx, []string{"k"})
	if err != nil || !reflect.DeepEqual(got["k"], []float32{0.5, -1}) {
		t.Fatalf("after reopen: %v, %v", got, err)
	}
	if n, err := s2.Vectors("").Count(ctx); err != nil || n != 1 {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
}

// TestBlobLayout pins the on-disk format: model and dim columns, float32
// little-endian blob, RFC 3339 created_at.
func TestBlobLayout(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, filepath.Join(t.TempDir(), "catalog.db"))
	if err := s.Vectors("text-embedding-3-small").PutVectors(ctx, map[string][]float32{"k": {1, -2}}); err != nil {
		t.Fatal(err)
	}
	var model, created string
	var dim int
	var blob []byte
	if err := s.db.QueryRowContext(ctx, `SELECT model, dim, vec, created_at FROM vectors WHERE key = 'k'`).Scan(&model, &dim, &blob, &created); err != nil {
		t.Fatal(err)
	}
	if model != "text-embedding-3-small" || dim != 2 || created == "" {
		t.Fatalf("row = %q, %d, %q", model, dim, created)
	}
	if h := hex.EncodeToString(blob); h != "0000803f000000c0" {
		t.Fatalf("blob = %s; want float32 LE 0000803f000000c0", h)
	}
}

func TestCorruptRowIsAMiss(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, filepath.Join(t.TempDir(), "catalog.db"))
	if _, err := s.db.ExecContext(ctx, `INSERT INTO vectors VALUES ('bad', 'm', 3, x'0000803f', '2026-01-01T00:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	got, err := s.Vectors("m").GetVectors(ctx, []string{"bad"})
	if err != nil || len(got) != 0 {
		t.Fatalf("corrupt row: got %v, %v; want a miss", got, err)
	}
}

func TestPutIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	c := openStore(t, filepath.Join(t.TempDir(), "catalog.db")).Vectors("m")
	err := c.PutVectors(ctx, map[string][]float32{"good": {1}, "empty": {}})
	if err == nil {
		t.Fatal("PutVectors with an empty vector succeeded")
	}
	if n, _ := c.Count(ctx); n != 0 {
		t.Fatalf("%d rows stored after a rejected batch; want 0", n)
	}
}

package catalogstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/toolplane/toolplane/internal/search"
)

// testVectorCache is the conformance suite every search.VectorCache must
// pass (run here against the sqlite store and search.MemoryCache).
func testVectorCache(t *testing.T, open func(t *testing.T) search.VectorCache) {
	ctx := context.Background()
	t.Run("MissingKeysAbsent", func(t *testing.T) {
		c := open(t)
		got, err := c.GetVectors(ctx, []string{"a", "b"})
		if err != nil || len(got) != 0 {
			t.Fatalf("GetVectors on empty cache = %v, %v; want empty", got, err)
		}
		got, err = c.GetVectors(ctx, nil)
		if err != nil || len(got) != 0 {
			t.Fatalf("GetVectors(nil) = %v, %v; want empty", got, err)
		}
	})
	t.Run("RoundTripExact", func(t *testing.T) {
		c := open(t)
		in := map[string][]float32{
			search.VectorKey("m", "x"): {1, -2.5, 0, float32(math.Copysign(0, -1)), math.MaxFloat32, math.SmallestNonzeroFloat32},
			search.VectorKey("m", "y"): {0.125},
		}
		if err := c.PutVectors(ctx, in); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetVectors(ctx, []string{search.VectorKey("m", "x"), "unknown", search.VectorKey("m", "y")})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("got %d vectors, want 2: %v", len(got), got)
		}
		for k, v := range in {
			if !bitsEqual(got[k], v) {
				t.Errorf("key %s: got %v, want %v", k, got[k], v)
			}
		}
	})
	t.Run("Overwrite", func(t *testing.T) {
		c := open(t)
		if err := c.PutVectors(ctx, map[string][]float32{"k": {1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
		if err := c.PutVectors(ctx, map[string][]float32{"k": {4, 5}}); err != nil {
			t.Fatal(err)
		}
		got, _ := c.GetVectors(ctx, []string{"k"})
		if !reflect.DeepEqual(got["k"], []float32{4, 5}) {
			t.Fatalf("after overwrite got %v, want [4 5]", got["k"])
		}
	})
	t.Run("LargeBatch", func(t *testing.T) {
		c := open(t)
		const n = 1234 // more than one SELECT chunk
		in := make(map[string][]float32, n)
		keys := make([]string, 0, n+1)
		for i := range n {
			k := search.VectorKey("m", fmt.Sprint(i))
			in[k] = []float32{float32(i), float32(-i)}
			keys = append(keys, k)
		}
		if err := c.PutVectors(ctx, in); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetVectors(ctx, append(keys, "missing"))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("batch round trip: got %d vectors, want %d (or values differ)", len(got), len(in))
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		c := open(t)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					k := fmt.Sprintf("w%d-%d", w, i)
					if err := c.PutVectors(ctx, map[string][]float32{k: {float32(i)}}); err != nil {
						t.Error(err)
						return
					}
					got, err := c.GetVectors(ctx, []string{k})
					if err != nil || len(got[k]) != 1 || got[k][0] != float32(i) {
						t.Errorf("read-your-write %s: %v, %v", k, got, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

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
	testVectorCache(t, func(t *testing.T) search.VectorCache {
		return openStore(t, filepath.Join(t.TempDir(), "catalog.db")).Vectors("m")
	})
}

func TestMemoryCacheConformance(t *testing.T) {
	testVectorCache(t, func(*testing.T) search.VectorCache { return search.NewMemoryCache(0) })
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

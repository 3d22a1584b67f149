// Package vectortest holds the conformance suite of search.VectorCache
// implementations: catalogstore (sqlite), catalogpg (PostgreSQL) and
// search.MemoryCache.
package vectortest

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"

	"github.com/toolplane/toolplane/internal/search"
)

// RunVectorCacheSuite is the conformance suite every search.VectorCache
// must pass (run against the sqlite store, the PostgreSQL store and
// search.MemoryCache); open returns a fresh, empty cache.
func RunVectorCacheSuite(t *testing.T, open func(t *testing.T) search.VectorCache) {
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

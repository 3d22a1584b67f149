package catalogstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/internal/search"
)

// benchVectors is the 8,010-tool catalog (issue 4 benchmarks) at 1,536
// dimensions (text-embedding-3-small): what a restart reads back.
func benchVectors(b *testing.B) (map[string][]float32, []string) {
	b.Helper()
	const n, dim = 8010, 1536
	vecs := make(map[string][]float32, n)
	keys := make([]string, 0, n)
	for i := range n {
		k := search.VectorKey("m", fmt.Sprint("tool ", i))
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(i+j) / dim
		}
		vecs[k] = v
		keys = append(keys, k)
	}
	return vecs, keys
}

// BenchmarkGetVectors8010x1536 reads every tool vector in one batch (the
// cost a restart pays instead of re-embedding the catalog).
func BenchmarkGetVectors8010x1536(b *testing.B) {
	ctx := context.Background()
	vecs, keys := benchVectors(b)
	s, err := Open(filepath.Join(b.TempDir(), "catalog.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := s.Vectors("m")
	if err := c.PutVectors(ctx, vecs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		got, err := c.GetVectors(ctx, keys)
		if err != nil || len(got) != len(keys) {
			b.Fatalf("got %d, %v", len(got), err)
		}
	}
}

// BenchmarkPutVectors8010x1536 writes every tool vector in one transaction
// (first start with a remote embedder).
func BenchmarkPutVectors8010x1536(b *testing.B) {
	ctx := context.Background()
	vecs, _ := benchVectors(b)
	s, err := Open(filepath.Join(b.TempDir(), "catalog.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := s.Vectors("m")
	b.ResetTimer()
	for b.Loop() {
		if err := c.PutVectors(ctx, vecs); err != nil {
			b.Fatal(err)
		}
	}
}

package grpcx

import (
	"sync"
	"testing"

	"github.com/google/uuid"
)

// TestRequestIDs: generated request ids are version 4 UUIDs and distinct,
// also when drawn concurrently from the pooled generators.
func TestRequestIDs(t *testing.T) {
	const per, workers = 2000, 8
	ids := make(chan string, per*workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				ids <- newRequestID()
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || len(id) != 36 {
			t.Fatalf("request id %q: %v version %v variant %v", id, err, u.Version(), u.Variant())
		}
		if seen[id] {
			t.Fatalf("request id %s drawn twice", id)
		}
		seen[id] = true
	}
}

func BenchmarkRequestID(b *testing.B) {
	b.Run("pooled", func(b *testing.B) {
		for b.Loop() {
			_ = newRequestID()
		}
	})
	b.Run("uuid.NewString", func(b *testing.B) {
		for b.Loop() {
			_ = uuid.NewString()
		}
	})
}

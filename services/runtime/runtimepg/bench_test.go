package runtimepg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/runtime/runtimepg"
	"github.com/toolplane/toolplane/services/runtime/runtimesqlite"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// BenchmarkPromotionWrite is the store half of a tool_search promotion: one
// UpdateThread that merges a name and appends the tool message, on sqlite
// and on PostgreSQL (loopback, fsync off) in one run, serial and with 8
// writers on one thread (the row lock).
func BenchmarkPromotionWrite(b *testing.B) {
	ctx := context.Background()
	backends := map[string]func(b *testing.B) runtimestore.Store{
		"sqlite": func(b *testing.B) runtimestore.Store {
			s, err := runtimesqlite.Open(filepath.Join(b.TempDir(), "runtime.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
		"postgresql": func(b *testing.B) runtimestore.Store {
			s, err := runtimepg.Open(ctx, pgtest.Pool(b))
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for _, name := range []string{"sqlite", "postgresql"} {
		for _, par := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/writers=%d", name, par), func(b *testing.B) {
				s := backends[name](b)
				now := timestamppb.Now()
				if err := s.CreateThread(ctx, &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t", CreateTime: now, UpdateTime: now}}); err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(par)
				b.ResetTimer()
				var i atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						n := fmt.Sprint("tool_", i.Add(1))
						if _, err := s.UpdateThread(ctx, "t", func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
							th.Proto.Promoted = runtimestore.MergePromoted(th.Proto.Promoted, &runtimev1.Promoted{CatalogHash: "h", Names: []string{n}})
							return []*runtimev1.Message{{Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, Content: n}}, nil
						}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

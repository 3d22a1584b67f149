package authzpg

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/authz/authzsqlite"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// BenchmarkDecisionAppend is the decision-log half of an Authorize with
// the log on: Append(wait=true) through the group-commit log from 16
// concurrent callers, on sqlite and on PostgreSQL in one run.
func BenchmarkDecisionAppend(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"sqlite", "postgresql"} {
		b.Run(name, func(b *testing.B) {
			var s authzstore.Store
			if name == "sqlite" {
				st, err := authzsqlite.Open(filepath.Join(b.TempDir(), "authz.db"))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				s = st
			} else {
				st, err := Open(ctx, pgtest.Pool(b))
				if err != nil {
					b.Fatal(err)
				}
				s = st
			}
			log := authzstore.NewLog(s, 512)
			defer log.Close()
			var n atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					rec := &authzstore.DecisionRecord{ID: fmt.Sprint("b", n.Add(1)), Kind: authzstore.KindAuthorize, Time: time.Now(), Tenant: "t", Subject: "s", Resource: "tool", Action: "call", Target: "x"}
					if err := log.Append(ctx, rec, true); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

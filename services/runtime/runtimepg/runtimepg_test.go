package runtimepg_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/runtime/runtimepg"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestPostgresConformance runs the runtime store suite of runtimetest
// unchanged; Reopen opens a second store on a new pool over the same
// database (a restarted process).
func TestPostgresConformance(t *testing.T) {
	dsns := map[runtimestore.Store]string{}
	open := func(t *testing.T, dsn string) runtimestore.Store {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s, err := runtimepg.Open(context.Background(), pool)
		if err != nil {
			t.Fatal(err)
		}
		dsns[s] = dsn
		return s
	}
	runtimetest.RunStoreSuite(t, runtimetest.Factory{
		Open: func(t *testing.T) runtimestore.Store { return open(t, pgtest.DSN(t)) },
		Reopen: func(t *testing.T, s runtimestore.Store) runtimestore.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, dsns[s])
		},
	})
}

// TestPromotionsAcrossTwoStores: two stores on two pools over one database
// (two runtime replicas) start together (migrating once under the advisory
// lock) and run 100 concurrent promotions on one thread, split between
// them; the row lock keeps every one.
func TestPromotionsAcrossTwoStores(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	var stores [2]*runtimepg.Store
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range stores {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := runtimepg.Open(ctx, pool)
			stores[i] = s
			errs <- err
		}()
	}
	wg.Wait()
	for range stores {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Open: %v", err)
		}
	}
	now := timestamppb.Now()
	if err := stores[0].CreateThread(ctx, &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t", CreateTime: now, UpdateTime: now}}); err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := stores[i%2].UpdateThread(ctx, "t", func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
				th.Proto.Promoted = runtimestore.MergePromoted(th.Proto.Promoted, &runtimev1.Promoted{CatalogHash: "h", Names: []string{fmt.Sprintf("tool_%03d", i)}})
				return nil, nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	th, err := stores[1].GetThread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(th.Proto.GetPromoted().GetNames()); got != n {
		t.Fatalf("promotions kept across two stores: %d, want %d", got, n)
	}
}

// TestMigrationsExpandOnly: every migration of the schema can run while the
// previous release still uses it (internal/pgstore.ContractingStatements).
func TestMigrationsExpandOnly(t *testing.T) {
	bad, err := pgstore.ContractingStatements(runtimepg.Migrations())
	if err != nil || len(bad) > 0 {
		t.Fatalf("%v\n%s", err, strings.Join(bad, "\n"))
	}
}

// TestPromotionsSurviveServerCrash: promotions acknowledged by UpdateThread
// (from four writers on one thread) are all there after the PostgreSQL
// server is killed with SIGKILL and recovers, and each promotion has its
// message (the state and the appended messages commit together).
func TestPromotionsSurviveServerCrash(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	s, err := runtimepg.Open(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	now := timestamppb.Now()
	if err := s.CreateThread(ctx, &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t", CreateTime: now, UpdateTime: now}}); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked []string
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d_%05d", w, i)
				uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := s.UpdateThread(uctx, "t", func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
					th.Proto.Promoted = runtimestore.MergePromoted(th.Proto.Promoted, &runtimev1.Promoted{CatalogHash: "h", Names: []string{name}})
					return []*runtimev1.Message{{Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, Content: name}}, nil
				})
				cancel()
				if err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
			}
		}()
	}
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 150 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	pgtest.Crash(t)
	close(stop)
	wg.Wait()
	th, err := s.GetThread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, n := range th.Proto.GetPromoted().GetNames() {
		kept[n] = true
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range acked {
		if !kept[n] {
			t.Fatalf("acknowledged promotion %s lost in the server crash (%d acknowledged, %d kept)", n, len(acked), len(kept))
		}
	}
	msgs, _, err := s.ListMessages(ctx, "t", runtimestore.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(kept) {
		t.Fatalf("%d promotions but %d messages after the crash", len(kept), len(msgs))
	}
	t.Logf("%d acknowledged, %d kept after the server was killed", len(acked), len(kept))
}

// TestLockAcrossPools: the read-before-write lock (runtimestore.Locker)
// holds across processes: a second pool (another replica) waits for the
// first's release, a wait bounded by its context fails, and other names are
// independent.
func TestLockAcrossPools(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	open := func() *runtimepg.Store {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s, err := runtimepg.Open(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	unlockA, err := a.Lock(ctx, "runtime.read_before_write.t\x00/mnt/user-data/workspace/f")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := b.Lock(short, "runtime.read_before_write.t\x00/mnt/user-data/workspace/f"); err == nil {
		t.Fatal("second replica took a held lock")
	}
	other, err := b.Lock(ctx, "runtime.read_before_write.t\x00/mnt/user-data/workspace/g")
	if err != nil {
		t.Fatalf("another path's lock: %v", err)
	}
	other()
	got := make(chan time.Time, 1)
	go func() {
		u, err := b.Lock(ctx, "runtime.read_before_write.t\x00/mnt/user-data/workspace/f")
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		u()
	}()
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	unlockA()
	select {
	case at := <-got:
		if at.Before(released) {
			t.Fatalf("second replica got the lock before the release")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second replica never got the lock after the release")
	}
}

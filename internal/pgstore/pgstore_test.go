package pgstore

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestWithLockExcludesAcrossPools: holders of one lock name on two pools
// (two processes) never overlap; another name does not wait for them.
func TestWithLockExcludesAcrossPools(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pools := make([]*pgxpool.Pool, 3) // two holders, one free for the unrelated lock
	for i := range pools {
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pools[i] = p
	}
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := WithLock(ctx, pools[i%2], "test.section", func(context.Context) error {
				n := inside.Add(1)
				for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	// While those queue, another name is free at once.
	start := time.Now()
	if err := WithLock(ctx, pools[2], "test.other", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("an unrelated lock waited %v", d)
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders at once, want 1", maxInside.Load())
	}
}

// TestMigrate: migrations apply once into their schema, a second run is a
// no-op, the previous release starts on the newer schema, a broken
// migration fails naming the schema, and a bad schema name is refused.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	fsys := fstest.MapFS{
		"00001_a.sql": {Data: []byte("-- +goose Up\nCREATE TABLE demo.a (x int);\n-- +goose Down\nDROP TABLE demo.a;\n")},
		"00002_b.sql": {Data: []byte("-- +goose Up\nALTER TABLE demo.a ADD COLUMN y int NOT NULL DEFAULT 0;\n")},
	}
	for range 2 {
		if err := Migrate(ctx, pool, "demo", fsys); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := Version(ctx, pool, "demo", fsys); err != nil || v != 2 {
		t.Fatalf("version %d %v", v, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO demo.a (x) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	// Rolling upgrade: the previous release (migrations up to 1) starts on
	// the schema release N+1 migrated, and leaves it as it is.
	if err := Migrate(ctx, pool, "demo", fstest.MapFS{"00001_a.sql": fsys["00001_a.sql"]}); err != nil {
		t.Fatalf("the previous release on a newer schema: %v", err)
	}
	if v, _ := Version(ctx, pool, "demo", fsys); v != 2 {
		t.Fatalf("version after the previous release started: %d, want 2", v)
	}
	fsys["00003_bad.sql"] = &fstest.MapFile{Data: []byte("-- +goose Up\nALTER TABLE demo.missing ADD COLUMN z int;\n")}
	if err := Migrate(ctx, pool, "demo", fsys); err == nil || !strings.Contains(err.Error(), "migrate demo") {
		t.Fatalf("broken migration: %v", err)
	}
	if v, _ := Version(ctx, pool, "demo", fsys); v != 2 {
		t.Fatalf("version after a failed migration %d, want 2", v)
	}
	if err := Migrate(ctx, pool, "Demo; DROP", fsys); err == nil {
		t.Fatal("bad schema name accepted")
	}
}

// TestContractingStatements: the checker flags each contracting shape, and
// lets additive statements and annotated contract steps through.
func TestContractingStatements(t *testing.T) {
	fsys := fstest.MapFS{
		"00001_init.sql": {Data: []byte("-- +goose Up\nCREATE TABLE s.t (a int NOT NULL, b text NOT NULL DEFAULT '');\nCREATE INDEX t_a ON s.t (a);\n-- +goose Down\nDROP TABLE s.t;\n")},
		"00002_ok.sql": {Data: []byte("-- +goose Up\nALTER TABLE s.t ADD COLUMN c bigint NOT NULL DEFAULT 0;\nALTER TABLE s.t ADD COLUMN d text;\n" +
			"ALTER TABLE s.t ADD COLUMN e bigint GENERATED ALWAYS AS IDENTITY;\nALTER TABLE s.t ALTER COLUMN c DROP NOT NULL;\n-- contract: nothing reads b since v0.3\nALTER TABLE s.t DROP COLUMN b;\n")},
		"00003_bad.sql": {Data: []byte("-- +goose Up\nALTER TABLE s.t DROP COLUMN a;\nALTER TABLE s.t RENAME COLUMN c TO cc;\n" +
			"ALTER TABLE s.t ALTER COLUMN d TYPE int;\nALTER TABLE s.t ALTER COLUMN d SET NOT NULL;\nALTER TABLE s.t ADD COLUMN f int NOT NULL;\n" +
			"DROP TABLE s.t;\nTRUNCATE s.t;\n")},
	}
	got, err := ContractingStatements(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 {
		t.Fatalf("%d findings, want the 7 statements of 00003:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, g := range got {
		if !strings.HasPrefix(g, "00003_bad.sql: ") {
			t.Fatalf("finding outside 00003: %s", g)
		}
	}
	if _, err := ContractingStatements(fstest.MapFS{"x.sql": {Data: []byte("CREATE TABLE a (b int);")}}); err == nil {
		t.Fatal("a file without an Up section was accepted")
	}
}

// TestOpenPoolSize: the pool gets DefaultMaxConns unless the DSN sets
// pool_max_conns.
func TestOpenPoolSize(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	p, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Config().MaxConns; got != DefaultMaxConns {
		t.Fatalf("default pool size %d, want %d", got, DefaultMaxConns)
	}
	p.Close()
	p, err = Open(ctx, dsn+"&pool_max_conns=3")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.Config().MaxConns; got != 3 {
		t.Fatalf("pool_max_conns=3 gave %d", got)
	}
}

package skillspg

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/skills/skillsblob"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
	"github.com/toolplane/toolplane/services/skills/skillstest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestStoreSuite(t *testing.T) {
	skillstest.RunStoreSuite(t, func(t *testing.T) skillsstore.Store {
		s, err := Open(context.Background(), pgtest.Pool(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestBlobSuite runs the blob suite with a blob of the default limit of
// one file (skills.limits.max_file_bytes, 64 MiB) in bytea.
func TestBlobSuite(t *testing.T) {
	large := 64 << 20
	if testing.Short() {
		large = 4 << 20
	}
	skillstest.RunBlobSuite(t, func(t *testing.T) skillsstore.Blobs {
		b, err := OpenBlobs(context.Background(), pgtest.Pool(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, large)
}

// TestBlobGCMinAge: Delete and GC keep a blob put within the grace period
// (another replica's install in flight), a second Put of existing bytes
// renews it, and both remove it once the period is over; a blob whose
// bytes were altered in the database reads as corrupt.
func TestBlobGCMinAge(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	b, err := OpenBlobs(ctx, pool, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	b.now = func() time.Time { return clock }
	d, _, err := b.Put([]byte("fresh"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.GC(nil); err != nil || n != 0 || !b.Has(d) {
		t.Fatalf("young blob collected: %d %v", n, err)
	}
	if err := b.Delete(d); err != nil || !b.Has(d) {
		t.Fatalf("young blob deleted: %v", err)
	}
	clock = clock.Add(50 * time.Second)
	if _, created, err := b.Put([]byte("fresh")); err != nil || created {
		t.Fatalf("second put: created=%v %v", created, err)
	}
	clock = clock.Add(50 * time.Second) // 100 s after the first put, 50 s after the second
	if n, err := b.GC(nil); err != nil || n != 0 || !b.Has(d) {
		t.Fatalf("blob renewed by a put collected: %d %v", n, err)
	}
	clock = clock.Add(time.Minute)
	if n, err := b.GC(nil); err != nil || n != 1 || b.Has(d) {
		t.Fatalf("old blob kept: %d %v", n, err)
	}
	d2, _, _ := b.Put([]byte("to delete"))
	clock = clock.Add(2 * time.Minute)
	if err := b.Delete(d2); err != nil || b.Has(d2) {
		t.Fatalf("old blob not deleted: %v", err)
	}
	d, _, _ = b.Put([]byte("original"))
	if _, err := pool.Exec(ctx, `UPDATE skills.blobs SET data = 'tampered' WHERE digest = $1`, d); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(d); !errors.Is(err, skillsblob.ErrCorrupt) {
		t.Fatalf("tampered blob: %v", err)
	}
}

// TestReopenKeepsData: a second store on a new pool sees the first's data.
func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	open := func() *Store {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s, err := Open(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if _, err := s.Create(ctx, skillsstore.Integration, "acme", "pack", skillsstore.Content{Digest: "d", Files: []skillsstore.FileRef{{Path: "SKILL.md", Digest: "x"}}},
		skillsstore.HistoryEntry{Action: "install", Author: "a"}); err != nil {
		t.Fatal(err)
	}
	if sk, err := open().Get(ctx, skillsstore.Integration, "acme", "pack"); err != nil || sk.Digest != "d" {
		t.Fatalf("%v %+v", err, sk)
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

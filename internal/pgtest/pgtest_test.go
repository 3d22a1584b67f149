package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestFreshDatabases: each test's database is its own (a table made in one
// is absent from the next), the server runs as the postgres user when the
// tests run as root, and the database is dropped when its test ends.
func TestFreshDatabases(t *testing.T) {
	ctx := context.Background()
	var first string
	t.Run("a", func(t *testing.T) {
		p := Pool(t)
		if _, err := p.Exec(ctx, `CREATE TABLE x (v int)`); err != nil {
			t.Fatal(err)
		}
		if err := p.QueryRow(ctx, `SELECT current_database()`).Scan(&first); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("b", func(t *testing.T) {
		p := Pool(t)
		var n int
		if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'x'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("table of another test visible: %d %v", n, err)
		}
		var owner string
		if err := p.QueryRow(ctx, `SELECT usename FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&owner); err != nil || owner != "postgres" {
			t.Fatalf("session user %q %v", owner, err)
		}
	})
	admin, err := pgxpool.New(ctx, Admin(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, first).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s not dropped after its test: %d %v", first, n, err)
	}
	if os.Geteuid() == 0 {
		fi, err := os.Stat(shared.dir)
		if err != nil {
			t.Fatal(err)
		}
		if uid := statUID(fi); uid == 0 {
			t.Fatalf("cluster directory %s is owned by root", shared.dir)
		}
	}
}

// TestTraversable: a directory below a 0700 one is not reachable by
// another user; the temp dir of this machine is.
func TestTraversable(t *testing.T) {
	closed := filepath.Join(t.TempDir(), "closed")
	if err := os.MkdirAll(filepath.Join(closed, "inner"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	if traversable(filepath.Join(closed, "inner")) {
		t.Fatal("a directory under a 0700 directory reported traversable")
	}
	if !traversable("/tmp") {
		t.Fatal("/tmp not traversable")
	}
}

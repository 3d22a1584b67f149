package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// storageErr asserts err is a config error on storage.dsn that contains
// want and does not contain secret.
func storageErr(t *testing.T, err error, want, secret string) {
	t.Helper()
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != StorageKey {
		t.Fatalf("err = %v, want a config error on %s", err, StorageKey)
	}
	if !strings.Contains(ce.Reason, want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("reason %q: want one line containing %q", ce.Reason, want)
	}
	if secret != "" && strings.Contains(err.Error(), secret) {
		t.Fatalf("the error shows the password: %v", err)
	}
}

func TestOpenStorageEmptyIsSqlite(t *testing.T) {
	pool, err := OpenStorage(context.Background(), "", allFour)
	if pool != nil || err != nil {
		t.Fatalf("empty DSN: %v %v, want nil, nil", pool, err)
	}
}

func TestOpenStorageBadDSN(t *testing.T) {
	_, err := OpenStorage(context.Background(), "postgres://u:hunter2secret@127.0.0.1:5432/db?sslmode=bogus", allFour)
	storageErr(t, err, "invalid DSN", "hunter2secret")
	_, err = OpenStorage(context.Background(), "host=127.0.0.1 port=notaport password=hunter2secret", allFour)
	storageErr(t, err, "invalid DSN", "hunter2secret")
}

func TestOpenStorageUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	_, err = OpenStorage(context.Background(), fmt.Sprintf("postgres://u:hunter2secret@127.0.0.1:%d/db?sslmode=disable", port), allFour)
	storageErr(t, err, "cannot connect to the server at 127.0.0.1", "hunter2secret")
}

// TestOpenStorageFailedMigration: a table in the way of the runtime's first
// migration makes OpenStorage fail naming the schema.
func TestOpenStorageFailedMigration(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if _, err := pool.Exec(ctx, `CREATE SCHEMA runtime; CREATE TABLE runtime.threads (x int)`); err != nil {
		t.Fatal(err)
	}
	_, err := OpenStorage(ctx, pool.Config().ConnString(), allFour)
	storageErr(t, err, "migrate runtime", "")
}

// TestOpenStorageMigratesEverySchema: replicas starting together (three
// concurrent OpenStorage calls) all succeed, and the database then holds
// the four schemas at their newest migration.
func TestOpenStorageMigratesEverySchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := OpenStorage(ctx, dsn, allFour)
			if err == nil {
				pool.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	pool, err := OpenStorage(ctx, dsn, allFour)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, svc := range allFour {
		var applied int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+schemas[svc].name+`.goose_db_version WHERE version_id > 0 AND is_applied`).Scan(&applied); err != nil {
			t.Fatalf("%s: %v", svc, err)
		}
		files, err := fs.Glob(schemas[svc].fs(), "*.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: migrations: %v %v", svc, files, err)
		}
		if applied != len(files) {
			t.Fatalf("%s: %d migrations recorded, want %d (each applied once)", svc, applied, len(files))
		}
	}
}

var allFour = []string{"catalog", "authz", "skills", "runtime"}

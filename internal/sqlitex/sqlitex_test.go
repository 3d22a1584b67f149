package sqlitex

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"
)

func TestOpenMigrateAndTx(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.db")
	mig := fstest.MapFS{
		"001_init.sql": {Data: []byte(`CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL);`)},
		"002_more.sql": {Data: []byte(`ALTER TABLE kv ADD COLUMN note TEXT;`)},
	}
	db, err := Open(p, mig)
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	ctx := context.Background()
	// Concurrent increments through WithTx never lose an update.
	if err := db.WithTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO kv(k, v) VALUES ('n', 0)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := db.WithTx(ctx, func(tx *sql.Tx) error {
				var v int
				if err := tx.QueryRow(`SELECT v FROM kv WHERE k='n'`).Scan(&v); err != nil {
					return err
				}
				_, err := tx.Exec(`UPDATE kv SET v=? WHERE k='n'`, v+1)
				return err
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var v int
	if err := db.QueryRow(`SELECT v FROM kv WHERE k='n'`).Scan(&v); err != nil || v != 20 {
		t.Fatalf("v = %d, %v; want 20", v, err)
	}
	// A failing transaction leaves nothing behind.
	boom := errors.New("boom")
	err = db.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO kv(k, v) VALUES ('gone', 1)`); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if err := db.QueryRow(`SELECT v FROM kv WHERE k='gone'`).Scan(&v); !IsNotFound(err) {
		t.Fatalf("rolled-back row visible: %v", err)
	}
	// Constraint violations are classified.
	err = db.WithTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO kv(k, v) VALUES ('n', 1)`)
		return err
	})
	if !IsConstraint(err) {
		t.Fatalf("IsConstraint(%v) = false", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Re-opening applies no migration twice and keeps the data.
	db, err = Open(p, mig)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("migrations = %d, %v", n, err)
	}
	if err := db.QueryRow(`SELECT v FROM kv WHERE k='n'`).Scan(&v); err != nil || v != 20 {
		t.Fatalf("after reopen v = %d, %v", v, err)
	}
}

func TestOpenBadMigrationFails(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "x.db"), fstest.MapFS{"001_bad.sql": {Data: []byte(`CREATE TABLEX nope;`)}})
	if err == nil {
		t.Fatal("want error for a bad migration")
	}
}

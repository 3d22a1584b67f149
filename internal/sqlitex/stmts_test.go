package sqlitex

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestPrepared: a query used inside a write transaction is prepared in the
// background once that transaction ends and reused from then on; readers
// prepare at once; the cache is bounded; results are those of the plain
// query; a closed store prepares nothing.
func TestPrepared(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := db.WithTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const ins = `INSERT INTO kv(k, v) VALUES (?, ?)`
	insert := func(k string, v int) (prepared bool) {
		t.Helper()
		err := db.WithTx(ctx, func(tx *sql.Tx) error {
			st, ok, err := db.Prepared(ctx, tx, ins)
			if err != nil {
				return err
			}
			if !ok {
				_, err = tx.ExecContext(ctx, ins, k, v)
				return err
			}
			prepared = true
			defer st.Close()
			_, err = st.ExecContext(ctx, k, v)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return prepared
	}
	if insert("a", 1) {
		t.Fatal("first use inside a transaction claimed a prepared statement (the writer's connection is the transaction's)")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := db.writeStmts.lookup(ins); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the statement was never prepared after the transaction ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !insert("b", 2) || !insert("c", 3) {
		t.Fatal("later uses did not get the prepared statement")
	}
	// A failing statement reports the query's error, and the transaction rolls back.
	err = db.WithTx(ctx, func(tx *sql.Tx) error {
		st, ok, err := db.Prepared(ctx, tx, ins)
		if err != nil || !ok {
			t.Fatalf("Prepared: ok %v err %v", ok, err)
		}
		if _, err := st.ExecContext(ctx, "d", 4); err != nil {
			return err
		}
		_, err = st.ExecContext(ctx, "a", 5) // duplicate key
		return err
	})
	if !IsConstraint(err) {
		t.Fatalf("duplicate key through the prepared statement: %v", err)
	}

	// Readers: prepared at once, same answers as the plain query.
	const sel = `SELECT v FROM kv WHERE k = ?`
	for k, want := range map[string]int{"a": 1, "b": 2, "c": 3} {
		st, ok, err := db.Prepared(ctx, nil, sel)
		if err != nil || !ok {
			t.Fatalf("reader Prepared: %v %v", ok, err)
		}
		var v int
		if err := st.QueryRowContext(ctx, k).Scan(&v); err != nil || v != want {
			t.Fatalf("%s = %d, %v; want %d", k, v, err, want)
		}
		_ = st.Close()
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM kv WHERE k = 'd'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rolled-back row visible: %d %v", n, err)
	}

	// Bounded: beyond maxCachedStmts distinct queries nothing more is kept,
	// and the statements handed out still work and are the caller's.
	for i := 0; i < maxCachedStmts+10; i++ {
		st, ok, err := db.Prepared(ctx, nil, fmt.Sprintf(`SELECT v + %d FROM kv WHERE k = ?`, i))
		if err != nil || !ok {
			t.Fatal(err)
		}
		var v int
		if err := st.QueryRowContext(ctx, "a").Scan(&v); err != nil || v != 1+i {
			t.Fatalf("query %d: %d %v", i, v, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db.readStmts.mu.Lock()
	kept := len(db.readStmts.m)
	db.readStmts.mu.Unlock()
	if kept != maxCachedStmts {
		t.Fatalf("reader cache holds %d statements, want the bound %d", kept, maxCachedStmts)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Prepared(ctx, nil, `SELECT 1 + 1000`); err == nil {
		t.Fatal("a closed store prepared a statement")
	}
}

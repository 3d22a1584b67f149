package pgstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgtest"
)

// TestSessionLockTakeover: of two processes (pools) trying one lock, one
// holds it; when its connection is terminated, Held says so and the other
// takes it; Release hands it over at once.
func TestSessionLockTakeover(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool := func() *pgxpool.Pool {
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	pa, pb, admin := pool(), pool(), pool()
	a, b := NewSessionLock(pa, "test.role", "tp-lock-a"), NewSessionLock(pb, "test.role", "tp-lock-b")
	defer a.Release()
	defer b.Release()
	if ok, err := a.TryLock(ctx); !ok || err != nil {
		t.Fatalf("a.TryLock = %v, %v", ok, err)
	}
	if ok, err := b.TryLock(ctx); ok || err != nil {
		t.Fatalf("b.TryLock while a holds = %v, %v", ok, err)
	}
	if ok, _ := a.TryLock(ctx); !ok {
		t.Fatal("a.TryLock again while holding = false")
	}
	// Another name is free.
	c := NewSessionLock(pb, "test.other", "tp-lock-c")
	defer c.Release()
	if ok, err := c.TryLock(ctx); !ok || err != nil {
		t.Fatalf("another name = %v, %v", ok, err)
	}
	// a's connection dies: the lock is released on the server.
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'tp-lock-a'`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		held, _ := a.Held(ctx)
		if !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a still says it holds the lock after its connection was terminated")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ok, err := b.TryLock(ctx); !ok || err != nil {
		t.Fatalf("b.TryLock after a's connection died = %v, %v", ok, err)
	}
	if ok, _ := a.TryLock(ctx); ok {
		t.Fatal("a took the lock back while b holds it")
	}
	b.Release()
	if ok, err := a.TryLock(ctx); !ok || err != nil {
		t.Fatalf("a.TryLock after b released = %v, %v", ok, err)
	}
}

// TestListenNotify: a notification sent in a committed transaction
// reaches the listener with its payload; one in a rolled-back transaction
// does not; after its connection is terminated the listener reconnects and
// says so (reconnected), then receives again.
func TestListenNotify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	type note struct {
		payload     string
		reconnected bool
	}
	got := make(chan note, 16)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Listen(lctx, pool, "tp_test_chan", "tp-listen-test", func(p string, r bool) { got <- note{p, r} }, nil)
	}()
	defer func() { stop(); <-done }()
	next := func(what string) note {
		t.Helper()
		select {
		case n := <-got:
			return n
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing received", what)
			return note{}
		}
	}
	if n := next("connect"); !n.reconnected {
		t.Fatalf("first call = %+v, want reconnected", n)
	}
	send := func(i int, commit bool) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := Notify(ctx, tx, "tp_test_chan", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	send(1, false)
	send(2, true)
	if n := next("committed"); n.payload != "2" || n.reconnected {
		t.Fatalf("got %+v, want payload 2 (the rolled-back 1 never arrives)", n)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'tp-listen-test'`); err != nil {
		t.Fatal(err)
	}
	if n := next("reconnect"); !n.reconnected {
		t.Fatalf("after the kill got %+v, want reconnected", n)
	}
	send(3, true)
	if n := next("after reconnect"); n.payload != "3" {
		t.Fatalf("got %+v, want 3", n)
	}
}

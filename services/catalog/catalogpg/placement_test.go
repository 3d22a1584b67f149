package catalogpg

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgtest"
)

// Membership: a heartbeat lists every member younger than the timeout; a
// silent member drops out after it; Leave removes a member at once; a
// second process heartbeating under a live member's address is reported.
func TestReplicaMembership(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, pgtest.Pool(t))
	const ttl = 400 * time.Millisecond
	if live, c, err := st.Heartbeat(ctx, "10.0.0.1:7420", "i1", ttl); err != nil || !slices.Equal(live, []string{"10.0.0.1:7420"}) || c != "" {
		t.Fatalf("first heartbeat: %v %q %v", live, c, err)
	}
	if live, _, err := st.Heartbeat(ctx, "10.0.0.2:7420", "i2", ttl); err != nil || !slices.Equal(live, []string{"10.0.0.1:7420", "10.0.0.2:7420"}) {
		t.Fatalf("second member: %v %v", live, err)
	}
	if _, c, err := st.Heartbeat(ctx, "10.0.0.2:7420", "i3", ttl); err != nil || c != "i2" {
		t.Fatalf("same address, another live instance: conflict %q %v; want i2", c, err)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	if live, c, err := st.Heartbeat(ctx, "10.0.0.1:7420", "i1", ttl); err != nil || !slices.Equal(live, []string{"10.0.0.1:7420"}) || c != "" {
		t.Fatalf("after the other fell silent: %v %q %v", live, c, err)
	}
	if _, c, _ := st.Heartbeat(ctx, "10.0.0.2:7420", "i4", ttl); c != "" {
		t.Fatalf("a restart under an expired address reported a conflict with %q", c)
	}
	if err := st.Leave(ctx, "10.0.0.2:7420", "other-instance"); err != nil {
		t.Fatal(err)
	}
	if live, _, _ := st.Heartbeat(ctx, "10.0.0.1:7420", "i1", ttl); len(live) != 2 {
		t.Fatalf("Leave of another instance removed the member: %v", live)
	}
	if err := st.Leave(ctx, "10.0.0.2:7420", "i4"); err != nil {
		t.Fatal(err)
	}
	if live, _, _ := st.Heartbeat(ctx, "10.0.0.1:7420", "i1", ttl); !slices.Equal(live, []string{"10.0.0.1:7420"}) {
		t.Fatalf("after Leave: %v", live)
	}
}

// Published tools: each publication replaces the list and increases the
// version; the list comes back as written.
func TestPublishedTools(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, pgtest.Pool(t))
	if err := st.PublishTools(ctx, "files", "a:1", []byte(`[{"Name":"read"}]`)); err != nil {
		t.Fatal(err)
	}
	if err := st.PublishTools(ctx, "files", "b:1", []byte(`[{"Name":"read"},{"Name":"write"}]`)); err != nil {
		t.Fatal(err)
	}
	got, err := st.StatefulTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := got["files"]
	if len(got) != 1 || p.Owner != "b:1" || p.Version != 2 || string(p.Tools) != `[{"Name": "read"}, {"Name": "write"}]` {
		t.Fatalf("published: %+v %s", got, p.Tools)
	}
	if err := st.PublishTools(ctx, "files", "b:1", []byte(`not json`)); err == nil {
		t.Fatal("a non-JSON tool list was stored")
	}
}

// Locks: a lock held by one session is refused to another until it is
// released or its session ends (the crash of its replica).
func TestStatefulLocks(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	open := func() *Store {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return openStore(t, pool)
	}
	a, b := open(), open()
	la, err := a.NewLocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.NewLocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if ok, err := la.TryLock(ctx, "catalog.stateful.files"); !ok || err != nil {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	if ok, err := lb.TryLock(ctx, "catalog.stateful.files"); ok || err != nil {
		t.Fatalf("second session got a held lock: %v %v", ok, err)
	}
	if ok, _ := lb.TryLock(ctx, "catalog.stateful.other"); !ok {
		t.Fatal("another server's lock was refused")
	}
	if err := la.Unlock(ctx, "catalog.stateful.files"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := lb.TryLock(ctx, "catalog.stateful.files"); !ok {
		t.Fatal("a released lock was refused")
	}
	_ = lb.Unlock(ctx, "catalog.stateful.files")
	if ok, _ := la.TryLock(ctx, "catalog.stateful.files"); !ok {
		t.Fatal("relock refused")
	}
	la.Close() // the session ends: its locks go with it
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ok, _ := lb.TryLock(ctx, "catalog.stateful.files"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock of a closed session was still held after 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := lb.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

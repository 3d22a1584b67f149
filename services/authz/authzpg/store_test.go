package authzpg

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/casbin/casbin/v2/persist"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
	"github.com/toolplane/toolplane/services/authz/authztest"
)

// TestMain doubles as the crash helper: with TP_AUTHZ_PG_CRASH_DSN set, the
// test binary appends denies through the group-commit log from 8
// goroutines and prints each id once Append(wait=true) returned, until it
// is killed.
func TestMain(m *testing.M) {
	if dsn := os.Getenv("TP_AUTHZ_PG_CRASH_DSN"); dsn != "" {
		crashHelper(dsn)
		return
	}
	os.Exit(pgtest.Main(m))
}

func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), newPool(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreSuite(t *testing.T) {
	authztest.RunStoreSuite(t, func(t *testing.T) authzstore.Store { return openStore(t, pgtest.DSN(t)) })
}

// TestAdapterContract runs the Casbin adapter contract of authztest.
func TestAdapterContract(t *testing.T) {
	s := openStore(t, pgtest.DSN(t))
	authztest.RunAdapterContract(t, s, func() persist.Adapter { return s.Adapter() })
}

// TestReopen: policy, version and decisions are seen by a second store on
// a new pool (a restarted or another replica).
func TestReopen(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openStore(t, dsn)
	if _, err := s.SeedDefault(ctx, authzcasbin.DefaultRules()); err != nil {
		t.Fatal(err)
	}
	add, links, err := authzcasbin.ParsePolicyText("p, ops, acme, tool, x, call, allow, !subagent\ng, a, ops, acme", authzcasbin.SourceAPI)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, authzstore.Change{AddRules: add, AddLinks: links}); err != nil {
		t.Fatal(err)
	}
	log := authzstore.NewLog(s, 8)
	for i := 0; i < 10; i++ {
		if err := log.Append(ctx, &authzstore.DecisionRecord{ID: fmt.Sprint(i), Tenant: "t", Time: time.Now()}, i == 9); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	before, _ := s.Snapshot(ctx)
	s2 := openStore(t, dsn)
	after, err := s2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version || !slices.Equal(after.Rules, before.Rules) || !slices.Equal(after.Links, before.Links) {
		t.Fatalf("policy differs on a second store: v%d/%d", before.Version, after.Version)
	}
	recs, _, _ := s2.ListDecisions(ctx, authzstore.Filter{Tenant: "t"}, 100, 0)
	if len(recs) != 10 {
		t.Fatalf("%d decisions on a second store", len(recs))
	}
}

// TestConcurrentAppliesAcrossStores: 40 API changes through two stores on
// two pools (two replicas) all land, each bumps the version exactly once,
// and exactly one of two concurrent seeds seeds.
func TestConcurrentAppliesAcrossStores(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	stores := []*Store{openStore(t, dsn), openStore(t, dsn)}
	var wg sync.WaitGroup
	seeded := make(chan bool, 2)
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.SeedDefault(ctx, authzcasbin.DefaultRules())
			if err != nil {
				t.Error(err)
			}
			seeded <- ok
		}()
	}
	wg.Wait()
	if a, b := <-seeded, <-seeded; a == b {
		t.Fatalf("seeds: %v %v, want exactly one", a, b)
	}
	const n = 40
	versions := make(chan int64, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := authzcasbin.Rule{Subject: fmt.Sprintf("r%d", i), Tenant: "*", Resource: "tool", Target: "t", Action: "call", Effect: "allow"}
			v, changed, err := stores[i%2].Apply(ctx, authzstore.Change{AddRules: []authzcasbin.Rule{r}})
			if err != nil || changed != 1 {
				t.Errorf("apply %d: %d %v", i, changed, err)
			}
			versions <- v
		}()
	}
	wg.Wait()
	close(versions)
	var got []int64
	for v := range versions {
		got = append(got, v)
	}
	slices.Sort(got)
	for i, v := range got {
		if v != int64(i+2) {
			t.Fatalf("versions after seed (v1): %v, want 2..%d each once", got, n+1)
		}
	}
	set, _ := stores[0].Snapshot(ctx)
	if set.Version != n+1 || len(set.Rules) != len(authzcasbin.DefaultRules())+n {
		t.Fatalf("snapshot v%d with %d rules", set.Version, len(set.Rules))
	}
}

// TestDecisionLogStoreFailure: an append to a store whose pool is gone
// fails the waiting caller.
func TestDecisionLogStoreFailure(t *testing.T) {
	pool := newPool(t, pgtest.DSN(t))
	s, err := Open(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	log := authzstore.NewLog(s, 8)
	defer log.Close()
	pool.Close() // the database goes away under the log
	if err := log.Append(context.Background(), &authzstore.DecisionRecord{ID: "x", Tenant: "t", Time: time.Now()}, true); err == nil {
		t.Fatal("append to a closed pool succeeded")
	}
}

func crashHelper(dsn string) {
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	s, err := Open(context.Background(), pool)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	log := authzstore.NewLog(s, 64)
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("c-%d-%d", g, i)
				rec := &authzstore.DecisionRecord{ID: id, Kind: authzstore.KindAuthorize, Time: time.Now(), Tenant: "t", Subject: "s", Resource: "tool", Action: "call", Target: "x"}
				if err := log.Append(context.Background(), rec, true); err != nil {
					return
				}
				mu.Lock()
				fmt.Fprintln(out, id)
				out.Flush()
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
}

// TestDenyDurableAcrossKill9: every decision acknowledged by the log (the
// point where Authorize answers a deny) is in the database after the
// writing process is killed with SIGKILL mid-stream.
func TestDenyDurableAcrossKill9(t *testing.T) {
	dsn := pgtest.DSN(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TP_AUTHZ_PG_CRASH_DSN="+dsn)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "ERR") {
			t.Fatal(line)
		}
		acked[line] = true
		if len(acked) == 300 {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	for sc.Scan() { // lines printed before the kill landed
		acked[sc.Text()] = true
	}
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("helper acknowledged only %d records", len(acked))
	}
	pool := newPool(t, dsn)
	rows, err := pool.Query(context.Background(), `SELECT id FROM authz.decisions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := map[string]bool{}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		stored[id] = true
	}
	for id := range acked {
		if !stored[id] {
			t.Fatalf("acknowledged decision %s lost after kill -9 (%d acknowledged, %d stored)", id, len(acked), len(stored))
		}
	}
	t.Logf("%d acknowledged, %d stored after SIGKILL", len(acked), len(stored))
}

// TestMigrationsExpandOnly: every migration of the schema can run while the
// previous release still uses it (internal/pgstore.ContractingStatements).
func TestMigrationsExpandOnly(t *testing.T) {
	bad, err := pgstore.ContractingStatements(Migrations())
	if err != nil || len(bad) > 0 {
		t.Fatalf("%v\n%s", err, strings.Join(bad, "\n"))
	}
}

// TestDenyDurableAcrossServerCrash: on a database whose default is
// synchronous_commit = off (a server tuned for throughput), every decision
// whose Append(wait=true) returned is still there after the PostgreSQL
// server is killed with SIGKILL and recovers: AppendDecisions commits with
// synchronous_commit on, so an acknowledged deny is on the WAL.
func TestDenyDurableAcrossServerCrash(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	setup := newPool(t, dsn)
	if _, err := setup.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = off', current_database()); END $$`); err != nil {
		t.Fatal(err)
	}
	setup.Close()
	pool := newPool(t, dsn)
	var sc string
	if err := pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sc); err != nil || sc != "off" {
		t.Fatalf("synchronous_commit = %q %v, want the database default off", sc, err)
	}
	s, err := Open(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	log := authzstore.NewLog(s, 64)
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("s-%d-%d", g, i)
				rec := &authzstore.DecisionRecord{ID: id, Kind: authzstore.KindAuthorize, Time: time.Now(), Tenant: "t", Subject: "s", Resource: "tool", Action: "call", Target: "x"}
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := log.Append(actx, rec, true)
				cancel()
				if err != nil {
					return
				}
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		}()
	}
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 400 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	pgtest.Crash(t) // while the writers keep appending
	close(stop)
	wg.Wait()
	log.Close()
	after := newPool(t, dsn)
	ids, err := after.Query(ctx, `SELECT id FROM authz.decisions`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for ids.Next() {
		var id string
		_ = ids.Scan(&id)
		stored[id] = true
	}
	ids.Close()
	mu.Lock()
	defer mu.Unlock()
	lost := 0
	for id := range acked {
		if !stored[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged decisions lost in the server crash (%d stored)", lost, len(acked), len(stored))
	}
	t.Logf("%d acknowledged, %d stored after the server was killed", len(acked), len(stored))
}

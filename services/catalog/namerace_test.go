package catalog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
	"github.com/toolplane/toolplane/services/catalog/catalogpg"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// TestNameRaceTwoReplicasPostgres: two catalog replicas (two identity
// stores on their own pools) on one PostgreSQL database assign names for
// the same colliding pairs at the same moment, each seeing them in the
// opposite order, so each wants to give `a_b_c` to a different pair. The
// database refuses one of the two writes (UNIQUE (scope, name)); after the
// next rebuild both replicas serve one assignment, the one stored
// (docs/decisions/0100). Repeated over fresh databases.
func TestNameRaceTwoReplicasPostgres(t *testing.T) {
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	ab := catalognames.Original{Server: "a", Tool: "b_c", Prefixed: true}
	abc := catalognames.Original{Server: "a_b", Tool: "c", Prefixed: true}
	// A tenant pair in the same race: it must not take a global name either.
	ten := catalognames.Original{Server: "a_b_c", Tool: "x", Prefixed: false}
	orders := [2][]catalognames.Original{{ab, abc, ten}, {abc, ab, {Server: "a_b_c", Tool: "x"}}}
	scopes := []string{"*", "*", "acme"}
	for round := 0; round < rounds; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			ctx := context.Background()
			dsn := pgtest.DSN(t)
			var reps [2]*identity
			for i := range reps {
				pool, err := pgxpool.New(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
				st, err := catalogpg.Open(ctx, pool)
				if err != nil {
					t.Fatal(err)
				}
				reps[i] = &identity{store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)), retention: time.Hour, maxPerServer: 100}
				if err := reps[i].load(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range reps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					reps[i].assign(orders[i], scopes, time.Now(), true)
				}()
			}
			close(start)
			wg.Wait()
			// The next rebuild of each replica (now sequential, as rebuilds
			// follow one another): both converge on the stored assignment.
			var got [2]map[catalognames.Key]string
			for i := range reps {
				res, _ := reps[i].assign(orders[i], scopes, time.Now(), true)
				got[i] = map[catalognames.Key]string{}
				for j, o := range orders[i] {
					got[i][catalognames.KeyOf(o)] = res[j].Name
				}
			}
			for k, n := range got[0] {
				if got[1][k] != n {
					t.Fatalf("replicas disagree on %v: %q vs %q", k, n, got[1][k])
				}
			}
			rows, err := reps[0].store.LoadNames(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 3 {
				t.Fatalf("store holds %d rows, want 3: %v", len(rows), rows)
			}
			names := map[string]bool{}
			for _, r := range rows {
				k := catalognames.Key{Server: r.Server, Tool: r.Tool}
				if got[0][k] != r.Name {
					t.Fatalf("replica serves %q for %v, store holds %q", got[0][k], k, r.Name)
				}
				if names[r.Name] {
					t.Fatalf("name %q stored twice", r.Name)
				}
				names[r.Name] = true
			}
			if got[0][catalognames.KeyOf(ab)] != "a_b_c" && got[0][catalognames.KeyOf(abc)] != "a_b_c" {
				t.Fatalf("neither global pair holds a_b_c: %v", got[0])
			}
			if got[0][catalognames.KeyOf(ten)] == "a_b_c" {
				t.Fatal("the tenant pair took the name a global pair wants")
			}
		})
	}
}

// TestNameRaceAcrossScopesPostgres: one replica sees only the global pair
// a_b/c, the other only acme's a/b_c, both wanting a_b_c, at the same
// moment: the database accepts both rows (different scopes). Once each
// replica sees both pairs (the next rebuild), both converge on the global
// pair holding a_b_c and acme's pair the deterministic suffix, in memory and
// in the store.
func TestNameRaceAcrossScopesPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	g := catalognames.Original{Server: "a_b", Tool: "c", Prefixed: true}
	ten := catalognames.Original{Server: "a", Tool: "b_c", Prefixed: true}
	var reps [2]*identity
	for i := range reps {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := catalogpg.Open(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = &identity{store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)), retention: time.Hour, maxPerServer: 100}
		if err := reps[i].load(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); reps[0].assign([]catalognames.Original{g}, []string{"*"}, time.Now(), true) }()
	go func() {
		defer wg.Done()
		reps[1].assign([]catalognames.Original{ten}, []string{"acme"}, time.Now(), true)
	}()
	wg.Wait()
	both := []catalognames.Original{ten, g}
	for i := range reps {
		res, _ := reps[i].assign(both, []string{"acme", "*"}, time.Now(), true)
		if res[1].Name != "a_b_c" || !strings.HasPrefix(res[0].Name, "a_b_c_") {
			t.Fatalf("replica %d: tenant %q, global %q", i, res[0].Name, res[1].Name)
		}
	}
	rows, err := reps[0].store.LoadNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Scope+"|"+r.Server+"/"+r.Tool] = r.Name
	}
	if len(rows) != 2 || got["*|a_b/c"] != "a_b_c" || !strings.HasPrefix(got["acme|a/b_c"], "a_b_c_") {
		t.Fatalf("stored: %v", got)
	}
}

// TestNamesCapPerServer: a server that keeps inventing tool names holds at
// most catalog.max_names_per_server stored assignments: the least recently
// seen retained ones are evicted first, present ones never, and names of
// present tools beyond the cap are served but not recorded.
func TestNamesCapPerServer(t *testing.T) {
	st, err := catalogstore.Open(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	evicted := map[string]int{}
	id := &identity{store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)), retention: 30 * 24 * time.Hour, maxPerServer: 5,
		onEvict: func(srv string, n int) { evicted[srv] += n }}
	if err := id.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	other := catalognames.Original{Server: "calm", Tool: "t", Prefixed: true}
	now := time.Now()
	// 12 listings, each with two new names of server "inv" (and calm/t).
	for i := 0; i < 12; i++ {
		origs := []catalognames.Original{other, {Server: "inv", Tool: fmt.Sprintf("n%02da", i), Prefixed: true}, {Server: "inv", Tool: fmt.Sprintf("n%02db", i), Prefixed: true}}
		id.assign(origs, []string{"*", "*", "*"}, now.Add(time.Duration(i)*time.Minute), true)
	}
	rows, err := st.LoadNames(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var inv []string
	for _, r := range rows {
		if r.Server == "inv" {
			inv = append(inv, r.Tool)
		}
	}
	slices.Sort(inv)
	// The last listing's two are present; the three most recently seen retained ones stay.
	// (n09a and n09b were seen at the same time; the tool name breaks the tie.)
	if want := []string{"n09b", "n10a", "n10b", "n11a", "n11b"}; !slices.Equal(inv, want) {
		t.Fatalf("stored names of the inventing server: %v (want the 5 most recently seen, both present ones included)", inv)
	}
	if !slices.ContainsFunc(rows, func(r catalogstore.NameRow) bool { return r.Server == "calm" }) {
		t.Fatal("another server's name was evicted")
	}
	// 24 names assigned, 5 kept: 19 evictions reported, all for "inv".
	if len(evicted) != 1 || evicted["inv"] != 19 {
		t.Fatalf("evictions reported: %v, want inv: 19", evicted)
	}
	// Six present tools against a cap of 5: every one is served, five recorded.
	var origs []catalognames.Original
	for i := 0; i < 6; i++ {
		origs = append(origs, catalognames.Original{Server: "wide", Tool: fmt.Sprintf("w%d", i), Prefixed: true})
	}
	res, prov := id.assign(origs, []string{"*", "*", "*", "*", "*", "*"}, now.Add(time.Hour), true)
	recorded := 0
	for i := range res {
		if res[i].Name == "" {
			t.Fatalf("tool %d got no name", i)
		}
		if !prov[i] {
			recorded++
		}
	}
	if recorded != 5 {
		t.Fatalf("%d of 6 present names recorded, want 5 (the cap)", recorded)
	}
}

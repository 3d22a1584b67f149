package authz

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/authz/authzpg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestPolicyAcrossReplicas: two authz servers (two pools, as two processes)
// on one PostgreSQL database, with the periodic version check set to an
// hour so only LISTEN/NOTIFY can carry a change: a policy change made on
// one reaches the other within 1 s — its decisions (stamped with the new
// version) and its WatchPolicy stream — also after the listening connection
// was killed (the reconnection re-checks the version, so a change made while
// it was down is not missed) (docs/decisions/0085-policy-propagation.md).
func TestPolicyAcrossReplicas(t *testing.T) {
	ctx := ctxT(t)
	dsn := pgtest.DSN(t)
	replica := func() *harness {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return startEnv(t, svckit.Env{DataDir: t.TempDir(), Logger: quietLogger(), Postgres: pool}, func(c *Config) { c.ReloadInterval = time.Hour })
	}
	a, b := replica(), replica()
	watch, err := b.svc.WatchPolicy(ctx, &authzv1.WatchPolicyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := watch.Recv()
	if err != nil {
		t.Fatal(err)
	}
	ask := func(h *harness) *authzv1.Decision {
		t.Helper()
		r, err := h.svc.Authorize(ctx, &authzv1.AuthorizeRequest{Principal: alice, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL,
			Action: authzv1.Action_ACTION_CALL, Target: "web_search"})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetDecision()
	}
	if d := ask(b); !d.GetAllow() || d.GetPolicyVersion() != first.GetPolicyVersion() {
		t.Fatalf("before the change: %v (watch at %d)", d, first.GetPolicyVersion())
	}
	change := func(effect authzv1.PolicyEffect, add bool) int64 {
		t.Helper()
		p := []*authzv1.Policy{{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "web_search", Action: authzv1.Action_ACTION_CALL, Effect: effect}}
		if add {
			r, err := a.admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: p})
			if err != nil {
				t.Fatal(err)
			}
			return r.GetPolicyVersion()
		}
		r, err := a.admin.RemovePolicies(ctx, &authzv1.RemovePoliciesRequest{Policies: p})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetPolicyVersion()
	}
	// reaches waits for replica b to decide at version v with allow.
	reaches := func(what string, v int64, allow bool, since time.Time) time.Duration {
		t.Helper()
		for {
			d := ask(b)
			if d.GetPolicyVersion() == v && d.GetAllow() == allow {
				took := time.Since(since)
				if took > time.Second {
					t.Fatalf("%s: replica B decided at version %d after %s; want within 1s", what, v, took)
				}
				return took
			}
			if d.GetPolicyVersion() > v || time.Since(since) > time.Second {
				t.Fatalf("%s: replica B decides %v at version %d after %s; want allow=%v at %d", what, d.GetAllow(), d.GetPolicyVersion(), time.Since(since), allow, v)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t0 := time.Now()
	v := change(authzv1.PolicyEffect_POLICY_EFFECT_DENY, true)
	took := reaches("deny added on A", v, false, t0)
	got, err := watch.Recv()
	if err != nil || got.GetPolicyVersion() != v {
		t.Fatalf("replica B's WatchPolicy = %v, %v; want version %d", got, err, v)
	}
	// The listening connections die; a change made before they are back
	// still arrives (the reconnection re-checks the version).
	admin := pgtest.Pool(t) // any connection of the cluster may terminate backends
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, authzpg.ListenerApplicationName).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 2 {
		t.Fatalf("terminated %d listening connections; want 2 (one per replica)", killed)
	}
	t1 := time.Now()
	v2 := change(authzv1.PolicyEffect_POLICY_EFFECT_DENY, false)
	took2 := reaches("deny removed on A while B's listener was down", v2, true, t1)
	if got, err := watch.Recv(); err != nil || got.GetPolicyVersion() != v2 {
		t.Fatalf("replica B's WatchPolicy after the reconnection = %v, %v; want %d", got, err, v2)
	}
	t.Logf("policy change visible on the other replica after %s; after a killed listener %s", took.Round(time.Millisecond), took2.Round(time.Millisecond))
}

// TestPolicyFileImportedByOneReplica: two replicas on one database, each
// with its own authz.policy_file (a rolling config change): only the holder
// of authz.file_import imports its file, the other follows the database;
// when the holder stops, the other takes the lock over and imports its own
// file.
func TestPolicyFileImportedByOneReplica(t *testing.T) {
	ctx := ctxT(t)
	dsn := pgtest.DSN(t)
	replica := func(file string) *harness {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return startEnv(t, svckit.Env{DataDir: t.TempDir(), Logger: quietLogger(), Postgres: pool}, func(c *Config) { c.PolicyFile = file })
	}
	dir := t.TempDir()
	fileA, fileB := dir+"/a.csv", dir+"/b.csv"
	writeFile(t, fileA, "p, user, *, tool, only_a, call, deny\n")
	writeFile(t, fileB, "p, user, *, tool, only_b, call, deny\n")
	a := replica(fileA)
	b := replica(fileB)
	allowed := func(h *harness, target string) bool {
		t.Helper()
		r, err := h.svc.Authorize(ctx, &authzv1.AuthorizeRequest{Principal: alice, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL,
			Action: authzv1.Action_ACTION_CALL, Target: target})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetDecision().GetAllow()
	}
	// wait polls until b decides as want (bounded).
	wait := func(what string, want map[string]bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok := true
			for target, allow := range want {
				if allowed(b, target) != allow {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: replica b never decided %v", what, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait("a's file imported, b's not", map[string]bool{"only_a": false, "only_b": true})
	// Give b's reload loop many ticks: its own file must still not be imported.
	time.Sleep(500 * time.Millisecond)
	if !allowed(b, "only_b") || !allowed(a, "only_b") {
		t.Fatal("the replica without authz.file_import imported its policy file")
	}
	// An edit of the importer's file reaches the other replica.
	writeFile(t, fileA, "p, user, *, tool, only_a2, call, deny\n")
	wait("a's edited file", map[string]bool{"only_a": true, "only_a2": false, "only_b": true})
	// The importer stops: b takes the lock over and imports its own file.
	a.srv.Close()
	wait("b took the import over", map[string]bool{"only_a2": true, "only_b": false})
}

package catalog

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogpg"
)

// dbServer is a stdio server entry that never starts (disabled), so the
// replicas' configuration is compared without MCP children.
func dbServer(name string) string {
	return fmt.Sprintf(`%q: {"command": "node", "args": [%q], "enabled": false}`, name, name+".js")
}

// pgReplica starts a catalog over its own pool of dsn, with its own data
// directory and extensions file holding ext.
func pgReplica(t *testing.T, dsn, ext string, mut func(*Config, *svckit.Env)) *harness {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return start(t, ext, func(c *Config, env *svckit.Env) {
		env.Postgres = pool
		if mut != nil {
			mut(c, env)
		}
	})
}

// dbPool is a pool of its own on dsn, for the test's own queries.
func dbPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// names lists the configured servers of h in order.
func (h *harness) names(t *testing.T) []string {
	t.Helper()
	ls, err := h.admin.ListServers(ctxT(t), &catalogv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range ls.GetServers() {
		out = append(out, s.GetConfig().GetName())
	}
	return out
}

// importer reports whether h holds catalog.file_import.
func (h *harness) importer() bool {
	h.srv.writeMu.Lock()
	defer h.srv.writeMu.Unlock()
	return h.srv.db.importer
}

// propagated waits (polling every 2 ms, at most 5 s) until h lists want and
// returns how long it took from since.
func propagated(t *testing.T, h *harness, since time.Time, what string, want []string) time.Duration {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got := h.names(t); slices.Equal(got, want) {
			return time.Since(since)
		} else if time.Now().After(deadline) {
			t.Fatalf("%s: after 5 s the replica lists %v, want %v", what, got, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestConfigAcrossReplicas: two catalogs on one PostgreSQL database. The
// first holds catalog.file_import and imports its file; the second
// ignores its own file and follows the database. ReplaceServers on either
// replica and a file edit on the importing one reach the other within 2 s
// (measured, logged); the files are not written; a changed file overrides
// only the servers that changed in it; empty, `{}` and null files keep the
// stored configuration; writers on both replicas are serialised (no lost
// update); when the importer's lock connection dies the other replica
// takes the import over.
func TestConfigAcrossReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := dbPool(t, dsn)
	a := pgReplica(t, dsn, extJSON(dbServer("one"), dbServer("two")), nil)
	b := pgReplica(t, dsn, extJSON(dbServer("ignored")), nil)
	ctx := ctxT(t)
	if !a.importer() || b.importer() {
		t.Fatalf("importer: a=%v b=%v, want the first replica only", a.importer(), b.importer())
	}
	if got := b.names(t); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("second replica lists %v, want the database's [one two]", got)
	}
	fileA, _ := os.ReadFile(a.path)
	fileB, _ := os.ReadFile(b.path)

	// ReplaceServers on B reaches A.
	ls, err := b.admin.ListServers(ctx, &catalogv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfgs := []*catalogv1.ServerConfig{ls.Servers[0].Config, ls.Servers[1].Config,
		{Name: "three", Command: "node", Args: []string{"three.js"}, Enabled: new(false), Env: map[string]string{"API_TOKEN": "${TP_CFG_SECRET}", "LITERAL": "lit-s3cr3t"}}}
	t0 := time.Now()
	if _, err := b.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: cfgs}); err != nil {
		t.Fatal(err)
	}
	d1 := propagated(t, a, t0, "ReplaceServers on B", []string{"one", "two", "three"})

	// ReplaceServers on A reaches B (removing "two").
	t0 = time.Now()
	ls, _ = a.admin.ListServers(ctx, &catalogv1.ListServersRequest{})
	if _, err := a.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{ls.Servers[0].Config, ls.Servers[2].Config}}); err != nil {
		t.Fatal(err)
	}
	d2 := propagated(t, b, t0, "ReplaceServers on A", []string{"one", "three"})

	// Secrets: masked on the other replica; stored as the file would hold
	// them (placeholder unexpanded, the "***" of the write merged back).
	ls, _ = b.admin.ListServers(ctx, &catalogv1.ListServersRequest{})
	js, _ := protojson.Marshal(ls)
	if strings.Contains(string(js), "lit-s3cr3t") || strings.Contains(string(js), "TP_CFG_SECRET") {
		t.Fatalf("secret visible on the other replica: %s", js)
	}
	var entry string
	if err := db.QueryRow(ctx, `SELECT entry::text FROM catalog.servers WHERE name = 'three'`).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(entry, "${TP_CFG_SECRET}") || !strings.Contains(entry, "lit-s3cr3t") {
		t.Fatalf("stored entry lost the placeholder or the secret merged back from ***: %s", entry)
	}

	// The files were not written by the API.
	if now, _ := os.ReadFile(a.path); string(now) != string(fileA) {
		t.Fatalf("ReplaceServers wrote the importer's file on PostgreSQL:\n%s", now)
	}
	if now, _ := os.ReadFile(b.path); string(now) != string(fileB) {
		t.Fatalf("ReplaceServers wrote the follower's file on PostgreSQL:\n%s", now)
	}

	// A file edit on the importer (A) reaches B. "one" is unchanged in the
	// file and "two" (removed by the API) too: neither is re-imported;
	// "four" is new.
	t0 = time.Now()
	writeExt(t, a.path, extJSON(dbServer("one"), dbServer("two"), dbServer("four")))
	d3 := propagated(t, b, t0, "file edit on the importer", []string{"one", "three", "four"})

	// A changed entry in the file overrides the API's write of it.
	writeExt(t, a.path, extJSON(`"one": {"command": "node", "args": ["one-v2.js"], "enabled": false}`, dbServer("two"), dbServer("four")))
	eventually(t, 5*time.Second, "changed file entry on B", func() bool {
		s := b.server("one")
		return s != nil && slices.Equal(s.GetConfig().GetArgs(), []string{"one-v2.js"})
	})
	// Removing a file server from the file removes it; the API's "three" stays.
	t0 = time.Now()
	writeExt(t, a.path, extJSON(`"one": {"command": "node", "args": ["one-v2.js"], "enabled": false}`, dbServer("two")))
	d4 := propagated(t, b, t0, "file server removed", []string{"one", "three"})

	// Safe reloads: an empty, `{}` or null file keeps the stored configuration.
	for _, bad := range []string{"", "{}", `{"mcpServers": null}`} {
		writeExt(t, a.path, bad)
		time.Sleep(500 * time.Millisecond) // five reload ticks
		if got := b.names(t); !slices.Equal(got, []string{"one", "three"}) {
			t.Fatalf("file %q changed the configuration: %v", bad, got)
		}
	}

	// Concurrent writers on both replicas: each UpdateServer lands (the
	// configuration row lock serialises them; none edits a stale list).
	errs := make(chan error, 2)
	for _, x := range []struct {
		h    *harness
		name string
	}{{a, "one"}, {b, "three"}} {
		go func() {
			_, err := x.h.admin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: x.name, Server: &catalogv1.ServerUpdate{Enabled: new(false)}})
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := a.names(t); !slices.Equal(got, []string{"one", "three"}) {
		t.Fatalf("after concurrent writes: %v", got)
	}

	// The importer's lock connection dies: B takes the import over and
	// imports B's file (its content differs from the one imported last):
	// "ignored" is new; "one" and "two", the file's servers of the content
	// imported before, are no longer in it and go; "three" (API) stays.
	t0 = time.Now()
	if _, err := db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'toolplane-catalog-file-import' AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "B imports", b.importer)
	takeover := time.Since(t0)
	eventually(t, 2*time.Second, "A notices it lost the lock", func() bool { return !a.importer() })
	d5 := propagated(t, a, t0, "B's file after the takeover", []string{"three", "ignored"})
	// A's file is no longer imported.
	writeExt(t, a.path, extJSON(dbServer("from-a")))
	time.Sleep(500 * time.Millisecond)
	if got := b.names(t); slices.Contains(got, "from-a") {
		t.Fatalf("the replica that lost the lock still imports its file: %v", got)
	}
	// A graceful stop of the importer hands the import over at the other
	// replica's next tick.
	t1 := time.Now()
	b.close()
	eventually(t, 2*time.Second, "A imports after B stopped", a.importer)
	handover := time.Since(t1)
	t.Logf("handover after a graceful stop: %v", handover.Round(time.Millisecond))
	t.Logf("propagation: ReplaceServers B→A %v, A→B %v; file edit A→B %v, removal %v; takeover %v, B's file → A %v",
		d1.Round(time.Millisecond), d2.Round(time.Millisecond), d3.Round(time.Millisecond), d4.Round(time.Millisecond), takeover.Round(time.Millisecond), d5.Round(time.Millisecond))
	for i, d := range []time.Duration{d1, d2, d3, d4} {
		if d > 2*time.Second {
			t.Errorf("change %d took %v to reach the other replica, want <= 2s", i+1, d)
		}
	}
}

// TestConfigFallbackWithoutNotify: a replica that gets no notification
// (its LISTEN connection off) still applies a ReplaceServers of the other
// replica through the version check, within 2 s.
func TestConfigFallbackWithoutNotify(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := pgReplica(t, dsn, extJSON(dbServer("one")), nil)
	listenOff.Store(true)
	b := pgReplica(t, dsn, extJSON(dbServer("one")), func(c *Config, _ *svckit.Env) { c.ReloadInterval = 500 * time.Millisecond })
	listenOff.Store(false)
	ctx := ctxT(t)
	t0 := time.Now()
	if _, err := a.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{
		{Name: "two", Command: "node", Args: []string{"two.js"}, Enabled: new(false)}}}); err != nil {
		t.Fatal(err)
	}
	d := propagated(t, b, t0, "ReplaceServers without NOTIFY", []string{"two"})
	t.Logf("propagation through the version check alone (reload_interval 500ms): %v", d.Round(time.Millisecond))
	if d > 2*time.Second {
		t.Fatalf("took %v, want <= 2s", d)
	}
}

// TestConfigImportFailsStartOnBadFile: like on sqlite, the importing
// replica does not start on a file that does not parse, naming it; the
// stored configuration is untouched.
func TestConfigImportFailsStartOnBadFile(t *testing.T) {
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	path := dir + "/extensions_config.json"
	writeExt(t, path, `{"mcpServers": {"x": {"command": 7}}}`)
	_, err = New(context.Background(), Config{ExtensionsConfig: path, FileCommandPolicy: "off"}, svckit.Env{DataDir: dir, Postgres: pool})
	if err == nil || !strings.Contains(err.Error(), "catalog.extensions_config") {
		t.Fatalf("New with a bad file: %v", err)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM catalog.servers`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("stored servers after a failed import: %d %v", n, err)
	}
	// The lock was given up: a correct start now imports.
	writeExt(t, path, extJSON(dbServer("ok")))
	h := pgReplica(t, dsn, extJSON(dbServer("ok")), nil)
	if !h.importer() || !slices.Equal(h.names(t), []string{"ok"}) {
		t.Fatalf("after the failed start: importer %v, servers %v", h.importer(), h.names(t))
	}
}

func writeExt(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestReadyIncludesDatabase: the catalog's readiness (/readyz, gRPC
// health) fails while its PostgreSQL database refuses connections, without
// naming the DSN, and recovers with it; on sqlite it pings catalog.db.
func TestReadyIncludesDatabase(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := pgReplica(t, dsn, extJSON(dbServer("one")), nil)
	ctx := ctxT(t)
	if err := h.srv.Ready(ctx); err != nil {
		t.Fatalf("ready with the database up: %v", err)
	}
	admin := dbPool(t, pgtest.Admin(t))
	var name string
	if err := h.srv.db.db.(*catalogpg.Store).Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+ident+` WITH ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		_, _ = admin.Exec(context.Background(), `ALTER DATABASE `+ident+` WITH ALLOW_CONNECTIONS true`)
	}
	defer restore()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
		t.Fatal(err)
	}
	var err error
	t0 := time.Now()
	eventually(t, 5*time.Second, "not ready without the database", func() bool { err = h.srv.Ready(ctx); return err != nil })
	took := time.Since(t0)
	if took > 3*time.Second {
		t.Fatalf("readiness took %v to fail", took)
	}
	if strings.Contains(err.Error(), dsn) || strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), "store unreachable") {
		t.Fatalf("readiness error: %v", err)
	}
	restore()
	t1 := time.Now()
	eventually(t, 10*time.Second, "ready again", func() bool { return h.srv.Ready(ctx) == nil })
	t.Logf("readiness failed %v after the database went away and was back %v after it returned", took.Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))

	// sqlite: the catalog.db handle is pinged too (closed: not ready).
	sq := start(t, extJSON(dbServer("one")), nil)
	if err := sq.srv.Ready(ctx); err != nil {
		t.Fatalf("sqlite ready: %v", err)
	}
	_ = sq.srv.store.(interface{ Close() error }).Close()
	if err := sq.srv.Ready(ctx); err == nil || !strings.Contains(err.Error(), "store unreachable") {
		t.Fatalf("sqlite with catalog.db closed: %v", err)
	}
}

// TestConfigTenantAdminAcrossReplicas: a tenant admin's ReplaceServers on
// one replica reaches the other with the tenant rules intact: the other
// tenants' and the file's servers are kept, another tenant's admin does
// not see or change it, and a tenant admin still cannot write a stdio server.
func TestConfigTenantAdminAcrossReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := pgReplica(t, dsn, extJSON(dbServer("shared")), nil)
	b := pgReplica(t, dsn, extJSON(dbServer("shared")), nil)
	ctx := ctxT(t)
	if _, err := b.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{
		{Name: "acme1", Type: catalogv1.ServerType_SERVER_TYPE_HTTP, Url: "http://127.0.0.1:1/mcp", Enabled: new(false), Tenants: []string{"acme"}}}}); err != nil {
		t.Fatal(err)
	}
	propagated(t, a, time.Now(), "tenant admin's write", []string{"shared", "acme1"})
	ls, err := a.acmeAdmin.ListServers(ctx, &catalogv1.ListServersRequest{})
	if err != nil || len(ls.GetServers()) != 1 || ls.GetServers()[0].GetConfig().GetName() != "acme1" {
		t.Fatalf("acme admin on the other replica lists %v, %v", ls.GetServers(), err)
	}
	if ls, _ := a.betaAdmin.ListServers(ctx, &catalogv1.ListServersRequest{}); len(ls.GetServers()) != 0 {
		t.Fatalf("beta admin sees %v", ls.GetServers())
	}
	if _, err := a.betaAdmin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "acme1", Server: &catalogv1.ServerUpdate{Enabled: new(true)}}); codeOf(err) != codes.NotFound {
		t.Fatalf("beta admin changing acme's server on the other replica: %v", err)
	}
	if _, err := a.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{
		{Name: "acme1", Command: "node", Args: []string{"a.js"}, Cwd: "/etc", Tenants: []string{"acme"}}}}); codeOf(err) != codes.PermissionDenied ||
		!strings.Contains(err.Error(), "servers[0].type") {
		t.Fatalf("tenant admin writing a stdio server with a host cwd on PostgreSQL: %v", err)
	}
	// The refused write changed nothing, on either replica.
	time.Sleep(300 * time.Millisecond)
	if got := b.names(t); !slices.Equal(got, []string{"shared", "acme1"}) {
		t.Fatalf("after a refused write: %v", got)
	}
	if s := b.server("acme1"); s.GetConfig().GetCwd() != "" {
		t.Fatalf("refused cwd stored: %v", s.GetConfig())
	}
}

// TestMergeFile: the three-way import rule of decision 0087.
func TestMergeFile(t *testing.T) {
	row := func(name, origin, entry string) catalogpg.ServerRow {
		return catalogpg.ServerRow{Name: name, Origin: origin, Entry: []byte(entry)}
	}
	cur := []catalogpg.ServerRow{
		row("kept", catalogpg.OriginFile, `{"v":1}`),       // unchanged in the file
		row("edited", catalogpg.OriginAPI, `{"v":"api"}`),  // API edit of a file server, unchanged in the file
		row("changed", catalogpg.OriginAPI, `{"v":"api"}`), // changed in the file: the file wins
		row("gone", catalogpg.OriginFile, `{"v":1}`),       // removed from the file
		row("apionly", catalogpg.OriginAPI, `{"v":1}`),     // never in the file
		row("stray", catalogpg.OriginFile, `{"v":1}`),      // a file row the previous content did not list
	}
	prev := map[string][]byte{"kept": []byte(`{"v":1}`), "edited": []byte(`{"v":1}`), "changed": []byte(`{"v":1}`), "gone": []byte(`{"v":1}`)}
	file := []catalogconfig.Server{{Name: "kept"}, {Name: "edited"}, {Name: "changed"}, {Name: "new"}}
	entries := map[string][]byte{"kept": []byte(`{"v":1}`), "edited": []byte(`{"v":1}`), "changed": []byte(`{"v":2}`), "new": []byte(`{"v":1}`)}
	got := mergeFile(cur, file, entries, prev, false)
	want := []catalogpg.ServerRow{
		row("kept", catalogpg.OriginFile, `{"v":1}`),
		row("edited", catalogpg.OriginAPI, `{"v":"api"}`),
		row("changed", catalogpg.OriginFile, `{"v":2}`),
		row("apionly", catalogpg.OriginAPI, `{"v":1}`),
		row("stray", catalogpg.OriginFile, `{"v":1}`),
		row("new", catalogpg.OriginFile, `{"v":1}`),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merge:\n got %s\nwant %s", rowsText(got), rowsText(want))
	}
	// force (ReloadServers): every file entry is written, file rows the
	// file does not list go, API rows stay.
	got = mergeFile(cur, file, entries, nil, true)
	want = []catalogpg.ServerRow{
		row("kept", catalogpg.OriginFile, `{"v":1}`),
		row("edited", catalogpg.OriginFile, `{"v":1}`),
		row("changed", catalogpg.OriginFile, `{"v":2}`),
		row("apionly", catalogpg.OriginAPI, `{"v":1}`),
		row("new", catalogpg.OriginFile, `{"v":1}`),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("forced merge:\n got %s\nwant %s", rowsText(got), rowsText(want))
	}
}

func rowsText(rs []catalogpg.ServerRow) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s/%s/%s ", r.Name, r.Origin, r.Entry)
	}
	return b.String()
}

// TestConfigConcurrentWritersAcrossReplicas: UpdateServer calls on both
// replicas at once, each on another server, all land on both replicas:
// an edit made on rows another writer changed meanwhile is run again, not
// written over them.
func TestConfigConcurrentWritersAcrossReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	var servers []string
	for i := range 4 {
		servers = append(servers, fixtureServer(fmt.Sprintf("f%d", i), `"enabled": false`))
	}
	a := pgReplica(t, dsn, extJSON(servers...), nil)
	b := pgReplica(t, dsn, extJSON(servers...), nil)
	ctx := ctxT(t)
	errs := make(chan error, 4)
	for i := range 4 {
		h := a
		if i%2 == 1 {
			h = b
		}
		go func() {
			_, err := h.admin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: fmt.Sprintf("f%d", i), Server: &catalogv1.ServerUpdate{Enabled: new(true)}})
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for name, h := range map[string]*harness{"A": a, "B": b} {
		eventually(t, 5*time.Second, "every server enabled on "+name, func() bool {
			for i := range 4 {
				if !h.server(fmt.Sprintf("f%d", i)).GetConfig().GetEnabled() {
					return false
				}
			}
			return true
		})
	}
	var origins string
	if err := dbPool(t, dsn).QueryRow(ctx, `SELECT string_agg(origin, ',' ORDER BY position) FROM catalog.servers`).Scan(&origins); err != nil || origins != "api,api,api,api" {
		t.Fatalf("origins %q, %v; want the API's for every edited server", origins, err)
	}
}

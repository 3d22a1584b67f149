package app

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mark3labs/mcp-go/client/transport"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzpg"
	"github.com/toolplane/toolplane/services/authz/authzsqlite"
	"github.com/toolplane/toolplane/services/authz/authzstore"
	"github.com/toolplane/toolplane/services/catalog/catalogpg"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
	"github.com/toolplane/toolplane/services/runtime/runtimepg"
	"github.com/toolplane/toolplane/services/runtime/runtimesqlite"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/skills/skillsblob"
	"github.com/toolplane/toolplane/services/skills/skillspg"
	"github.com/toolplane/toolplane/services/skills/skillssqlite"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// copyKeys is the OAuth keyring of the seeded deployment.
func copyKeys(t *testing.T) *catalogstore.Keyring {
	k, err := catalogstore.ParseKeyring(strings.Repeat("4d", 32))
	must(t, err)
	return k
}

// seedSqlite writes a small deployment of every service into dir through
// the sqlite stores.
func seedSqlite(t *testing.T, dir string) (digest string) {
	ctx := context.Background()
	rt, err := runtimesqlite.Open(filepath.Join(dir, "runtime.db"))
	must(t, err)
	at := timestamppb.New(time.Unix(1_700_000_000, 0))
	must(t, rt.CreateThread(ctx, &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "p", OwnerTenant: "default", OwnerSubject: "alice", CreateTime: at, UpdateTime: at}}))
	must(t, rt.CreateThread(ctx, &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "c", OwnerTenant: "default", OwnerSubject: "alice", CreateTime: at, UpdateTime: at},
		Child: &runtimestore.Child{ParentThreadID: "p", SubagentType: "researcher", Agent: &runtimev1.Agent{Name: "lead"}}}))
	_, err = rt.UpdateThread(ctx, "p", func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
		th.ReadMarks["/mnt/user-data/workspace/a.txt"] = "abc"
		th.Proto.Promoted = &runtimev1.Promoted{CatalogHash: "h", Names: []string{"x", "y"}}
		var msgs []*runtimev1.Message
		for i := range 5 {
			msgs = append(msgs, &runtimev1.Message{Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: fmt.Sprint(i)})
		}
		return msgs, nil
	})
	must(t, err)
	must(t, rt.AppendEvent(ctx, runtimestore.Event{ThreadID: "p", Kind: "authz.fail_open", Detail: "d"}))
	for _, id := range []string{"r1", "r2"} { // same start time: insertion order breaks the tie
		must(t, rt.PutRun(ctx, &runtimev1.Run{RunId: id, ThreadId: "p", Status: runtimev1.RunStatus_RUN_STATUS_COMPLETED, StartTime: at}))
	}
	must(t, rt.PutAgent(ctx, &runtimev1.Agent{Name: "helper", Description: "H"}))
	must(t, rt.Close())

	az, err := authzsqlite.Open(filepath.Join(dir, "authz.db"))
	must(t, err)
	_, err = az.SeedDefault(ctx, authzcasbin.DefaultRules())
	must(t, err)
	add, links, err := authzcasbin.ParsePolicyText("p, ops, acme, tool, x, call, allow, !subagent\ng, a, ops, acme", authzcasbin.SourceAPI)
	must(t, err)
	_, _, err = az.Apply(ctx, authzstore.Change{AddRules: add, AddLinks: links})
	must(t, err)
	log := authzstore.NewLog(az, 8)
	for i := range 10 {
		must(t, log.Append(ctx, &authzstore.DecisionRecord{ID: fmt.Sprint("d", i), Tenant: "acme", Allow: i%2 == 0, Time: time.Unix(1_700_000_000+int64(i), 0)}, true))
	}
	must(t, log.Close())
	must(t, az.Close())

	blobs, err := skillsblob.Open(filepath.Join(dir, "skills", "blobs"))
	must(t, err)
	digest, _, err = blobs.Put([]byte("---\nname: notes\ndescription: N.\n---\n"))
	must(t, err)
	sk, err := skillssqlite.Open(filepath.Join(dir, "skills.db"))
	must(t, err)
	s1, err := sk.Create(ctx, skillsstore.Custom, "default/alice", "notes", skillsstore.Content{Digest: "pkg1", Files: []skillsstore.FileRef{{Path: "SKILL.md", Digest: digest, Size: 36}}},
		skillsstore.HistoryEntry{Action: "install", Author: "default/alice", ScanDecision: "clean", Counts: map[string]int{"LOW": 1}})
	must(t, err)
	must(t, sk.SetEnabled(ctx, s1.ID, "default/alice", false, skillsstore.HistoryEntry{Action: "disable", Author: "default/alice"}))
	must(t, sk.Close())

	cs, err := catalogstore.Open(filepath.Join(dir, "catalog.db"))
	must(t, err)
	must(t, cs.Vectors("m").PutVectors(ctx, map[string][]float32{"k1": {1, -2}, "k2": {0.5}}))
	seen := time.Unix(1_700_000_000, 123_000_000).UTC()
	must(t, cs.ApplyNames(ctx, []catalogstore.NameRow{
		{PairKey: catalogstore.PairKey{Scope: "*", Server: "gh", Tool: "search"}, Base: "gh_search", Name: "gh_search", AssignedAt: seen, LastSeenAt: seen},
		{PairKey: catalogstore.PairKey{Scope: "*", Server: "gh2", Tool: "search"}, Base: "gh_search", Name: "gh_search_2", AssignedAt: seen, LastSeenAt: seen}}, nil))
	_, err = cs.Review(ctx, catalogstore.PinRow{PairKey: catalogstore.PairKey{Scope: "*", Server: "gh", Tool: "search"}, ApprovedHash: "h1", ApprovedDefinition: []byte(`{"name":"search"}`), RejectedHash: "h0", UpdatedAt: seen},
		catalogstore.AuditRow{At: seen, Actor: "default/root", Action: "reject", PairKey: catalogstore.PairKey{Scope: "*", Server: "gh", Tool: "search"}, Name: "gh_search", PreviousHash: "h1", DefinitionHash: "h0", Diff: "[]"})
	must(t, err)
	must(t, cs.PutAppliedConfig(ctx, "/etc/toolplane/extensions_config.json", []byte(`{"mcpServers": {}}`)))
	keys := copyKeys(t)
	must(t, cs.OAuth(keys).For("docs", "", "").SaveToken(ctx, &transport.Token{AccessToken: "at-1", TokenType: "Bearer", ExpiresAt: seen.Add(time.Hour)}))
	must(t, cs.Close())
	return digest
}

// TestCopyToPostgres: a sqlite deployment copied into PostgreSQL reads back
// the same through the PostgreSQL stores (ids, order, versions, blobs),
// new rows continue after the copied sequence numbers, the counts match,
// and a second copy into the now non-empty database is refused.
func TestCopyToPostgres(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	digest := seedSqlite(t, dir)
	dsn := pgtest.DSN(t)
	counts, err := CopyToPostgres(ctx, dir, dsn)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"catalog.vectors": 2, "catalog.tool_names": 2, "catalog.tool_pins": 1, "catalog.tool_audit": 1, "catalog.applied_config": 1, "catalog.oauth_tokens": 1, "catalog.oauth_clients": 0, "authz.casbin_rule": int64(len(authzcasbin.DefaultRules())) + 2, "authz.decisions": 10,
		"skills.skills": 1, "skills.skill_versions": 1, "skills.skill_history": 2, "skills.skill_enabled": 1, "skills.blobs": 1,
		"runtime.threads": 2, "runtime.messages": 5, "runtime.events": 1, "runtime.runs": 2, "runtime.agents": 1}
	for _, c := range counts {
		if c.Source != want[c.Table] || c.Target != c.Source {
			t.Errorf("%s: source %d target %d, want %d", c.Table, c.Source, c.Target, want[c.Table])
		}
		delete(want, c.Table)
	}
	if len(want) > 0 {
		t.Fatalf("tables not reported: %v", want)
	}

	pool, err := pgxpool.New(ctx, dsn)
	must(t, err)
	defer pool.Close()
	// runtime
	src, err := runtimesqlite.Open(filepath.Join(dir, "runtime.db"))
	must(t, err)
	defer src.Close()
	rt, err := runtimepg.Open(ctx, pool)
	must(t, err)
	for _, id := range []string{"p", "c"} {
		a, _ := src.GetThread(ctx, id)
		b, err := rt.GetThread(ctx, id)
		must(t, err)
		if !proto.Equal(a.Proto, b.Proto) || fmt.Sprint(a.ReadMarks) != fmt.Sprint(b.ReadMarks) || (a.Child == nil) != (b.Child == nil) {
			t.Fatalf("thread %s differs after the copy:\n%v %v %+v\n%v %v %+v", id, a.Proto, a.ReadMarks, a.Child, b.Proto, b.ReadMarks, b.Child)
		}
	}
	if kids, _ := rt.ChildThreads(ctx, "p"); fmt.Sprint(kids) != "[c]" {
		t.Fatalf("children %v", kids)
	}
	must(t, rt.AppendMessages(ctx, "p", &runtimev1.Message{Content: "after"}))
	msgs, _, err := rt.ListMessages(ctx, "p", runtimestore.Page{})
	must(t, err)
	var contents []string
	for _, m := range msgs {
		contents = append(contents, m.GetContent())
	}
	if strings.Join(contents, ",") != "0,1,2,3,4,after" {
		t.Fatalf("messages after the copy and one append: %v", contents)
	}
	runs, _ := rt.ListRuns(ctx, "p")
	if len(runs) != 2 || runs[0].GetRunId() != "r2" {
		t.Fatalf("runs order: %v", runs)
	}
	if ev, _ := rt.ListEvents(ctx, "p"); len(ev) != 1 || ev[0].Kind != "authz.fail_open" {
		t.Fatalf("events %v", ev)
	}
	if ag, _ := rt.GetAgent(ctx, "helper"); ag.GetDescription() != "H" {
		t.Fatalf("agent %v", ag)
	}
	// authz
	az, err := authzsqlite.Open(filepath.Join(dir, "authz.db"))
	must(t, err)
	defer az.Close()
	apg, err := authzpg.Open(ctx, pool)
	must(t, err)
	before, _ := az.Snapshot(ctx)
	after, err := apg.Snapshot(ctx)
	must(t, err)
	if after.Version != before.Version || !slices.Equal(after.Rules, before.Rules) || !slices.Equal(after.Links, before.Links) {
		t.Fatalf("policy differs after the copy: v%d/%d", before.Version, after.Version)
	}
	r := authzcasbin.Rule{Subject: "late", Tenant: "*", Resource: "tool", Target: "z", Action: "call", Effect: "allow"}
	v, _, err := apg.Apply(ctx, authzstore.Change{AddRules: []authzcasbin.Rule{r}})
	must(t, err)
	if now, _ := apg.Snapshot(ctx); v != before.Version+1 || now.Rules[len(now.Rules)-1].ID() != r.ID() {
		t.Fatalf("a line added after the copy: version %d, last %v", v, now.Rules[len(now.Rules)-1])
	}
	recs, _, err := apg.ListDecisions(ctx, authzstore.Filter{Tenant: "acme"}, 100, 0)
	must(t, err)
	if len(recs) != 10 || recs[0].ID != "d9" || recs[0].Seq != 10 {
		t.Fatalf("decisions after the copy: %d, newest %+v", len(recs), recs[0])
	}
	// skills
	spg, err := skillspg.Open(ctx, pool)
	must(t, err)
	got, err := spg.Get(ctx, skillsstore.Custom, "default/alice", "notes")
	if err != nil || got.Digest != "pkg1" || len(got.Files) != 1 || got.Files[0].Digest != digest {
		t.Fatalf("skill after the copy: %+v %v", got, err)
	}
	if st, _ := spg.EnableStates(ctx, "default/alice"); st[got.ID] {
		t.Fatalf("enable state lost: %v", st)
	}
	if h, _ := spg.History(ctx, got.ID); len(h) != 2 || h[1].Counts["LOW"] != 1 {
		t.Fatalf("history %+v", h)
	}
	bpg, err := skillspg.OpenBlobs(ctx, pool, 0)
	must(t, err)
	if b, err := bpg.Get(digest); err != nil || !strings.Contains(string(b), "name: notes") {
		t.Fatalf("blob after the copy: %q %v", b, err)
	}
	if _, err := spg.Create(ctx, skillsstore.Custom, "default/bob", "more", skillsstore.Content{Digest: "pkg2"}, skillsstore.HistoryEntry{Action: "install"}); err != nil {
		t.Fatalf("a skill created after the copy: %v", err)
	}
	// catalog
	cpg, err := catalogpg.Open(ctx, pool)
	must(t, err)
	vec, err := cpg.Vectors("m").GetVectors(ctx, []string{"k1", "k2"})
	if err != nil || fmt.Sprint(vec) != "map[k1:[1 -2] k2:[0.5]]" {
		t.Fatalf("vectors after the copy: %v %v", vec, err)
	}
	seen := time.Unix(1_700_000_000, 123_000_000).UTC() // as seeded
	csrc, err := catalogstore.Open(filepath.Join(dir, "catalog.db"))
	must(t, err)
	defer csrc.Close()
	for what, load := range map[string]func(catalogstore.IdentityStore) (any, error){
		"names": func(s catalogstore.IdentityStore) (any, error) { return s.LoadNames(ctx) },
		"pins":  func(s catalogstore.IdentityStore) (any, error) { return s.LoadPins(ctx) },
		"audit": func(s catalogstore.IdentityStore) (any, error) { return s.ListAudit(ctx, 10) },
	} {
		a, err := load(csrc)
		must(t, err)
		b, err := load(cpg)
		must(t, err)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%s differ after the copy:\n%v\n%v", what, a, b)
		}
	}
	if raw, ok, err := cpg.AppliedConfig(ctx, "/etc/toolplane/extensions_config.json"); err != nil || !ok || string(raw) != `{"mcpServers": {}}` {
		t.Fatalf("applied config after the copy: %q %v %v", raw, ok, err)
	}
	if tok, err := cpg.OAuth(copyKeys(t)).For("docs", "", "").GetToken(ctx); err != nil || tok.AccessToken != "at-1" || !tok.ExpiresAt.Equal(seen.Add(time.Hour)) {
		t.Fatalf("sealed token after the copy: %+v %v", tok, err)
	}
	if id, err := cpg.Review(ctx, catalogstore.PinRow{PairKey: catalogstore.PairKey{Scope: "*", Server: "gh", Tool: "search"}, ApprovedHash: "h2", ApprovedDefinition: []byte(`{}`), UpdatedAt: seen},
		catalogstore.AuditRow{At: seen, Actor: "default/root", Action: "approve", PairKey: catalogstore.PairKey{Scope: "*", Server: "gh", Tool: "search"}, Name: "gh_search", PreviousHash: "h1", DefinitionHash: "h2", Diff: "[]"}); err != nil || id != 2 {
		t.Fatalf("an audit record after the copy: id %d, %v; want 2", id, err)
	}

	if _, err := CopyToPostgres(ctx, dir, dsn); err == nil || !strings.Contains(err.Error(), "already holds Toolplane data") {
		t.Fatalf("second copy into a non-empty database: %v", err)
	}
}

// TestCopyToPostgresIsAllOrNothing: a copy that fails part-way (a source
// row PostgreSQL refuses) leaves the target without any copied row.
func TestCopyToPostgresIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	seedSqlite(t, dir)
	// A skill category the PostgreSQL schema's CHECK refuses, written behind
	// the store's back.
	db, err := skillssqlite.Open(filepath.Join(dir, "skills.db"))
	must(t, err)
	must(t, db.Close())
	raw := openRaw(t, filepath.Join(dir, "skills.db"))
	if _, err := raw.Exec(`PRAGMA ignore_check_constraints = ON; INSERT INTO skills (category, owner, name, version, created_at, updated_at) VALUES ('bogus', '', 'x', 1, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	dsn := pgtest.DSN(t)
	_, err = CopyToPostgres(ctx, dir, dsn)
	if err == nil || !strings.Contains(err.Error(), "skills") {
		t.Fatalf("copy with a refused row: %v", err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	must(t, err)
	defer pool.Close()
	for _, tbl := range targetTables() {
		var n int
		must(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+tbl).Scan(&n))
		if n > 0 {
			t.Fatalf("%s has %d rows after a failed copy", tbl, n)
		}
	}
}

func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

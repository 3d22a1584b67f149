package catalogmcp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/testkit"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// exampleServers loads the example's memory and tasks servers as written in
// examples/extensions_config.json (so the test breaks if the example stops
// scoping them).
func exampleServers(t *testing.T) []catalogconfig.Server {
	t.Helper()
	f, _, err := catalogconfig.Load(filepath.Join("..", "..", "..", "examples", "extensions_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []catalogconfig.Server
	for _, s := range f.Servers {
		if s.Name == "memory" || s.Name == "tasks" {
			out = append(out, s)
		}
	}
	if len(out) != 2 {
		t.Fatalf("example has %d of memory, tasks", len(out))
	}
	return out
}

// TestScopeDirIsolatesExampleStatefulServers runs the example's memory
// (per_user) and tasks (per_tenant) servers, the real npm packages, and
// checks that what one tenant or user writes is invisible to another, and
// that the state lives in 0700 directories of the scope under the data dir.
func TestScopeDirIsolatesExampleStatefulServers(t *testing.T) {
	npmRoot := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(testkit.NPMServer(t, "server-memory")))))
	data := t.TempDir()
	root := filepath.Join(data, "mcp-scopes")
	m := NewManager(ManagerOptions{
		Options: Options{CloseGrace: time.Second, ScopeDirRoot: root},
		Lookup: func(k string) (string, bool) {
			switch k {
			case "TOOLPLANE_NPM_DIR":
				return filepath.Dir(npmRoot), true
			case "TOOLPLANE_DATA_DIR":
				return data, true
			}
			return "", false
		},
	})
	t.Cleanup(func() { m.Close() })
	servers := exampleServers(t)
	for _, s := range servers {
		if !catalogconfig.UsesScopeDir(mustExpand(t, s)) {
			t.Fatalf("example server %s does not use ${%s}", s.Name, catalogconfig.ScopeDirVar)
		}
	}
	m.Apply(servers)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	for _, st := range m.Statuses() {
		if st.State != StateReady {
			t.Fatalf("%s: %s %s", st.Name, st.State, st.LastError)
		}
	}
	call := func(server, tool, args string, key ScopeKey) string {
		t.Helper()
		r, err := m.Call(ctx, server, tool, []byte(args), key, nil)
		if err != nil {
			t.Fatalf("%s %s as %+v: %v", server, tool, key, err)
		}
		return textOf(t, r)
	}
	aliceA := ScopeKey{Tenant: "acme", Subject: "alice", Thread: "th1"}
	aliceA2 := ScopeKey{Tenant: "acme", Subject: "alice", Thread: "th2"}
	bobA := ScopeKey{Tenant: "acme", Subject: "bob"}
	aliceB := ScopeKey{Tenant: "globex", Subject: "alice"} // same subject, other tenant

	// memory is per_user: alice@acme's graph is hers alone, on every thread.
	call("memory", "create_entities", `{"entities":[{"name":"secret-plan-acme-alice","entityType":"note","observations":["x"]}]}`, aliceA)
	if got := call("memory", "read_graph", `{}`, aliceA2); !strings.Contains(got, "secret-plan-acme-alice") {
		t.Fatalf("alice@acme on another thread does not see her own memory: %s", got)
	}
	for _, k := range []ScopeKey{bobA, aliceB} {
		if got := call("memory", "read_graph", `{}`, k); strings.Contains(got, "secret-plan") {
			t.Fatalf("%+v sees alice@acme's memory: %s", k, got)
		}
	}

	// tasks is per_tenant: acme's users share one list, globex sees none of it.
	call("tasks", "request_planning", `{"originalRequest":"acme-only-request","tasks":[{"title":"t1","description":"d1"}]}`, aliceA)
	if got := call("tasks", "list_requests", `{}`, bobA); !strings.Contains(got, "acme-only-request") {
		t.Fatalf("bob@acme does not see his tenant's tasks: %s", got)
	}
	if got := call("tasks", "list_requests", `{}`, aliceB); strings.Contains(got, "acme-only-request") {
		t.Fatalf("globex sees acme's tasks: %s", got)
	}

	// The files are where the scope says, each directory 0700.
	memFile, err := catalogconfig.ScopeDir(root, "memory", catalogconfig.ScopePerUser, "acme", "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(memFile, "memory.jsonl"))
	if err != nil || !strings.Contains(string(b), "secret-plan-acme-alice") {
		t.Fatalf("alice@acme's memory file: %v %q", err, b)
	}
	taskDir, _ := catalogconfig.ScopeDir(root, "tasks", catalogconfig.ScopePerTenant, "acme", "", "")
	if b, err := os.ReadFile(filepath.Join(taskDir, "tasks.json")); err != nil || !strings.Contains(string(b), "acme-only-request") {
		t.Fatalf("acme's tasks file: %v %q", err, b)
	}
	if _, err := os.Stat(filepath.Join(data, "memory.jsonl")); err == nil {
		t.Fatal("memory wrote the unscoped data-dir file")
	}
	err = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() && fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", p, fi.Mode().Perm())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustExpand(t *testing.T, s catalogconfig.Server) catalogconfig.Server {
	t.Helper()
	out, err := catalogconfig.Expand(s, catalogconfig.LookupWithScopeDir(func(string) (string, bool) { return "x", true }))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestScopeDirConfinedAndRefusedOutsideStdio: hostile tenant, subject and
// thread ids stay inside their own directory, and the variable is refused
// where a directory means nothing.
func TestScopeDirConfinedAndRefusedOutsideStdio(t *testing.T) {
	root := t.TempDir()
	seen := map[string]string{}
	for _, id := range []string{"", ".", "..", "../..", "a/b", "a%2Fb", "a\x00b", "ünï", strings.Repeat("x", 300), "%h" + strings.Repeat("0", 64)} {
		for _, scope := range []string{catalogconfig.ScopePerTenant, catalogconfig.ScopePerUser, catalogconfig.ScopePerThread} {
			dir, err := catalogconfig.ScopeDir(root, "srv", scope, id, id, id)
			if err != nil {
				t.Fatalf("%q: %v", id, err)
			}
			rel, err := filepath.Rel(root, dir)
			if err != nil || strings.HasPrefix(rel, "..") || !strings.HasPrefix(rel, "s-srv"+string(filepath.Separator)) {
				t.Fatalf("%q %s: %s escapes %s", id, scope, dir, root)
			}
			if prev, ok := seen[dir]; ok {
				t.Fatalf("ids %q and %q share %s", prev, id, dir)
			}
			seen[dir] = id
		}
	}
	if _, err := catalogconfig.ScopeDir("", "srv", catalogconfig.ScopePerUser, "t", "u", ""); err == nil {
		t.Fatal("no data dir accepted")
	}
	for name, s := range map[string]catalogconfig.Server{
		"url":     {Name: "h", Type: catalogconfig.TypeHTTP, URL: "http://127.0.0.1/${TOOLPLANE_SCOPE_DIR}"},
		"headers": {Name: "h", Type: catalogconfig.TypeHTTP, URL: "http://127.0.0.1/", Headers: map[string]string{"X": "$TOOLPLANE_SCOPE_DIR"}},
		"command": {Name: "c", Command: "${TOOLPLANE_SCOPE_DIR}/node"},
		"path":    {Name: "p", Type: catalogconfig.TypeStatic, Path: "${TOOLPLANE_SCOPE_DIR}/x.json"},
	} {
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), catalogconfig.ScopeDirVar) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ok := catalogconfig.Server{Name: "ok", Command: "node", Args: []string{"${TOOLPLANE_SCOPE_DIR}/a"}, Env: map[string]string{"F": "${TOOLPLANE_SCOPE_DIR}/f"}, Cwd: "${TOOLPLANE_SCOPE_DIR}", SessionScope: catalogconfig.ScopePerTenant}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bound := catalogconfig.BindScopeDir(mustExpand(t, ok), "/d")
	if bound.Args[0] != "/d/a" || bound.Env["F"] != "/d/f" || bound.Cwd != "/d" {
		t.Fatalf("bound: %+v", bound)
	}
}

package catalog

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// Tenant-scoped servers (docs/decisions/0105-tenant-scoped-servers.md):
// visibility per tenant in every read and call, tenant admins confined to
// their tenant's servers, names per visibility scope.

// forTenant is ctx with the service credential acting for a user of tenant.
func forTenant(ctx context.Context, tenant string) context.Context {
	return grpcx.WithPrincipal(ctx, &typev1.Principal{Subject: "u-" + tenant, Tenant: tenant, Roles: []string{"user"}})
}

func toolNames(t *testing.T, c catalogv1.CatalogServiceClient, ctx context.Context) []string {
	t.Helper()
	r, err := c.ListTools(ctx, &catalogv1.ListToolsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range r.GetTools() {
		out = append(out, tl.GetName())
	}
	return out
}

func serverNames(t *testing.T, c catalogv1.CatalogServiceClient, ctx context.Context) []string {
	t.Helper()
	r, err := c.ListServers(ctx, &catalogv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range r.GetServers() {
		out = append(out, s.GetConfig().GetName())
	}
	return out
}

// TestTenantScopedVisibility: a server with `tenants` exists only for
// principals of those tenants in ListTools, GetTool, SearchTools,
// GetCatalog, CallTool, ListServers and GetServer; the runtime's own
// service credential (acting for nobody) and global admins see everything.
func TestTenantScopedVisibility(t *testing.T) {
	h := start(t, extJSON(fixtureServer("g", ""), fixtureServer("acme_s", `"tenants": ["acme"]`),
		fixtureServer("beta_s", `"tenants": ["beta"]`), fixtureServer("both", `"tenants": ["acme", "beta"]`)), nil)
	ctx := ctxT(t)
	all := toolNames(t, h.svc, ctx)
	for _, n := range []string{"g_echo", "acme_s_echo", "beta_s_echo", "both_echo"} {
		if !slices.Contains(all, n) {
			t.Fatalf("the service credential (acting for nobody) does not see %s: %v", n, all)
		}
	}
	if tl := h.toolByOriginal("acme_s", "echo"); !slices.Equal(tl.GetTenants(), []string{"acme"}) {
		t.Fatalf("Tool.tenants = %v", tl.GetTenants())
	}
	acme := forTenant(ctx, "acme")
	seen := toolNames(t, h.svc, acme)
	if !slices.Contains(seen, "g_echo") || !slices.Contains(seen, "acme_s_echo") || !slices.Contains(seen, "both_echo") || slices.Contains(seen, "beta_s_echo") {
		t.Fatalf("acme's ListTools = %v", seen)
	}
	for _, n := range seen {
		if strings.HasPrefix(n, "beta_s_") {
			t.Fatalf("acme sees %s", n)
		}
	}
	if _, err := h.svc.GetTool(acme, &catalogv1.GetToolRequest{Name: "beta_s_echo"}); codeOf(err) != codes.NotFound {
		t.Fatalf("GetTool of another tenant's tool: %v, want NOT_FOUND", err)
	}
	if _, err := h.call(acme, h.svc, "beta_s_echo", `{"message":"x"}`); codeOf(err) != codes.NotFound || reasonOf(err) != "ERROR_REASON_TOOL_NOT_FOUND" {
		t.Fatalf("CallTool of another tenant's tool: %v, want NOT_FOUND", err)
	}
	if r, err := h.call(acme, h.svc, "acme_s_echo", `{"message":"x"}`); err != nil || textOf(r) != "echo: x" {
		t.Fatalf("CallTool of the tenant's own tool: %v %v", r, err)
	}
	if _, err := h.call(forTenant(ctx, "default"), h.svc, "acme_s_echo", `{}`); codeOf(err) != codes.NotFound {
		t.Fatalf("a default-tenant user calls acme's tool: %v", err)
	}
	sr, err := h.svc.SearchTools(acme, &catalogv1.SearchToolsRequest{Query: "echo the message", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	for _, hit := range sr.GetHits() {
		if hit.GetTool().GetServer() == "beta_s" {
			t.Fatalf("search for acme returned %s", hit.GetTool().GetName())
		}
	}
	if !slices.ContainsFunc(sr.GetHits(), func(x *catalogv1.SearchHit) bool { return x.GetTool().GetName() == "acme_s_echo" }) {
		t.Fatalf("search for acme misses its own tool: %v", hitNames(sr))
	}
	if r, _ := h.svc.SearchTools(acme, &catalogv1.SearchToolsRequest{Query: "select:beta_s_echo"}); len(r.GetHits()) != 0 {
		t.Fatalf("select: of another tenant's tool = %v", hitNames(r))
	}
	if r, _ := h.svc.SearchTools(acme, &catalogv1.SearchToolsRequest{Query: "select:beta_s/echo"}); len(r.GetHits()) != 0 {
		t.Fatalf("select: by the original pair of another tenant's tool = %v", hitNames(r))
	}
	// "echo" is shared by four servers; among the runtime's candidates (a
	// thread's deferred set) only one has it: select: resolves to it.
	if r, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "select:echo", Candidates: &typev1.StringList{Values: []string{"acme_s_echo", "g_pid"}}}); err != nil || len(r.GetHits()) != 1 || r.GetHits()[0].GetTool().GetName() != "acme_s_echo" {
		t.Fatalf("select:echo among candidates = %v, %v", hitNames(r), err)
	}
	gc, err := h.svc.GetCatalog(acme, &catalogv1.GetCatalogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	gall, _ := h.svc.GetCatalog(ctx, &catalogv1.GetCatalogRequest{})
	if gc.GetToolCount() != int32(len(seen)) || gc.GetCatalogHash() == gall.GetCatalogHash() {
		t.Fatalf("acme's GetCatalog: %d tools (lists %d), hash %s (global %s)", gc.GetToolCount(), len(seen), gc.GetCatalogHash(), gall.GetCatalogHash())
	}
	for _, sc := range gc.GetServers() {
		if sc.GetServer() == "beta_s" {
			t.Fatal("acme's GetCatalog counts beta's server")
		}
	}
	cand, _ := h.svc.GetCatalog(acme, &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{Values: []string{"g_echo", "beta_s_echo"}}})
	if cand.GetToolCount() != 1 {
		t.Fatalf("acme's candidate hash counts another tenant's tool: %v", cand)
	}
	// OAuth connections: another tenant's server is NOT_FOUND before any
	// OAuth question (acme_s is stdio: FAILED_PRECONDITION for acme itself).
	if _, err := h.svc.ConnectServer(forTenant(ctx, "beta"), &catalogv1.ConnectServerRequest{Name: "acme_s"}); codeOf(err) != codes.NotFound {
		t.Fatalf("ConnectServer to another tenant's server: %v, want NOT_FOUND", err)
	}
	if _, err := h.svc.ConnectServer(acme, &catalogv1.ConnectServerRequest{Name: "acme_s"}); codeOf(err) != codes.FailedPrecondition {
		t.Fatalf("ConnectServer to the tenant's own stdio server: %v, want FAILED_PRECONDITION", err)
	}
	// Server configurations: the tenant admin sees only its own (global
	// and shared ones are not its to see); acting for a user, what the
	// tenant sees.
	if got := serverNames(t, h.acmeAdmin, ctx); !slices.Equal(got, []string{"acme_s"}) {
		t.Fatalf("acme admin's ListServers = %v", got)
	}
	if got := serverNames(t, h.svc, acme); !slices.Equal(got, []string{"g", "acme_s", "both"}) {
		t.Fatalf("ListServers acting for an acme user = %v", got)
	}
	for _, n := range []string{"g", "both", "beta_s"} {
		if _, err := h.acmeAdmin.GetServer(ctx, &catalogv1.GetServerRequest{Name: n}); codeOf(err) != codes.NotFound {
			t.Fatalf("acme admin's GetServer %s: %v, want NOT_FOUND", n, err)
		}
	}
	if got := serverNames(t, h.admin, ctx); len(got) != 4 {
		t.Fatalf("global admin's ListServers = %v", got)
	}
	if _, err := h.acmeAdmin.GetServer(ctx, &catalogv1.GetServerRequest{Name: "beta_s"}); codeOf(err) != codes.NotFound {
		t.Fatalf("GetServer of another tenant's server: %v", err)
	}
	if _, err := h.acmeUser.ListServers(ctx, &catalogv1.ListServersRequest{}); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("a plain user lists servers: %v", err)
	}
	if _, err := h.acmeUser.ListTools(ctx, &catalogv1.ListToolsRequest{}); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("a plain user lists tools directly: %v", err)
	}
}

// TestTenantAdminWrites: a tenant admin replaces and toggles only its own
// tenant's servers; global and other tenants' servers stay as they are and
// cannot be touched; it writes remote servers only (no stdio server, whatever
// its command: docs/decisions/0136-tenant-admins-write-remote-servers-only.md);
// its servers cannot read the host (no ${VAR}, static path).
func TestTenantAdminWrites(t *testing.T) {
	t.Setenv("TP_HOST_SECRET", "hunter2")
	h := start(t, extJSON(fixtureServer("g", ""), fixtureServer("acme_s", `"tenants": ["acme"]`),
		fixtureServer("beta_s", `"tenants": ["beta"]`), fixtureServer("both", `"tenants": ["acme", "beta"]`)), nil)
	ctx := ctxT(t)
	off := false
	if _, err := h.acmeAdmin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "g", Server: &catalogv1.ServerUpdate{Enabled: &off}}); codeOf(err) != codes.NotFound {
		t.Fatalf("tenant admin disables a global server: %v, want NOT_FOUND", err)
	}
	if _, err := h.acmeAdmin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "both", Server: &catalogv1.ServerUpdate{Enabled: &off}}); codeOf(err) != codes.NotFound {
		t.Fatalf("tenant admin disables a server shared with another tenant: %v, want NOT_FOUND", err)
	}
	if _, err := h.acmeAdmin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "beta_s", Server: &catalogv1.ServerUpdate{Enabled: &off}}); codeOf(err) != codes.NotFound {
		t.Fatalf("tenant admin disables another tenant's server: %v, want NOT_FOUND", err)
	}
	if _, err := h.acmeUser.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "acme_s", Server: &catalogv1.ServerUpdate{Enabled: &off}}); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("a plain user disables a server: %v", err)
	}
	if up, err := h.acmeAdmin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "acme_s", Server: &catalogv1.ServerUpdate{Enabled: &off}}); err != nil || up.GetServer().GetConfig().GetEnabled() {
		t.Fatalf("tenant admin disables its own server: %v %v", up, err)
	}
	own := func(name string, mut func(c *catalogv1.ServerConfig)) *catalogv1.ServerConfig {
		c := &catalogv1.ServerConfig{Name: name, Type: catalogv1.ServerType_SERVER_TYPE_HTTP, Url: "http://127.0.0.1:1/mcp", Tenants: []string{"acme"}}
		if mut != nil {
			mut(c)
		}
		return c
	}
	stdio := func(name string, mut func(c *catalogv1.ServerConfig)) *catalogv1.ServerConfig {
		c := &catalogv1.ServerConfig{Name: name, Command: "node", Args: []string{"server.js"}, Tenants: []string{"acme"}}
		if mut != nil {
			mut(c)
		}
		return c
	}
	before, _ := os.ReadFile(h.path)
	refused := []struct {
		what string
		cfg  *catalogv1.ServerConfig
		code codes.Code
		want string
	}{
		{"no tenants", own("n1", func(c *catalogv1.ServerConfig) { c.Tenants = nil }), codes.PermissionDenied, "servers[0].tenants"},
		{"another tenant", own("n1", func(c *catalogv1.ServerConfig) { c.Tenants = []string{"beta"} }), codes.PermissionDenied, "servers[0].tenants"},
		{"two tenants", own("n1", func(c *catalogv1.ServerConfig) { c.Tenants = []string{"acme", "beta"} }), codes.PermissionDenied, "servers[0].tenants"},
		// Every stdio server is refused on its type, before any other rule:
		// the review's filesystem server at /, an http.server, npx of any
		// package, and the shapes the earlier per-field rules refused.
		{"a stdio server", stdio("n1", nil), codes.PermissionDenied, "servers[0].type"},
		{"a stdio server, type explicit", stdio("n1", func(c *catalogv1.ServerConfig) { c.Type = catalogv1.ServerType_SERVER_TYPE_STDIO }), codes.PermissionDenied, "servers[0].type"},
		{"the filesystem server at /", stdio("acme_fs", func(c *catalogv1.ServerConfig) {
			c.Type, c.Args = catalogv1.ServerType_SERVER_TYPE_STDIO, []string{".tools/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/"}
		}), codes.PermissionDenied, "servers[0].type"},
		{"python3 -m http.server", stdio("n1", func(c *catalogv1.ServerConfig) { c.Command, c.Args = "python3", []string{"-m", "http.server"} }), codes.PermissionDenied, "servers[0].type"},
		{"npx -y", stdio("n1", func(c *catalogv1.ServerConfig) { c.Command, c.Args = "npx", []string{"-y", "some-package"} }), codes.PermissionDenied, "servers[0].type"},
		{"stdio with ${VAR} in env", stdio("n1", func(c *catalogv1.ServerConfig) { c.Env = map[string]string{"K": "${TP_HOST_SECRET}"} }), codes.PermissionDenied, "servers[0].type"},
		{"stdio with cwd", stdio("n1", func(c *catalogv1.ServerConfig) { c.Cwd = "/etc" }), codes.PermissionDenied, "servers[0].type"},
		{"stdio with the scope dir", stdio("n1", func(c *catalogv1.ServerConfig) { c.Args = []string{"server.js", "${TOOLPLANE_SCOPE_DIR}/db"} }), codes.PermissionDenied, "servers[0].type"},
		{"stdio with working_dir", stdio("n1", func(c *catalogv1.ServerConfig) {
			c.SessionScope, c.WorkingDir = catalogv1.SessionScope_SESSION_SCOPE_PER_THREAD, "thread"
		}), codes.PermissionDenied, "servers[0].type"},
		// The scope-dir rule holds for every writer, so it answers first.
		{"cwd escaping the scope dir", stdio("n1", func(c *catalogv1.ServerConfig) { c.Cwd = "${TOOLPLANE_SCOPE_DIR}/../x" }), codes.InvalidArgument, "mcpServers.n1.cwd"},
		{"${VAR} in an http server's env", own("n1", func(c *catalogv1.ServerConfig) { c.Env = map[string]string{"K": "${TP_HOST_SECRET}"} }), codes.PermissionDenied, "servers[0].env.K"},
		{"default form in url", &catalogv1.ServerConfig{Name: "n1", Type: catalogv1.ServerType_SERVER_TYPE_HTTP, Url: "http://127.0.0.1:1/${TP_HOST_SECRET:-x}", Tenants: []string{"acme"}}, codes.PermissionDenied, "servers[0].url"},
		{"${VAR} in a header", &catalogv1.ServerConfig{Name: "n1", Type: catalogv1.ServerType_SERVER_TYPE_HTTP, Url: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer ${TP_HOST_SECRET}"}, Tenants: []string{"acme"}}, codes.PermissionDenied, "servers[0].headers.Authorization"},
		{"static path", &catalogv1.ServerConfig{Name: "n1", Type: catalogv1.ServerType_SERVER_TYPE_STATIC, Path: "/etc/passwd", Tenants: []string{"acme"}}, codes.PermissionDenied, "servers[0].path"},
		{"a global server's name", own("g", nil), codes.InvalidArgument, `"g" is taken`},
		{"another tenant's server's name", own("beta_s", nil), codes.InvalidArgument, `"beta_s" is taken`},
	}
	for _, c := range refused {
		_, err := h.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{c.cfg}})
		if codeOf(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %v naming %s", c.what, err, c.code, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the variable's value: %v", c.what, err)
		}
	}
	if after, _ := os.ReadFile(h.path); string(after) != string(before) {
		t.Fatalf("a refused write changed the file:\n%s", after)
	}
	// A valid replace: acme's set becomes [acme2], a remote server with
	// its own stateful and session_scope; every other server stays.
	res, err := h.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{
		{Name: "acme2", Type: catalogv1.ServerType_SERVER_TYPE_HTTP, Url: "http://127.0.0.1:1/mcp", Stateful: true,
			SessionScope: catalogv1.SessionScope_SESSION_SCOPE_PER_USER, Tenants: []string{"acme"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res.GetServers() {
		got = append(got, s.GetConfig().GetName())
	}
	if !slices.Equal(got, []string{"acme2"}) {
		t.Fatalf("tenant admin's ReplaceServers answered %v", got)
	}
	raw, _ := os.ReadFile(h.path)
	f, err := catalogconfig.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var file []string
	for _, s := range f.Servers {
		file = append(file, s.Name)
		if s.Name == "acme2" && (!s.Stateful || s.SessionScope != catalogconfig.ScopePerUser) {
			t.Fatalf("acme2's stateful / session_scope not kept: %v %q", s.Stateful, s.SessionScope)
		}
	}
	if !slices.Equal(file, []string{"g", "beta_s", "both", "acme2"}) || !strings.Contains(string(raw), `"keep": true`) {
		t.Fatalf("file after the tenant admin's replace: %v\n%s", file, raw)
	}
	// An empty list removes acme's servers only.
	if _, err := h.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := serverNames(t, h.admin, ctx); !slices.Equal(got, []string{"g", "beta_s", "both"}) {
		t.Fatalf("after acme emptied its servers: %v", got)
	}
	// The beta admin cannot see, replace or remove acme's (now gone) or
	// the global servers through its own replace.
	if _, err := h.betaAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := serverNames(t, h.admin, ctx); !slices.Equal(got, []string{"g", "both"}) {
		t.Fatalf("after beta emptied its servers: %v", got)
	}
	if _, err := h.svc.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{}); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("a service credential replaces servers: %v", err)
	}
	if got := serverNames(t, h.admin, ctx); len(got) != 2 {
		t.Fatalf("servers after refused writes: %v", got)
	}
}

// TestNamesPerScope: the global scope wins a name over a tenant pair that
// held it first (the tenant pair is renamed and the rename reported); two
// tenants' pairs wanting one name are settled between them, and the report
// names the holder only to callers who can see its server.
func TestNamesPerScope(t *testing.T) {
	dir := t.TempDir()
	bc := toolsFile(t, dir, "bc.json", map[string]any{"name": "b_c", "description": "tenant tool"})
	c := toolsFile(t, dir, "c.json", map[string]any{"name": "c", "description": "global tool"})
	yz := toolsFile(t, dir, "yz.json", map[string]any{"name": "y_z", "description": "acme tool"})
	z := toolsFile(t, dir, "z.json", map[string]any{"name": "z", "description": "beta tool"})
	ext1 := extJSON(fixtureWithTools("a", bc, `"tenants": ["acme"]`), fixtureWithTools("x", yz, `"tenants": ["acme"]`),
		fixtureWithTools("x_y", z, `"tenants": ["beta"]`))
	h := startDir(t, dir, ext1, nil)
	ctx := ctxT(t)
	if tl := h.toolByOriginal("a", "b_c"); tl.GetName() != "a_b_c" {
		t.Fatalf("alone, acme's a/b_c = %q", tl.GetName())
	}
	// Two tenants, each its own namespace: acme's x/y_z and beta's x_y/z
	// are both plain x_y_z, neither reported as a collision
	// (docs/decisions/0106-per-tenant-name-namespaces.md).
	xz := h.toolByOriginal("x_y", "z")
	if xz.GetName() != "x_y_z" || xz.GetNameHeldBy() != nil || xz.GetRenamed() {
		t.Fatalf("beta's x_y/z = %q held by %v (service view)", xz.GetName(), xz.GetNameHeldBy())
	}
	if yz := h.toolByOriginal("x", "y_z"); yz.GetName() != "x_y_z" {
		t.Fatalf("acme's x/y_z = %q", yz.GetName())
	}
	for tenant, server := range map[string]string{"acme": "x", "beta": "x_y"} {
		r, err := h.svc.GetTool(forTenant(ctx, tenant), &catalogv1.GetToolRequest{Name: "x_y_z"})
		if err != nil || r.GetTool().GetServer() != server || r.GetTool().GetNameHeldBy() != nil {
			t.Fatalf("%s's x_y_z = %v, %v; want server %s", tenant, r.GetTool(), err, server)
		}
	}
	// For a caller that sees every tenant the name names no one tool.
	if _, err := h.svc.GetTool(ctx, &catalogv1.GetToolRequest{Name: "x_y_z"}); codeOf(err) != codes.NotFound || !strings.Contains(err.Error(), "several tenants") {
		t.Fatalf("x_y_z for the service acting for nobody: %v", err)
	}
	srv, err := h.betaAdmin.GetServer(ctx, &catalogv1.GetServerRequest{Name: "x_y"})
	if err != nil {
		t.Fatal(err)
	}
	if len(srv.GetServer().GetNameCollisions()) != 0 {
		t.Fatalf("beta admin's collision report: %v", srv.GetServer().GetNameCollisions())
	}
	if full := h.server("x_y"); len(full.GetNameCollisions()) != 0 {
		t.Fatalf("service view of x_y's collisions: %v", full.GetNameCollisions())
	}
	// A global server asking for a_b_c arrives later, at the start of the
	// file: it wins; acme's pair is renamed, reported in WatchCatalog.
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	w, err := h.svc.WatchCatalog(wctx, &catalogv1.WatchCatalogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	ext2 := extJSON(fixtureWithTools("a_b", c, ""), fixtureWithTools("a", bc, `"tenants": ["acme"]`), fixtureWithTools("x", yz, `"tenants": ["acme"]`),
		fixtureWithTools("x_y", z, `"tenants": ["beta"]`))
	if err := catalogconfig.WriteAtomic(h.path, []byte(ext2)); err != nil {
		t.Fatal(err)
	}
	var renamed *catalogv1.ToolRename
	deadline := time.Now().Add(30 * time.Second)
	for renamed == nil && time.Now().Before(deadline) {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("no rename of acme's pair reported: %v", err)
		}
		for _, rn := range ev.GetEvent().GetRenames() {
			if rn.GetTool().GetServer() == "a" {
				renamed = rn
			}
		}
	}
	if renamed == nil || renamed.GetPreviousName() != "a_b_c" || renamed.GetTool().GetName() == "a_b_c" {
		t.Fatalf("rename of acme's pair: %v", renamed)
	}
	if g := h.toolByOriginal("a_b", "c"); g.GetName() != "a_b_c" {
		t.Fatalf("the global pair got %q, want a_b_c (the global scope wins)", g.GetName())
	}
	if tl := h.toolByOriginal("a", "b_c"); tl.GetName() != renamed.GetTool().GetName() || tl.GetNameHeldBy().GetServer() != "a_b" {
		t.Fatalf("acme's pair now %q held by %v", tl.GetName(), tl.GetNameHeldBy())
	}
	// Stored per scope: the restart keeps everything.
	want := map[string]string{}
	for _, n := range toolNames(t, h.svc, ctx) {
		want[n] = n
	}
	h.close()
	h2 := startDir(t, dir, "", nil)
	if tl := h2.toolByOriginal("a", "b_c"); tl.GetName() != renamed.GetTool().GetName() {
		t.Fatalf("after restart acme's pair = %q", tl.GetName())
	}
	rows, err := h2.srv.store.LoadNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scopes := map[string]string{}
	for _, r := range rows {
		scopes[r.Server+"/"+r.Tool] = r.Scope
	}
	if scopes["a/b_c"] != "acme" || scopes["x_y/z"] != "beta" || scopes["a_b/c"] != "*" {
		t.Fatalf("stored scopes: a/b_c=%q x_y/z=%q a_b/c=%q", scopes["a/b_c"], scopes["x_y/z"], scopes["a_b/c"])
	}
}

// TestListChangedFloodCoalesced: a server sending list_changed for an
// unchanged list every 2 ms for about 2 s (1,000 notifications) costs about one
// re-list per second (catalogmcp.RelistInterval),
// changes neither the catalog hash nor the snapshot; a real change sent
// right after the flood is still read (the trailing re-list).
func TestListChangedFloodCoalesced(t *testing.T) {
	h := start(t, extJSON(fixtureServer("fl", `"env": {"TPFIXTURE_FLOOD": "1"}`)), nil)
	ctx := ctxT(t)
	snap0 := h.srv.snap.Load()
	sup, _ := h.srv.mgr.Supervisor("fl")
	v0 := sup.Status().ToolsVersion
	r0 := sup.Relists()
	start := time.Now()
	if _, err := h.call(ctx, h.svc, "fl_flood", `{"n": 1000, "gap_ms": 2}`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the trailing re-list
	n := sup.Relists() - r0
	// One per second (catalogmcp.RelistInterval) plus the first and the trailing one.
	limit := int64(time.Since(start)/time.Second) + 2
	if n < 1 || n > limit {
		t.Fatalf("1,000 list_changed caused %d re-lists in %s, want 1..%d", n, time.Since(start).Round(time.Millisecond), limit)
	}
	if s1 := h.srv.snap.Load(); s1.hash != snap0.hash || sup.Status().ToolsVersion != v0 {
		t.Fatalf("an unchanged re-listed list changed the catalog: hash %s -> %s, tools version %d -> %d", snap0.hash, s1.hash, v0, sup.Status().ToolsVersion)
	}
	// The flood, then a real change: the change is read.
	if _, err := h.call(ctx, h.svc, "fl_flood", `{"n": 100}`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.call(ctx, h.svc, "fl_add_tool", `{}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the tool added after a flood listed", func() bool { return h.toolByOriginal("fl", "extra") != nil })
	t.Logf("re-lists for 1,000 list_changed over %s: %d", time.Since(start).Round(time.Millisecond), n)
}

// TestEmptyAnswersAreNoProtocol: a server answering every request with {}
// is not taken for protocol 2026-07-28 (its server/discover answer lists no
// supportedVersions); the handshake then refuses it: FAILED, with the reason.
func TestEmptyAnswersAreNoProtocol(t *testing.T) {
	h := start(t, extJSON(fmt.Sprintf(`"empty": {"command": %q, "args": ["empty"], "session_init_timeout": 10}`, fixture)), nil)
	sv := h.server("empty")
	if sv.GetState() != catalogv1.ServerState_SERVER_STATE_FAILED || sv.GetProtocolVersion() == "2026-07-28" ||
		!strings.Contains(strings.ToLower(sv.GetLastError()), "protocol") {
		t.Fatalf("empty-answer server: state %v protocol %q error %q", sv.GetState(), sv.GetProtocolVersion(), sv.GetLastError())
	}
}

// TestTenantAdminCannotCarryHostVariables: a global admin gave acme's server
// an env value from the suite's environment; the tenant admin sees it
// masked, and rewriting the server with "***" (which keeps the stored
// `${VAR}`) is refused, so the variable never reaches a server the tenant
// admin controls. The global admin's own rewrite keeps working.
func TestTenantAdminCannotCarryHostVariables(t *testing.T) {
	t.Setenv("TP_HOST_SECRET", "hunter2")
	h := start(t, extJSON(`"acme_s": {"type": "http", "url": "http://127.0.0.1:1/mcp", "tenants": ["acme"], "env": {"K": "${TP_HOST_SECRET}"}}`), nil)
	ctx := ctxT(t)
	ls, err := h.acmeAdmin.ListServers(ctx, &catalogv1.ListServersRequest{})
	if err != nil || len(ls.GetServers()) != 1 {
		t.Fatalf("ListServers = %v, %v", ls, err)
	}
	cfg := ls.GetServers()[0].GetConfig()
	if cfg.GetEnv()["K"] != "***" {
		t.Fatalf("env shown to the tenant admin: %v", cfg.GetEnv())
	}
	cfg.Description = "rewritten"
	_, err = h.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{cfg}})
	if codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "servers[0].env.K") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("tenant admin's rewrite keeping a ${VAR}: %v", err)
	}
	if _, err := h.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{cfg}}); err != nil {
		t.Fatalf("global admin's rewrite: %v", err)
	}
}

// TestTenantScopedResourcesAndPrompts: the resources, templates and prompts
// of a tenant-scoped server exist only for its tenants (listing, read,
// get, completion), like its tools.
func TestTenantScopedResourcesAndPrompts(t *testing.T) {
	ev := npmJS(t, "server-everything")
	h := start(t, extJSON(fmt.Sprintf(`"ra": {"command": "node", "args": [%q, "stdio"], "tenants": ["acme"]}`, ev),
		fmt.Sprintf(`"rg": {"command": "node", "args": [%q, "stdio"]}`, ev)), nil)
	ctx := ctxT(t)
	acme, beta := forTenant(ctx, "acme"), forTenant(ctx, "beta")
	servers := func(c context.Context) (res, prompts map[string]bool, aRes *catalogv1.Resource, aPrompt *catalogv1.Prompt) {
		res, prompts = map[string]bool{}, map[string]bool{}
		rr, err := h.svc.ListResources(c, &catalogv1.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rr.GetResources() {
			res[r.GetServer()] = true
			if r.GetServer() == "ra" && aRes == nil {
				aRes = r
			}
		}
		pr, err := h.svc.ListPrompts(c, &catalogv1.ListPromptsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pr.GetPrompts() {
			prompts[p.GetServer()] = true
			if p.GetServer() == "ra" && aPrompt == nil {
				aPrompt = p
			}
		}
		return
	}
	eventually(t, 20*time.Second, "resources and prompts of both servers", func() bool {
		r, p, _, _ := servers(ctx)
		return r["ra"] && r["rg"] && p["ra"] && p["rg"]
	})
	r, p, aRes, aPrompt := servers(acme)
	if !r["ra"] || !p["ra"] || !r["rg"] || aRes == nil || aPrompt == nil {
		t.Fatalf("acme sees resources of %v, prompts of %v", r, p)
	}
	r, p, _, _ = servers(beta)
	if r["ra"] || p["ra"] || !r["rg"] || !p["rg"] {
		t.Fatalf("beta sees resources of %v, prompts of %v", r, p)
	}
	if rt, err := h.svc.ListResourceTemplates(beta, &catalogv1.ListResourceTemplatesRequest{}); err != nil || slices.ContainsFunc(rt.GetResourceTemplates(), func(x *catalogv1.ResourceTemplate) bool { return x.GetServer() == "ra" }) {
		t.Fatalf("beta's templates: %v, %v", rt, err)
	}
	if _, err := h.svc.ReadResource(acme, &catalogv1.ReadResourceRequest{Uri: aRes.GetUri()}); err != nil {
		t.Fatalf("acme reads its resource: %v", err)
	}
	if _, err := h.svc.ReadResource(beta, &catalogv1.ReadResourceRequest{Uri: aRes.GetUri()}); codeOf(err) != codes.NotFound {
		t.Fatalf("beta reads acme's resource: %v, want NOT_FOUND", err)
	}
	if _, err := h.svc.GetPrompt(beta, &catalogv1.GetPromptRequest{Name: aPrompt.GetName()}); codeOf(err) != codes.NotFound {
		t.Fatalf("beta gets acme's prompt: %v, want NOT_FOUND", err)
	}
	if _, err := h.svc.Complete(beta, &catalogv1.CompleteRequest{Prompt: aPrompt.GetName(), ArgumentName: "x"}); codeOf(err) != codes.NotFound {
		t.Fatalf("beta completes acme's prompt: %v, want NOT_FOUND", err)
	}
}

// TestTenantAdminAndStoredOAuth: a global admin gave acme's http server an
// `oauth` block (which the API can neither show nor set). Its ${VAR}
// secrets are the suite's environment: a tenant admin's rewrite keeping
// them is refused naming the oauth field. A block without ${VAR} stays with
// its url and type: a tenant admin's rewrite of the same url is accepted,
// one pointing the server (and the credentials minted for it) at another
// host, or changing its type, is refused naming servers[0].url
// (docs/decisions/0137-oauth-stays-with-its-host.md). A global admin may
// still move it.
func TestTenantAdminAndStoredOAuth(t *testing.T) {
	t.Setenv("TP_OAUTH_SECRET", "hunter2")
	h := start(t, extJSON(
		`"acme_cc": {"type": "http", "url": "http://127.0.0.1:1/mcp", "tenants": ["acme"], "oauth": {"token_url": "http://127.0.0.1:1/token", "client_id": "c", "client_secret": "${TP_OAUTH_SECRET}"}}`,
		`"acme_ac": {"type": "http", "url": "http://127.0.0.1:1/mcp", "tenants": ["acme"], "oauth": {"grant_type": "authorization_code", "client_id": "public"}}`,
	), nil)
	ctx := ctxT(t)
	ls, err := h.acmeAdmin.ListServers(ctx, &catalogv1.ListServersRequest{})
	if err != nil || len(ls.GetServers()) != 2 {
		t.Fatalf("ListServers = %v, %v", ls, err)
	}
	cfgs := map[string]*catalogv1.ServerConfig{}
	for _, sv := range ls.GetServers() {
		cfgs[sv.GetConfig().GetName()] = sv.GetConfig()
	}
	write := func(w catalogv1.CatalogServiceClient, cs ...*catalogv1.ServerConfig) error {
		_, err := w.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: cs})
		return err
	}
	moved := func(c *catalogv1.ServerConfig, url string) *catalogv1.ServerConfig {
		c = proto.Clone(c).(*catalogv1.ServerConfig)
		c.Url = url
		return c
	}
	before, _ := os.ReadFile(h.path)
	err = write(h.acmeAdmin, cfgs["acme_cc"], cfgs["acme_ac"])
	if codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "servers[0].oauth.client_secret") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("tenant admin's rewrite keeping the oauth ${VAR}: %v", err)
	}
	err = write(h.acmeAdmin, moved(cfgs["acme_ac"], "http://127.0.0.2:1/mcp"))
	if codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "servers[0].url") {
		t.Fatalf("tenant admin moves a server with an oauth block to another host: %v", err)
	}
	sse := proto.Clone(cfgs["acme_ac"]).(*catalogv1.ServerConfig)
	sse.Type = catalogv1.ServerType_SERVER_TYPE_SSE
	if err := write(h.acmeAdmin, sse); codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "servers[0].url") {
		t.Fatalf("tenant admin changes the type of a server with an oauth block: %v", err)
	}
	if after, _ := os.ReadFile(h.path); string(after) != string(before) {
		t.Fatalf("a refused write changed the file:\n%s", after)
	}
	if err := write(h.admin, moved(cfgs["acme_cc"], "http://127.0.0.2:1/mcp"), cfgs["acme_ac"]); err != nil {
		t.Fatalf("global admin moves the server: %v", err)
	}
	same := proto.Clone(cfgs["acme_ac"]).(*catalogv1.ServerConfig)
	same.Description = "rewritten by acme"
	if err := write(h.acmeAdmin, same); err != nil {
		t.Fatalf("tenant admin's rewrite of the same url: %v", err)
	}
	raw, _ := os.ReadFile(h.path)
	if !strings.Contains(string(raw), `"authorization_code"`) || !strings.Contains(string(raw), "rewritten by acme") {
		t.Fatalf("the oauth block is not kept by the accepted rewrite:\n%s", raw)
	}
}

// TestScopeDirEscapeRefusedForEveryWriter: `${TOOLPLANE_SCOPE_DIR}/..` in a
// stdio server's args or env reaches other scopes' directories; the file's
// server is FAILED with the reason, and a global admin's write is refused
// naming the field (docs/decisions/0136-tenant-admins-write-remote-servers-only.md).
func TestScopeDirEscapeRefusedForEveryWriter(t *testing.T) {
	h := start(t, extJSON(fixtureServer("esc", `"session_scope": "per_user", "env": {"MEMORY_FILE_PATH": "${TOOLPLANE_SCOPE_DIR}/../../u-bob/memory.jsonl"}`)), nil)
	ctx := ctxT(t)
	sv := h.server("esc")
	if sv.GetState() != catalogv1.ServerState_SERVER_STATE_FAILED || !strings.Contains(sv.GetLastError(), "mcpServers.esc.env.MEMORY_FILE_PATH") ||
		!strings.Contains(sv.GetLastError(), "'..'") {
		t.Fatalf("file server escaping its scope dir: %v %q", sv.GetState(), sv.GetLastError())
	}
	before, _ := os.ReadFile(h.path)
	_, err := h.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{
		{Name: "esc2", Command: "node", Args: []string{"server.js", "${TOOLPLANE_SCOPE_DIR}/../../../.."}, SessionScope: catalogv1.SessionScope_SESSION_SCOPE_PER_USER}}})
	if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "mcpServers.esc2.args[1]") {
		t.Fatalf("global admin's ${TOOLPLANE_SCOPE_DIR}/..: %v", err)
	}
	if _, br := grpcx.ErrorDetails(err); len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != "servers[0].args[1]" {
		t.Fatalf("BadRequest %v, want field servers[0].args[1]", br)
	}
	if after, _ := os.ReadFile(h.path); string(after) != string(before) {
		t.Fatalf("a refused write changed the file:\n%s", after)
	}
}

// TestTenantAdminKeepsAGivenStdioServer: a stdio server a global admin gave
// acme may be kept, exactly as stored, in the tenant admin's replace next to
// a new remote server; any change to it is refused on its type
// (docs/decisions/0136-tenant-admins-write-remote-servers-only.md).
func TestTenantAdminKeepsAGivenStdioServer(t *testing.T) {
	h := start(t, extJSON(`"acme_s": {"command": "node", "args": ["server.js"], "env": {"K": "v"}, "tenants": ["acme"]}`), nil)
	ctx := ctxT(t)
	ls, err := h.acmeAdmin.ListServers(ctx, &catalogv1.ListServersRequest{})
	if err != nil || len(ls.GetServers()) != 1 {
		t.Fatalf("ListServers = %v, %v", ls, err)
	}
	kept := ls.GetServers()[0].GetConfig()
	remote := &catalogv1.ServerConfig{Name: "acme_r", Type: catalogv1.ServerType_SERVER_TYPE_SSE, Url: "http://127.0.0.1:1/sse", Tenants: []string{"acme"}}
	changed := proto.Clone(kept).(*catalogv1.ServerConfig)
	changed.Args = []string{"/"}
	before, _ := os.ReadFile(h.path)
	if _, err := h.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{remote, changed}}); codeOf(err) != codes.PermissionDenied ||
		!strings.Contains(err.Error(), "servers[1].type") {
		t.Fatalf("tenant admin changes a given stdio server: %v", err)
	}
	if after, _ := os.ReadFile(h.path); string(after) != string(before) {
		t.Fatalf("a refused write changed the file:\n%s", after)
	}
	if _, err := h.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{remote, kept}}); err != nil {
		t.Fatalf("tenant admin keeps a given stdio server unchanged: %v", err)
	}
	if got := serverNames(t, h.admin, ctx); !slices.Equal(got, []string{"acme_r", "acme_s"}) {
		t.Fatalf("servers after the replace: %v", got)
	}
}

// TestTenantAdminKeepsStoredSecretsWithTheirHost: a global admin gave acme's
// http server a literal Authorization header (shown as "***"). A tenant
// admin's rewrite that keeps "***" while pointing the server at another url
// is refused naming the header, so the stored secret never reaches the new
// host; the same url is accepted, and sending the value again moves it.
func TestTenantAdminKeepsStoredSecretsWithTheirHost(t *testing.T) {
	h := start(t, extJSON(`"acme_hdr": {"type": "http", "url": "http://127.0.0.1:1/mcp", "tenants": ["acme"], "headers": {"Authorization": "Bearer GLOBAL-LITERAL"}}`), nil)
	ctx := ctxT(t)
	ls, err := h.acmeAdmin.ListServers(ctx, &catalogv1.ListServersRequest{})
	if err != nil || len(ls.GetServers()) != 1 {
		t.Fatalf("ListServers = %v, %v", ls, err)
	}
	cfg := ls.GetServers()[0].GetConfig()
	if cfg.GetHeaders()["Authorization"] != "***" {
		t.Fatalf("header not masked: %v", cfg.GetHeaders())
	}
	write := func(c *catalogv1.ServerConfig) error {
		_, err := h.acmeAdmin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{c}})
		return err
	}
	before, _ := os.ReadFile(h.path)
	moved := proto.Clone(cfg).(*catalogv1.ServerConfig)
	moved.Url = "http://127.0.0.2:1/mcp"
	if err := write(moved); codeOf(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "servers[0].headers.Authorization") || strings.Contains(err.Error(), "GLOBAL-LITERAL") {
		t.Fatalf("tenant admin moves a stored header secret to another host: %v", err)
	}
	if after, _ := os.ReadFile(h.path); string(after) != string(before) {
		t.Fatalf("a refused write changed the file:\n%s", after)
	}
	same := proto.Clone(cfg).(*catalogv1.ServerConfig)
	same.Description = "same host"
	if err := write(same); err != nil {
		t.Fatalf("tenant admin's rewrite of the same url keeping the secret: %v", err)
	}
	moved.Headers = map[string]string{"Authorization": "Bearer ACME-OWN"}
	if err := write(moved); err != nil {
		t.Fatalf("tenant admin moves the server sending its own value: %v", err)
	}
	if raw, _ := os.ReadFile(h.path); strings.Contains(string(raw), "GLOBAL-LITERAL") || !strings.Contains(string(raw), "ACME-OWN") {
		t.Fatalf("after the move the file holds:\n%s", raw)
	}
}

package runtime_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/grpcx"
)

// TestPerTenantNamespaces: two tenants each run their own memory server
// (real npm server-memory, its own file) exposing the same tool names
// unprefixed. Through the real runtime each tenant sees plain names, its
// calls reach its own server, its search shows nothing of the other
// tenant; a tenant changing its servers leaves the other's hashes and
// promotions alone; a global server taking one of the names wins, and each
// tenant's pair is renamed and reported to that tenant only
// (docs/decisions/0106-per-tenant-name-namespaces.md).
func TestPerTenantNamespaces(t *testing.T) {
	memory := npmJS(t, "server-memory")
	dir := t.TempDir()
	mem := func(tenant string) map[string]any {
		return map[string]any{"command": "node", "args": []string{memory}, "tool_name_prefix": false, "tenants": []string{tenant},
			"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, tenant+".jsonl")}}
	}
	betaExtra := filepath.Join(dir, "beta_extra.jsonl")
	if err := os.WriteFile(betaExtra, []byte(`{"name": "beta_only_ledger", "description": "Read the beta ledger", "server": "beta_books"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	global := filepath.Join(dir, "global.jsonl")
	if err := os.WriteFile(global, []byte(`{"name": "read_graph", "description": "Read the shared graph", "server": "shared_graph"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ext := func(servers map[string]any) map[string]any { return map[string]any{"mcpServers": servers} }
	base := map[string]any{"mem_acme": mem("acme"), "mem_beta": mem("beta")}
	const (
		carolToken = "carol-token-0123456789" // acme user
		daveToken  = "dave-token-0123456789"  // beta user
		svcToken   = "svc-token-0123456789"
	)
	s := newSuiteWith(t, dir, ext(base), false, func(c *app.Config) {
		c.Auth.Tokens = append(c.Auth.Tokens,
			config.Token{Name: "carol", SHA256: sha(carolToken), Kind: "user", Subject: "carol", Tenant: "acme", Roles: []string{"user"}},
			config.Token{Name: "dave", SHA256: sha(daveToken), Kind: "user", Subject: "dave", Tenant: "beta", Roles: []string{"user"}},
			config.Token{Name: "svc", SHA256: sha(svcToken), Kind: "service", Subject: "svc:test", Roles: []string{"service"}})
	})
	carol, dave := s.rt(carolToken), s.rt(daveToken)
	cat := catalogv1.NewCatalogServiceClient(s.dial(svcToken))
	bg := context.Background()
	as := func(tenant string) context.Context {
		return grpcx.WithPrincipal(bg, &typev1.Principal{Subject: "u-" + tenant, Tenant: tenant, Roles: []string{"user"}})
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	has := func(r *runtimev1.AssembleToolsResponse, n string) bool {
		return names(r.GetTools())[n] || slices.Contains(r.GetDeferred(), n)
	}
	thC, thD := newThread(t, carol, nil), newThread(t, dave, nil)
	waitFor("both tenants' memory tools", func() bool {
		return has(assemble(t, carol, thC, ""), "read_graph") && has(assemble(t, dave, thD, ""), "create_entities")
	})

	// Plain names in each namespace, each resolving to its own server.
	for tenant, server := range map[string]string{"acme": "mem_acme", "beta": "mem_beta"} {
		lt, err := cat.ListTools(as(tenant), &catalogv1.ListToolsRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range lt.GetTools() {
			if tl.GetServer() != server || tl.GetRenamed() || tl.GetNameHeldBy() != nil || tl.GetName() != tl.GetOriginalName() {
				t.Fatalf("%s's tool %s (server %s, renamed %v, held by %v): want plain names of %s only", tenant, tl.GetName(), tl.GetServer(), tl.GetRenamed(), tl.GetNameHeldBy(), server)
			}
		}
		g, err := cat.GetTool(as(tenant), &catalogv1.GetToolRequest{Name: "read_graph"})
		if err != nil || g.GetTool().GetServer() != server {
			t.Fatalf("%s's read_graph = %v, %v; want server %s", tenant, g.GetTool(), err, server)
		}
	}

	// Calls reach the caller's own server: acme writes an entity; beta's
	// graph does not have it, acme's does.
	promote := func(c runtimev1.RuntimeServiceClient, th string) {
		t.Helper()
		sr := call(t, c, th, "tool_search", map[string]any{"query": "select:create_entities,read_graph"})
		if got := sr.GetPromoted().GetTools(); len(got) != 2 {
			t.Fatalf("promoted %v (%s)", sr.GetPromoted(), text(sr))
		}
	}
	promote(carol, thC)
	promote(dave, thD)
	if r := call(t, carol, thC, "create_entities", map[string]any{"entities": []any{map[string]any{"name": "acme-secret-entity", "entityType": "note", "observations": []any{"x"}}}}); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		t.Fatalf("acme's create_entities: %s", text(r))
	}
	if r := call(t, dave, thD, "read_graph", map[string]any{}); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || strings.Contains(text(r), "acme-secret-entity") {
		t.Fatalf("beta's read_graph reached acme's server or failed: %s", text(r))
	}
	if r := call(t, carol, thC, "read_graph", map[string]any{}); !strings.Contains(text(r), "acme-secret-entity") {
		t.Fatalf("acme's read_graph does not reach acme's server: %s", text(r))
	}

	// Search leaks nothing of the other tenant: beta's own tool is not
	// found by acme, by name or by words, and the name is unknown to
	// acme's GetCatalog exactly like a name nobody holds.
	s2 := map[string]any{"mem_acme": base["mem_acme"], "mem_beta": base["mem_beta"],
		"beta_books": map[string]any{"type": "static", "path": betaExtra, "tenants": []string{"beta"}}}
	hashA := func() string {
		r, err := cat.GetCatalog(as("acme"), &catalogv1.GetCatalogRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetCatalogHash()
	}
	hashB := func() string {
		r, err := cat.GetCatalog(as("beta"), &catalogv1.GetCatalogRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetCatalogHash()
	}
	a0, b0 := hashA(), hashB()
	asmA0 := assemble(t, carol, thC, "").GetCatalogHash()
	writeExt(t, s.ext, ext(s2))
	waitFor("beta's extra server", func() bool { return has(assemble(t, dave, thD, ""), "beta_only_ledger") })
	if hashB() == b0 {
		t.Fatal("beta's hash did not change with its new server")
	}
	if a := hashA(); a != a0 {
		t.Fatalf("acme's hash moved (%s -> %s) when beta changed its servers", a0, a)
	}
	ra := assemble(t, carol, thC, "")
	if ra.GetCatalogHash() != asmA0 || !names(ra.GetTools())["create_entities"] || !names(ra.GetTools())["read_graph"] {
		t.Fatalf("acme's assembly after beta's change: hash %s (was %s), bound %v; want both promotions kept", ra.GetCatalogHash(), asmA0, names(ra.GetTools()))
	}
	if has(ra, "beta_only_ledger") {
		t.Fatal("acme's assembly holds beta's tool")
	}
	for _, q := range []string{"select:beta_only_ledger", "select:beta_books/beta_only_ledger", "beta ledger"} {
		sr := call(t, carol, thC, "tool_search", map[string]any{"query": q})
		if strings.Contains(text(sr), "Read the beta") || len(sr.GetPromoted().GetTools()) != 0 {
			t.Fatalf("acme's tool_search %q shows beta's tool: %s %v", q, text(sr), sr.GetPromoted())
		}
	}
	sr, err := cat.SearchTools(as("acme"), &catalogv1.SearchToolsRequest{Query: "ledger", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range sr.GetHits() {
		if h.GetTool().GetServer() != "mem_acme" {
			t.Fatalf("acme's search hit %s of %s", h.GetTool().GetName(), h.GetTool().GetServer())
		}
	}
	known, _ := cat.GetCatalog(as("acme"), &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{Values: []string{"beta_only_ledger", "nobody_holds_this"}}})
	if !slices.Equal(known.GetUnknown(), []string{"beta_only_ledger", "nobody_holds_this"}) {
		t.Fatalf("acme's GetCatalog unknown = %v; beta's name must be as unknown as any", known.GetUnknown())
	}

	// A global server takes read_graph: it wins in both namespaces; each
	// tenant's pair is renamed, and each tenant's watch reports its own
	// rename only.
	watch := func(tenant string) (catalogv1.CatalogService_WatchCatalogClient, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(as(tenant), 90*time.Second)
		w, err := cat.WatchCatalog(ctx, &catalogv1.WatchCatalogRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatal(err)
		}
		return w, cancel
	}
	wA, cancelA := watch("acme")
	defer cancelA()
	wB, cancelB := watch("beta")
	defer cancelB()
	s3 := map[string]any{"shared_graph": map[string]any{"type": "static", "path": global, "tool_name_prefix": false}}
	for k, v := range s2 {
		s3[k] = v
	}
	writeExt(t, s.ext, ext(s3))
	renames := func(w catalogv1.CatalogService_WatchCatalogClient) []*catalogv1.ToolRename {
		t.Helper()
		for {
			ev, err := w.Recv()
			if err != nil {
				t.Fatalf("no rename reported: %v", err)
			}
			if rn := ev.GetEvent().GetRenames(); len(rn) > 0 {
				return rn
			}
		}
	}
	for tenant, w := range map[string]catalogv1.CatalogService_WatchCatalogClient{"acme": wA, "beta": wB} {
		rn := renames(w)
		if len(rn) != 1 || rn[0].GetTool().GetServer() != "mem_"+tenant || rn[0].GetPreviousName() != "read_graph" || rn[0].GetTool().GetName() == "read_graph" {
			t.Fatalf("%s's renames = %v; want its own read_graph pair only", tenant, rn)
		}
	}
	for tenant := range map[string]bool{"acme": true, "beta": true} {
		g, err := cat.GetTool(as(tenant), &catalogv1.GetToolRequest{Name: "read_graph"})
		if err != nil || g.GetTool().GetServer() != "shared_graph" {
			t.Fatalf("%s's read_graph after the global server = %v, %v; want the global server's", tenant, g.GetTool(), err)
		}
		mine, err := cat.ListTools(as(tenant), &catalogv1.ListToolsRequest{Server: "mem_" + tenant, PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range mine.GetTools() {
			if tl.GetOriginalName() == "read_graph" && (!tl.GetRenamed() || tl.GetNameHeldBy().GetServer() != "shared_graph") {
				t.Fatalf("%s's renamed pair = %v", tenant, tl)
			}
		}
	}
}

func writeExt(t *testing.T, path string, ext map[string]any) {
	t.Helper()
	b, _ := json.Marshal(ext)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestPerTenantNamespacesAuthz: with the real authz service, a policy line
// in tenant acme's domain on tool `ledger` governs acme's `ledger` only;
// beta's tool of the same name is untouched (authz resource names stay the
// exposed names; the domain is the namespace, decision 0106).
func TestPerTenantNamespacesAuthz(t *testing.T) {
	dir := t.TempDir()
	write := func(name, line string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	acme := write("acme.jsonl", `{"name": "ledger", "description": "Read the acme ledger", "server": "books_acme"}`)
	beta := write("beta.jsonl", `{"name": "ledger", "description": "Read the beta ledger", "server": "books_beta"}`)
	ext := map[string]any{"mcpServers": map[string]any{
		"books_acme": map[string]any{"type": "static", "path": acme, "tenants": []string{"acme"}, "tool_name_prefix": false},
		"books_beta": map[string]any{"type": "static", "path": beta, "tenants": []string{"beta"}, "tool_name_prefix": false},
	}}
	const (
		carolToken = "carol-token-0123456789"
		daveToken  = "dave-token-0123456789"
	)
	s := newSuiteWith(t, dir, ext, true, func(c *app.Config) {
		c.Auth.Tokens = append(c.Auth.Tokens,
			config.Token{Name: "carol", SHA256: sha(carolToken), Kind: "user", Subject: "carol", Tenant: "acme", Roles: []string{"user"}},
			config.Token{Name: "dave", SHA256: sha(daveToken), Kind: "user", Subject: "dave", Tenant: "beta", Roles: []string{"user"}})
	})
	carol, dave := s.rt(carolToken), s.rt(daveToken)
	thC, thD := newThread(t, carol, nil), newThread(t, dave, nil)
	has := func(r *runtimev1.AssembleToolsResponse, n string) bool {
		return names(r.GetTools())[n] || slices.Contains(r.GetDeferred(), n)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !(has(assemble(t, carol, thC, ""), "ledger") && has(assemble(t, dave, thD, ""), "ledger")) {
		if time.Now().After(deadline) {
			t.Fatal("both tenants' ledger never assembled")
		}
		time.Sleep(100 * time.Millisecond)
	}
	az := authzv1.NewAuthzServiceClient(s.dial(adminToken))
	if _, err := az.AddPolicies(context.Background(), &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{
		{Role: "user", Tenant: "acme", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "ledger", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY},
	}}); err != nil {
		t.Fatalf("AddPolicies: %v", err)
	}
	// The chain's authz check of a call: acme's is denied, beta's passes
	// (and reaches the catalog, which answers for a static tool).
	for _, u := range []struct {
		c  runtimev1.RuntimeServiceClient
		th string
	}{{carol, thC}, {dave, thD}} {
		if sr := call(t, u.c, u.th, "tool_search", map[string]any{"query": "select:ledger"}); len(sr.GetPromoted().GetTools()) != 1 {
			t.Fatalf("promote ledger: %v (%s)", sr.GetPromoted(), text(sr))
		}
	}
	var cc *runtimev1.ToolResult
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if cc = call(t, carol, thC, "ledger", map[string]any{}); strings.HasPrefix(cc.GetReasonCode(), "authz") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme's deny line never took effect on acme's ledger: %s %s", cc.GetReasonCode(), text(cc))
		}
	}
	cd := call(t, dave, thD, "ledger", map[string]any{})
	if strings.HasPrefix(cd.GetReasonCode(), "authz") || !strings.Contains(strings.ToLower(text(cd)), "static") {
		t.Fatalf("beta's ledger call: %s %s; want past authz (the static-tool answer)", cd.GetReasonCode(), text(cd))
	}
}

package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// Per-tenant name namespaces (docs/decisions/0106-per-tenant-name-namespaces.md)
// and tenant admins' reviews (docs/decisions/0107-tenant-admins-review-their-tools.md).

// TestTenantNamespaces: two tenants' servers expose the same unprefixed
// tool names. Each tenant resolves them to its own server in GetTool,
// CallTool, SearchTools (also `select:` forms and candidate views),
// GetCatalog and WatchCatalog; a tenant's hash and events do not move
// when the other tenant changes its server; a caller of every tenant gets
// a clear NOT_FOUND for a name several tenants hold.
func TestTenantNamespaces(t *testing.T) {
	dir := t.TempDir()
	fa := toolsFile(t, dir, "fa.json", map[string]any{"name": "lookup", "description": "acme lookup"}, map[string]any{"name": "acme_only", "description": "acme only tool"})
	fb := toolsFile(t, dir, "fb.json", map[string]any{"name": "lookup", "description": "beta lookup"}, map[string]any{"name": "beta_only", "description": "beta only tool"})
	fb2 := toolsFile(t, dir, "fb2.json", map[string]any{"name": "lookup", "description": "beta lookup, second version"}, map[string]any{"name": "beta_only", "description": "beta only tool"})
	srv := func(name, file, tenant string) string {
		return fixtureWithTools(name, file, fmt.Sprintf(`"tool_name_prefix": false, "tenants": [%q]`, tenant))
	}
	h := startDir(t, dir, extJSON(srv("sa", fa, "acme"), srv("sb", fb, "beta")), nil)
	ctx := ctxT(t)
	acme, beta := forTenant(ctx, "acme"), forTenant(ctx, "beta")
	for tenant, want := range map[string]string{"acme": "sa", "beta": "sb"} {
		c := forTenant(ctx, tenant)
		g, err := h.svc.GetTool(c, &catalogv1.GetToolRequest{Name: "lookup"})
		if err != nil || g.GetTool().GetServer() != want || g.GetTool().GetRenamed() || g.GetTool().GetNameHeldBy() != nil {
			t.Fatalf("%s's lookup = %v, %v", tenant, g.GetTool(), err)
		}
		res, err := h.call(c, h.svc, "lookup", `{}`)
		if err != nil || textOf(res) != "lookup: "+tenant+" lookup" {
			t.Fatalf("%s's call of lookup = %q, %v; want its own server", tenant, textOf(res), err)
		}
	}
	if _, err := h.svc.GetTool(ctx, &catalogv1.GetToolRequest{Name: "lookup"}); codeOf(err) != codes.NotFound || !strings.Contains(err.Error(), "several tenants") {
		t.Fatalf("lookup for a caller of every tenant: %v", err)
	}
	if _, err := h.call(ctx, h.svc, "lookup", `{}`); codeOf(err) != codes.NotFound {
		t.Fatalf("call of lookup for a caller of every tenant: %v", err)
	}
	if all := toolNames(t, h.svc, ctx); len(slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n != "lookup" })) != 2 {
		t.Fatalf("the service acting for nobody lists %v; want both tenants' lookup", all)
	}
	// Another tenant's tool is unknown like any unknown name: by exposed
	// name, server/tool, original name, in a candidate list.
	if _, err := h.svc.GetTool(acme, &catalogv1.GetToolRequest{Name: "beta_only"}); codeOf(err) != codes.NotFound || strings.Contains(err.Error(), "several") {
		t.Fatalf("beta_only for acme: %v", err)
	}
	for _, q := range []string{"select:beta_only", "select:sb/beta_only", "select:sb/lookup", "beta", "lookup", "+lookup beta"} {
		r, err := h.svc.SearchTools(acme, &catalogv1.SearchToolsRequest{Query: q, Limit: 10})
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		for _, hit := range r.GetHits() {
			if hit.GetTool().GetServer() != "sa" {
				t.Fatalf("acme's search %q hit %s of %s", q, hit.GetTool().GetName(), hit.GetTool().GetServer())
			}
		}
		if q == "select:sb/lookup" && len(r.GetHits()) != 0 {
			t.Fatalf("acme selected beta's pair: %v", r.GetHits())
		}
		if q == "lookup" && (len(r.GetHits()) == 0 || r.GetHits()[0].GetTool().GetDescription() != "acme lookup") {
			t.Fatalf("acme's search for lookup = %v", r.GetHits())
		}
	}
	gc, err := h.svc.GetCatalog(acme, &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{Values: []string{"lookup", "beta_only", "never_held"}}})
	if err != nil || gc.GetToolCount() != 1 || !slices.Equal(gc.GetUnknown(), []string{"beta_only", "never_held"}) {
		t.Fatalf("acme's GetCatalog of candidates = %v, %v", gc, err)
	}
	// Candidate views belong to their namespace: the same names give each
	// tenant its own view, hash and hits; another tenant's view id is unknown.
	views := map[string]*catalogv1.SearchToolsResponse{}
	for tenant, c := range map[string]context.Context{"acme": acme, "beta": beta} {
		r, err := h.svc.SearchTools(c, &catalogv1.SearchToolsRequest{Query: "select:lookup", Candidates: &typev1.StringList{Values: []string{"lookup"}}})
		if err != nil || len(r.GetHits()) != 1 || r.GetHits()[0].GetTool().GetDescription() != tenant+" lookup" || r.GetCandidateView() == "" {
			t.Fatalf("%s's search with candidates = %v, %v", tenant, r, err)
		}
		views[tenant] = r
	}
	if views["acme"].GetCandidateView() == views["beta"].GetCandidateView() || views["acme"].GetCatalogHash() == views["beta"].GetCatalogHash() {
		t.Fatalf("two tenants share a view or a hash: %v / %v", views["acme"], views["beta"])
	}
	if r, err := h.svc.SearchTools(beta, &catalogv1.SearchToolsRequest{Query: "lookup", CandidateView: views["acme"].GetCandidateView()}); err != nil || !r.GetCandidateViewUnknown() {
		t.Fatalf("beta using acme's view: %v, %v", r, err)
	}
	r, err := h.svc.SearchTools(acme, &catalogv1.SearchToolsRequest{Query: "select:lookup", CandidateView: views["acme"].GetCandidateView()})
	if err != nil || len(r.GetHits()) != 1 || r.GetHits()[0].GetTool().GetServer() != "sa" || r.GetCatalogHash() != views["acme"].GetCatalogHash() {
		t.Fatalf("acme's view = %v, %v", r, err)
	}

	// Beta changes its server: acme's hash and watch stay as they were.
	hashOf := func(c context.Context) string {
		r, err := h.svc.GetCatalog(c, &catalogv1.GetCatalogRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetCatalogHash()
	}
	a0, b0 := hashOf(acme), hashOf(beta)
	wctx, cancel := context.WithTimeout(acme, 30*time.Second)
	defer cancel()
	wa, err := h.svc.WatchCatalog(wctx, &catalogv1.WatchCatalogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := wa.Recv()
	if err != nil || first.GetEvent().GetCatalogHash() != a0 || first.GetEvent().GetDefinitionHashes()["lookup"] == "" {
		t.Fatalf("acme's first event = %v, %v (hash %s)", first, err, a0)
	}
	wbctx, cancelB := context.WithTimeout(beta, 30*time.Second)
	defer cancelB()
	wb, err := h.svc.WatchCatalog(wbctx, &catalogv1.WatchCatalogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wb.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := catalogconfig.WriteAtomic(h.path, []byte(extJSON(srv("sa", fa, "acme"), srv("sb", fb2, "beta")))); err != nil {
		t.Fatal(err)
	}
	var bev *catalogv1.CatalogEvent
	for bev == nil {
		ev, err := wb.Recv()
		if err != nil {
			t.Fatalf("beta's watch: %v", err)
		}
		// The server restarts with its new definition: lookup changes, or
		// is removed and added again.
		if e := ev.GetEvent(); slices.Contains(e.GetToolsChanged(), "lookup") || slices.Contains(e.GetToolsAdded(), "lookup") {
			bev = e
		}
	}
	if bev.GetCatalogHash() == b0 || bev.GetDefinitionHashes()["lookup"] == "" {
		t.Fatalf("beta's change event = %v", bev)
	}
	if a := hashOf(acme); a != a0 {
		t.Fatalf("acme's hash moved %s -> %s when beta changed its server", a0, a)
	}
	for {
		ev, err := wa.Recv()
		if err != nil {
			t.Fatalf("acme's watch: %v", err)
		}
		e := ev.GetEvent()
		if len(e.GetToolsChanged())+len(e.GetToolsAdded())+len(e.GetToolsRemoved())+len(e.GetDefinitionHashes())+len(e.GetServersChanged()) > 0 || e.GetCatalogHash() != a0 {
			t.Fatalf("acme's watch reports beta's change: %v", e)
		}
		if e.GetType() == catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_CHANGED {
			break // the event of beta's change, filtered to nothing
		}
	}
	if res, err := h.call(acme, h.svc, "lookup", `{}`); err != nil || textOf(res) != "lookup: acme lookup" {
		t.Fatalf("acme's lookup after beta's change = %q, %v", textOf(res), err)
	}
}

// TestTenantPromptsAndResources: prompts and unprefixed resource URIs are
// exposed per namespace: two tenants' servers with the same prompts and
// URIs both get them plain; a caller of every tenant sees them settled
// among all servers.
func TestTenantPromptsAndResources(t *testing.T) {
	ev := npmJS(t, "server-everything")
	srv := func(name, tenant string) string {
		return fmt.Sprintf(`%q: {"command": "node", "args": [%q, "stdio"], "tool_name_prefix": false, "tenants": [%q]}`, name, ev, tenant)
	}
	h := start(t, extJSON(srv("ea", "acme"), srv("eb", "beta")), nil)
	ctx := ctxT(t)
	eventually(t, 30*time.Second, "prompts of both servers", func() bool {
		r, err := h.svc.ListPrompts(ctx, &catalogv1.ListPromptsRequest{})
		seen := map[string]bool{}
		for _, p := range r.GetPrompts() {
			seen[p.GetServer()] = true
		}
		return err == nil && len(seen) == 2
	})
	for tenant, want := range map[string]string{"acme": "ea", "beta": "eb"} {
		c := forTenant(ctx, tenant)
		pr, err := h.svc.ListPrompts(c, &catalogv1.ListPromptsRequest{})
		if err != nil || len(pr.GetPrompts()) == 0 {
			t.Fatalf("%s's prompts: %v, %v", tenant, pr, err)
		}
		for _, p := range pr.GetPrompts() {
			if p.GetServer() != want || p.GetName() != p.GetOriginalName() {
				t.Fatalf("%s's prompt %s (server %s, original %s): want plain names of %s", tenant, p.GetName(), p.GetServer(), p.GetOriginalName(), want)
			}
		}
		name := pr.GetPrompts()[0].GetName()
		if _, err := h.svc.GetPrompt(c, &catalogv1.GetPromptRequest{Name: name}); err != nil && codeOf(err) == codes.NotFound {
			t.Fatalf("%s's GetPrompt %s: %v", tenant, name, err)
		}
		rs, err := h.svc.ListResources(c, &catalogv1.ListResourcesRequest{})
		if err != nil || len(rs.GetResources()) == 0 {
			t.Fatalf("%s's resources: %v, %v", tenant, rs, err)
		}
		for _, r := range rs.GetResources() {
			if r.GetServer() != want || r.GetUri() != r.GetOriginalUri() {
				t.Fatalf("%s's resource %s (server %s, original %s): want plain URIs of %s", tenant, r.GetUri(), r.GetServer(), r.GetOriginalUri(), want)
			}
		}
		u := rs.GetResources()[0].GetUri()
		out, err := h.svc.ReadResource(c, &catalogv1.ReadResourceRequest{Uri: u})
		if err != nil || out.GetServer() != want {
			t.Fatalf("%s's ReadResource %s = %v, %v", tenant, u, out, err)
		}
	}
	// A caller of every tenant sees both, settled among all servers
	// (the second prefixed), never the same exposed URI twice.
	rs, err := h.svc.ListResources(ctx, &catalogv1.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rs.GetResources() {
		if seen[r.GetUri()] {
			t.Fatalf("URI %s listed twice for a caller of every tenant", r.GetUri())
		}
		seen[r.GetUri()] = true
	}
}

// TestTenantAdminReviews: a tenant admin lists, approves and rejects the
// pinned tools of its own tenant's servers, and only those: another
// tenant's and a global server's tools are neither listed nor reviewable
// (NOT_FOUND, the answer of an unknown name). The audit names the actor.
// A global admin settles a name two tenants hold by the definition hash.
func TestTenantAdminReviews(t *testing.T) {
	dir := t.TempDir()
	pa := toolsFile(t, dir, "pa.json", map[string]any{"name": "fetch", "description": "acme fetch"})
	pb := toolsFile(t, dir, "pb.json", map[string]any{"name": "fetch", "description": "beta fetch"}, map[string]any{"name": "beta_tool", "description": "beta tool"})
	pg := toolsFile(t, dir, "pg.json", map[string]any{"name": "global_tool", "description": "global tool"})
	pin := `"pin": true, "pin_new_tools": "review", "tool_name_prefix": false`
	h := startDir(t, dir, extJSON(fixtureWithTools("pa", pa, pin+`, "tenants": ["acme"]`), fixtureWithTools("pb", pb, pin+`, "tenants": ["beta"]`),
		fixtureWithTools("pg", pg, pin)), nil)
	ctx := ctxT(t)
	pending := func(c catalogv1.CatalogServiceClient, server string) map[string]*catalogv1.PendingTool {
		t.Helper()
		r, err := c.ListPendingTools(ctx, &catalogv1.ListPendingToolsRequest{Server: server})
		if err != nil {
			t.Fatal(err)
		}
		// The fixture's own tools are pinned too; these are the ones of the files.
		out := map[string]*catalogv1.PendingTool{}
		for _, p := range r.GetTools() {
			if n := p.GetTool().GetOriginalName(); n == "fetch" || n == "beta_tool" || n == "global_tool" {
				out[p.GetTool().GetServer()+"/"+p.GetTool().GetName()] = p
			}
		}
		return out
	}
	all := pending(h.admin, "")
	if len(all) != 4 || all["pa/fetch"] == nil || all["pb/fetch"] == nil || all["pb/beta_tool"] == nil || all["pg/global_tool"] == nil {
		t.Fatalf("global admin's pending = %v", slices.Collect(maps.Keys(all)))
	}
	mine := pending(h.acmeAdmin, "")
	if len(mine) != 1 || mine["pa/fetch"] == nil {
		t.Fatalf("acme admin's pending = %v; want pa/fetch only", slices.Collect(maps.Keys(mine)))
	}
	if r, err := h.acmeAdmin.ListPendingTools(ctx, &catalogv1.ListPendingToolsRequest{PageSize: 1000}); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range r.GetTools() {
			if p.GetTool().GetServer() != "pa" {
				t.Fatalf("acme admin's pending lists %s of %s", p.GetTool().GetName(), p.GetTool().GetServer())
			}
		}
	}
	for _, srv := range []string{"pb", "pg"} {
		if got := pending(h.acmeAdmin, srv); len(got) != 0 {
			t.Fatalf("acme admin's pending of %s = %v", srv, got)
		}
	}
	for _, c := range []catalogv1.CatalogServiceClient{h.acmeUser, h.user, h.svc} {
		if _, err := c.ListPendingTools(ctx, &catalogv1.ListPendingToolsRequest{}); codeOf(err) != codes.PermissionDenied {
			t.Fatalf("ListPendingTools as a non-admin: %v", err)
		}
		if _, err := c.ApproveTool(ctx, &catalogv1.ApproveToolRequest{Name: "fetch", DefinitionHash: mine["pa/fetch"].GetTool().GetDefinitionHash()}); codeOf(err) != codes.PermissionDenied {
			t.Fatalf("ApproveTool as a non-admin: %v", err)
		}
	}
	// Hostile: acme's admin names beta's and the global server's tools
	// with their exact hashes; the answer is that of a name nobody holds.
	_, unknownErr := h.acmeAdmin.ApproveTool(ctx, &catalogv1.ApproveToolRequest{Name: "no_such_tool", DefinitionHash: all["pg/global_tool"].GetTool().GetDefinitionHash()})
	if codeOf(unknownErr) != codes.NotFound {
		t.Fatalf("approving an unknown tool: %v", unknownErr)
	}
	for _, k := range []string{"pb/beta_tool", "pg/global_tool"} {
		tl := all[k].GetTool()
		for _, op := range []func() error{
			func() error {
				_, err := h.acmeAdmin.ApproveTool(ctx, &catalogv1.ApproveToolRequest{Name: tl.GetName(), DefinitionHash: tl.GetDefinitionHash()})
				return err
			},
			func() error {
				_, err := h.acmeAdmin.RejectTool(ctx, &catalogv1.RejectToolRequest{Name: tl.GetName(), DefinitionHash: tl.GetDefinitionHash()})
				return err
			},
		} {
			err := op()
			if codeOf(err) != codes.NotFound || reasonOf(err) != reasonOf(unknownErr) ||
				strings.ReplaceAll(err.Error(), tl.GetName(), "X") != strings.ReplaceAll(unknownErr.Error(), "no_such_tool", "X") {
				t.Fatalf("acme admin reviewing %s: %v; want the unknown-name answer (%v)", k, err, unknownErr)
			}
		}
	}
	// acme's admin reviews beta's `fetch` by its own name: it resolves in
	// acme's namespace to acme's tool, whose hash differs: refused.
	if _, err := h.acmeAdmin.ApproveTool(ctx, &catalogv1.ApproveToolRequest{Name: "fetch", DefinitionHash: all["pb/fetch"].GetTool().GetDefinitionHash()}); codeOf(err) != codes.FailedPrecondition ||
		strings.Contains(err.Error(), all["pb/fetch"].GetTool().GetDescription()) {
		t.Fatalf("acme admin approving beta's fetch hash: %v", err)
	}
	if p := pending(h.admin, "pb"); len(p) != 2 {
		t.Fatalf("beta's tools changed by acme's admin: %v", p)
	}
	// acme's admin approves its own tool: ACTIVE for acme, audit names it.
	ar, err := h.acmeAdmin.ApproveTool(ctx, &catalogv1.ApproveToolRequest{Name: "fetch", DefinitionHash: mine["pa/fetch"].GetTool().GetDefinitionHash()})
	if err != nil || ar.GetAudit().GetActor() != "acme/ann" || ar.GetAudit().GetTool().GetServer() != "pa" || ar.GetTool().GetState() != catalogv1.ToolState_TOOL_STATE_ACTIVE {
		t.Fatalf("acme admin's approval = %v, %v", ar, err)
	}
	if res, err := h.call(forTenant(ctx, "acme"), h.svc, "fetch", `{}`); err != nil || textOf(res) != "fetch: acme fetch" {
		t.Fatalf("acme's fetch after approval = %q, %v", textOf(res), err)
	}
	if _, err := h.call(forTenant(ctx, "beta"), h.svc, "fetch", `{}`); codeOf(err) != codes.FailedPrecondition {
		t.Fatalf("beta's fetch after acme's approval: %v; want still held", err)
	}
	// beta's admin rejects its own: audit names bob.
	rr, err := h.betaAdmin.RejectTool(ctx, &catalogv1.RejectToolRequest{Name: "beta_tool", DefinitionHash: all["pb/beta_tool"].GetTool().GetDefinitionHash()})
	if err != nil || rr.GetAudit().GetActor() != "beta/bob" || rr.GetAudit().GetAction() != "reject" {
		t.Fatalf("beta admin's rejection = %v, %v", rr, err)
	}
	// For a caller of every tenant `fetch` (ACTIVE in acme, held in beta)
	// names no one tool.
	if _, err := h.admin.GetTool(ctx, &catalogv1.GetToolRequest{Name: "fetch"}); codeOf(err) != codes.NotFound || !strings.Contains(err.Error(), "several tenants") {
		t.Fatalf("GetTool fetch as the global admin: %v", err)
	}
	// The global admin: `fetch` is held by pb only now (pa's is ACTIVE),
	// but a name several tenants hold is settled by the hash.
	gr, err := h.admin.ApproveTool(ctx, &catalogv1.ApproveToolRequest{Name: "fetch", DefinitionHash: all["pb/fetch"].GetTool().GetDefinitionHash()})
	if err != nil || gr.GetAudit().GetTool().GetServer() != "pb" || gr.GetAudit().GetActor() != "default/root" {
		t.Fatalf("global admin's approval of beta's fetch = %v, %v", gr, err)
	}
	if res, err := h.call(forTenant(ctx, "beta"), h.svc, "fetch", `{}`); err != nil || textOf(res) != "fetch: beta fetch" {
		t.Fatalf("beta's fetch after approval = %q, %v", textOf(res), err)
	}
	b, _ := json.Marshal(pending(h.acmeAdmin, ""))
	if len(pending(h.acmeAdmin, "")) != 0 {
		t.Fatalf("acme admin's pending after its approval = %s", b)
	}
}

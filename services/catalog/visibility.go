package catalog

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/auth"
)

// viewer is whom a catalog read or call is for: tenant-scoped servers (a
// server's `tenants`) and their tools exist only for principals of those
// tenants (docs/decisions/0105-tenant-scoped-servers.md).
type viewer struct {
	// all: a service credential acting for nobody (the runtime's catalog
	// cache, which filters per principal itself) or a global admin.
	all bool
	// tenant is the effective principal's tenant otherwise.
	tenant string
	// owned restricts server configurations to those owned by tenant (a
	// tenant admin reading servers, servers.go).
	owned bool
}

// viewerOf derives the viewer from the authenticated caller. A service
// credential acting for a user sees what that user's tenant sees. A
// context without a caller (never past the interceptor) sees only servers
// of every tenant: fail closed.
func viewerOf(ctx context.Context) viewer {
	id, ok := auth.Caller(ctx)
	if !ok {
		return viewer{}
	}
	if id.ActingFor != nil {
		return viewer{tenant: auth.TenantOf(id.ActingFor)}
	}
	if id.Kind == auth.KindService || (id.Admin() && id.GlobalAdmin) {
		return viewer{all: true}
	}
	return viewer{tenant: auth.TenantOf(id.Principal)}
}

// sees reports whether the viewer sees a server (or tool) listing tenants.
// An empty tenant (no caller) matches no list: catalogconfig refuses "".
func (v viewer) sees(tenants []string) bool {
	return v.all || len(tenants) == 0 || (v.tenant != "" && slices.Contains(tenants, v.tenant))
}

// seesEntry reports whether the viewer sees a tool of the snapshot.
func (v viewer) seesEntry(e *entry) bool { return v.sees(e.tool.Tenants) }

// seesServer reports whether the viewer sees the configured or origin
// server name (false for a server the snapshot does not know: a retained
// holder whose server is gone is named only to viewers who see everything).
func (v viewer) seesServer(snap *snapshot, server string) bool {
	if v.all {
		return true
	}
	ts, ok := snap.serverTenants[server]
	return ok && v.sees(ts)
}

// tool returns e's full message as the viewer may see it: the pair holding
// its plain name is removed when the viewer cannot see that pair's server.
func (v viewer) tool(snap *snapshot, e *entry) *catalogv1.Tool {
	t := e.full()
	if h := t.GetNameHeldBy(); h != nil && !v.seesServer(snap, h.GetServer()) {
		t = proto.Clone(t).(*catalogv1.Tool)
		t.NameHeldBy = nil
	}
	return t
}

// collisions filters the collision reports of a server for the viewer: the
// holder of a report is removed when the viewer cannot see its server.
func (v viewer) collisions(snap *snapshot, in []*catalogv1.NameCollision) []*catalogv1.NameCollision {
	if v.all || len(in) == 0 {
		return in
	}
	out := make([]*catalogv1.NameCollision, len(in))
	for i, c := range in {
		if c.GetHolder() != nil && !v.seesServer(snap, c.GetHolder().GetServer()) {
			c = proto.Clone(c).(*catalogv1.NameCollision)
			c.Holder = nil
		}
		out[i] = c
	}
	return out
}

// lookup returns the ACTIVE tool the viewer may use under name, resolved
// in its namespace (nameIndex.get).
func (snap *snapshot) lookup(v viewer, name string) (*entry, bool) {
	return snap.active.get(v, name)
}

// lookupHeld returns the held (not ACTIVE) tool the viewer may see under name.
func (snap *snapshot) lookupHeld(v viewer, name string) (*entry, bool) {
	return snap.heldIdx.get(v, name)
}

// visible returns the ACTIVE tools the viewer sees, in sorted order.
func (snap *snapshot) visible(v viewer) []*entry {
	if v.all || !snap.scoped {
		return snap.sorted
	}
	out := make([]*entry, 0, len(snap.sorted))
	for _, e := range snap.sorted {
		if v.seesEntry(e) {
			out = append(out, e)
		}
	}
	return out
}

// visibleNames returns the exposed names of every ACTIVE tool the viewer
// sees (distinct for a tenant's viewer; a viewer that sees every tenant
// gets a name several tenants hold once per tool).
func (snap *snapshot) visibleNames(v viewer) []string {
	vis := snap.visible(v)
	out := make([]string, len(vis))
	for i, e := range vis {
		out[i] = e.tool.Name
	}
	return out
}

// viewerHash is the catalog hash of everything the viewer sees.
func (snap *snapshot) viewerHash(v viewer) string {
	if v.all || !snap.scoped {
		return snap.hash
	}
	h, _, _, _ := snap.subsetHash(v, snap.visibleNames(v))
	return h
}

// event filters a catalog change for the viewer: tools are kept when the
// viewer sees them in its namespace (by name and scope, so a change of a
// tool of another tenant holding the same name does not show), servers
// when it sees them; definition hashes are those of the kept tools. An
// event left with nothing is still sent: it carries the catalog hash.
func (v viewer) event(c *catalogChange) *catalogv1.CatalogEvent {
	ev, snap := c.ev, c.snap
	if v.all {
		return ev
	}
	out := proto.Clone(ev).(*catalogv1.CatalogEvent)
	tools := func(in, scopes []string) []string {
		var r []string
		for i, n := range in {
			k := nsKey{scopes[i], n}
			e, ok := snap.active.exact(k)
			if !ok {
				e, ok = snap.heldIdx.exact(k)
			}
			if ok && v.seesEntry(e) {
				r = append(r, n)
			} else if !ok && snap.removedVisible(v, k) {
				r = append(r, n)
			}
		}
		return r
	}
	servers := func(in []string) []string {
		var r []string
		for _, n := range in {
			if v.seesServer(snap, n) || snap.removedServerVisible(v, n) {
				r = append(r, n)
			}
		}
		return r
	}
	out.ToolsAdded, out.ToolsChanged, out.ToolsStateChanged = tools(ev.ToolsAdded, c.added), tools(ev.ToolsChanged, c.changed), tools(ev.ToolsStateChanged, c.state)
	out.ToolsRemoved = tools(ev.ToolsRemoved, c.removed)
	out.ServersAdded, out.ServersChanged, out.ServersRemoved = servers(ev.ServersAdded), servers(ev.ServersChanged), servers(ev.ServersRemoved)
	out.DefinitionHashes = map[string]string{}
	for _, n := range append(slices.Clone(out.ToolsAdded), out.ToolsChanged...) {
		if e, ok := snap.active.get(v, n); ok {
			out.DefinitionHashes[n] = e.tool.DefinitionHash
		}
	}
	out.NameCollisions = nil
	for _, c := range v.collisions(snap, ev.NameCollisions) {
		if v.seesServer(snap, c.GetTool().GetServer()) {
			out.NameCollisions = append(out.NameCollisions, c)
		}
	}
	out.Renames = nil
	for _, r := range ev.Renames {
		if v.seesServer(snap, r.GetTool().GetServer()) {
			out.Renames = append(out.Renames, r)
		}
	}
	out.CatalogHash = snap.viewerHash(v)
	return out
}

// removedVisible reports whether a tool removed by the change that made
// snap was visible to the viewer (its tenants are kept for one snapshot).
func (snap *snapshot) removedVisible(v viewer, k nsKey) bool {
	ts, ok := snap.removedTenants[k]
	return ok && v.sees(ts)
}

// removedServerVisible is removedVisible for a removed server.
func (snap *snapshot) removedServerVisible(v viewer, name string) bool {
	ts, ok := snap.removedServerTenants[name]
	return ok && v.sees(ts)
}

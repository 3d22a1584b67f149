package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
)

// serverList lists the servers the viewer sees (visibility.go); a tenant
// admin's viewer (owned) sees only the servers its tenant owns.
func (s *Server) serverList(v viewer) []*catalogv1.Server {
	scoped := map[string]int{}
	for _, k := range s.mgr.Pool().Keys() {
		scoped[k.Server]++
	}
	snap := s.snap.Load()
	sts := s.publishedStatuses(snap)
	out := make([]*catalogv1.Server, 0, len(sts))
	for _, st := range sts {
		if !v.sees(st.Config.Tenants) || (v.owned && !st.Config.OwnedBy(v.tenant)) {
			continue
		}
		sv := serverProto(st, scoped[st.Name])
		sv.NameCollisions = v.collisions(snap, snap.collisions[st.Name])
		sv.OmittedTools = snap.omitted[st.Name]
		sv.Pinned, _ = s.pinnedServer(&st.Config)
		out = append(out, sv)
	}
	return out
}

// serverReader checks the caller of ListServers and GetServer: a service
// credential or an admin. A tenant admin reads only the servers its tenant
// owns (`tenants` exactly its tenant): the configurations of global and
// shared servers are not its to see (docs/decisions/0105).
func serverReader(ctx context.Context) (viewer, error) {
	id, ok := auth.Caller(ctx)
	if !ok || !(id.Service() || id.Admin()) {
		return viewer{}, auth.Error(codes.PermissionDenied, auth.ReasonServiceRequired, "reading MCP server configurations needs a service or admin credential")
	}
	if t, ok := id.TenantAdmin(); ok {
		return viewer{tenant: t, owned: true}, nil
	}
	return viewerOf(ctx), nil
}

func (s *Server) serverByName(v viewer, name string) (*catalogv1.Server, error) {
	for _, sv := range s.serverList(v) {
		if sv.GetConfig().GetName() == name {
			return sv, nil
		}
	}
	return nil, serverNotFound(name)
}

// ListServers lists the servers the caller sees in config-file order,
// secrets masked.
func (s *Server) ListServers(ctx context.Context, _ *catalogv1.ListServersRequest) (*catalogv1.ListServersResponse, error) {
	v, err := serverReader(ctx)
	if err != nil {
		return nil, err
	}
	return &catalogv1.ListServersResponse{Servers: s.serverList(v)}, nil
}

// GetServer returns one server, secrets masked; a server of other tenants
// is NOT_FOUND.
func (s *Server) GetServer(ctx context.Context, req *catalogv1.GetServerRequest) (*catalogv1.GetServerResponse, error) {
	v, err := serverReader(ctx)
	if err != nil {
		return nil, err
	}
	sv, err := s.serverByName(v, req.GetName())
	if err != nil {
		return nil, err
	}
	return &catalogv1.GetServerResponse{Server: sv}, nil
}

// UpdateServer enables or disables one server, persisting the change to
// extensions_config.json atomically (placeholders and unknown keys kept),
// or on PostgreSQL to the stored server rows (configdb.go).
//
// A tenant admin changes only servers whose `tenants` is exactly its
// tenant; any other server is NOT_FOUND to it, as in its ListServers
// (docs/decisions/0105-tenant-scoped-servers.md).
func (s *Server) UpdateServer(ctx context.Context, req *catalogv1.UpdateServerRequest) (*catalogv1.UpdateServerResponse, error) {
	w := writerOf(ctx)
	if err := w.allowed(); err != nil {
		return nil, err
	}
	err := s.editServers(ctx, func(f *catalogconfig.File) error {
		i := slices.IndexFunc(f.Servers, func(x catalogconfig.Server) bool { return x.Name == req.GetName() })
		if i < 0 || (w.tenantAdmin && !f.Servers[i].OwnedBy(w.tenant)) {
			// A tenant admin's view holds only its tenant's servers.
			return serverNotFound(req.GetName())
		}
		if err := w.mayChange(&f.Servers[i]); err != nil {
			return err
		}
		if e := req.GetServer().Enabled; e != nil {
			f.Servers[i].SetEnabled(*e) // keeps Claude Desktop's `disabled` spelling
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sv, err := s.serverByName(w.viewer(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &catalogv1.UpdateServerResponse{Server: sv}, nil
}

// validServerName is the rule for server names written through the API.
func validServerName(n string) bool { return catalognames.Valid.MatchString(n) }

// ReplaceServers replaces the whole server list: every entry is validated
// (structure, then the stdio command policy), "***" keeps the stored secret
// of the same server and key, unknown per-server keys of a stored server of
// the same name are kept, then the file is written atomically (temp +
// fsync + rename) keeping every other top-level key, and applied. On
// PostgreSQL the stored server rows are written instead, in one transaction,
// and every replica applies them within 2 s (configdb.go).
//
// A tenant admin replaces only its tenant's servers (those whose `tenants`
// is exactly its tenant): every entry it sends must say so, the servers of
// every other scope are kept as they are, and its new servers follow them
// in the file (docs/decisions/0105-tenant-scoped-servers.md).
func (s *Server) ReplaceServers(ctx context.Context, req *catalogv1.ReplaceServersRequest) (*catalogv1.ReplaceServersResponse, error) {
	w := writerOf(ctx)
	if err := w.allowed(); err != nil {
		return nil, err
	}
	if err := s.checkTenantServerCount(w, len(req.GetServers())); err != nil {
		return nil, err
	}
	err := s.editServers(ctx, func(f *catalogconfig.File) error {
		next, err := s.buildServers(w, req.GetServers(), f)
		if err != nil {
			return err
		}
		if w.tenantAdmin {
			var kept []catalogconfig.Server
			for _, srv := range f.Servers {
				if !srv.OwnedBy(w.tenant) {
					kept = append(kept, srv)
				}
			}
			next = append(kept, next...)
		}
		f.Servers = next
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &catalogv1.ReplaceServersResponse{Servers: s.serverList(w.viewer())}, nil
}

func (s *Server) buildServers(w writer, in []*catalogv1.ServerConfig, cur *catalogconfig.File) ([]catalogconfig.Server, error) {
	stored := map[string]*catalogconfig.Server{}
	for i := range cur.Servers {
		stored[cur.Servers[i].Name] = &cur.Servers[i]
	}
	seen := map[string]bool{}
	out := make([]catalogconfig.Server, 0, len(in))
	for i, c := range in {
		if !validServerName(c.GetName()) {
			return nil, invalidConfig(fmt.Errorf("servers[%d].name: %q must match ^[A-Za-z0-9_-]{1,64}$", i, c.GetName()))
		}
		if seen[c.GetName()] {
			return nil, invalidConfig(fmt.Errorf("servers[%d].name: duplicate server %q", i, c.GetName()))
		}
		seen[c.GetName()] = true
		prev := stored[c.GetName()]
		if w.tenantAdmin && prev != nil && !prev.OwnedBy(w.tenant) {
			// The name belongs to a server of another scope: not replaceable,
			// and not named further (it may be another tenant's).
			return nil, invalidConfig(fmt.Errorf("servers[%d].name: %q is taken by a server outside tenant %q", i, c.GetName(), w.tenant))
		}
		srv, err := configFromProto(c, prev)
		if err != nil {
			return nil, invalidServerConfig(i, err)
		}
		if err := w.keepsSecretsWithHost(i, &srv, prev); err != nil {
			return nil, err
		}
		if srv, err = catalogconfig.MergeMasked(srv, prev); err != nil {
			return nil, invalidServerConfig(i, err)
		}
		if err := srv.Validate(); err != nil {
			return nil, invalidServerConfig(i, err)
		}
		if err := w.checkServer(i, &srv, prev); err != nil {
			return nil, err
		}
		if err := catalogconfig.ValidateCommand(&srv, s.cfg.StdioAllowlist); err != nil {
			return nil, invalidServerConfig(i, err)
		}
		if err := s.checkEgress(&srv); err != nil {
			return nil, invalidServerConfig(i, err)
		}
		if err := s.checkStaticPath(&srv, prev); err != nil {
			return nil, invalidServerConfig(i, err)
		}
		out = append(out, srv)
	}
	return out, nil
}

// ReloadServers re-reads extensions_config.json and applies it; servers
// whose configuration did not change keep their sessions.
//
// On PostgreSQL (configdb.go) the replica importing the file imports it
// at once, every entry of it; every replica then applies the stored
// configuration.
func (s *Server) ReloadServers(ctx context.Context, _ *catalogv1.ReloadServersRequest) (*catalogv1.ReloadServersResponse, error) {
	var restarted, unchanged []string
	var err error
	if s.db != nil {
		restarted, unchanged, err = s.reloadDB(ctx)
	} else {
		restarted, unchanged, err = s.reload(true)
	}
	if err != nil {
		return nil, configUnavailable(codes.FailedPrecondition, err)
	}
	return &catalogv1.ReloadServersResponse{Servers: s.serverList(viewer{all: true}), Restarted: restarted, Unchanged: unchanged}, nil
}

// checkEgress refuses an sse/http server written through the API whose URL
// the egress policy denies (after DNS resolution; a URL with ${VAR}
// placeholders is checked at dial time only). The dial-time and redirect
// checks apply to every sse/http server (catalog.egress).
func (s *Server) checkEgress(srv *catalogconfig.Server) error {
	t := srv.EffectiveType()
	if t != catalogconfig.TypeHTTP && t != catalogconfig.TypeSSE {
		return nil
	}
	u := srv.EffectiveURL()
	if strings.Contains(u, "${") {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Egress.DialTimeout)
	defer cancel()
	if err := s.cfg.Egress.policy().CheckURL(ctx, u); err != nil {
		return fmt.Errorf("mcpServers.%s.url: %w", srv.Name, err)
	}
	return nil
}

// publishedStatuses is the manager's live statuses, except that a server is
// READY only once the served snapshot holds the tools of that READY state:
// between a session's tools/list and the rebuild that publishes it, the
// server is still CONNECTING. So ListServers, GetServer and /readyz never
// report READY while GetTool, SearchTools or CallTool would still answer
// "unknown tool" for the tools it just listed.
func (s *Server) publishedStatuses(snap *snapshot) []catalogmcp.Status {
	sts := s.mgr.Statuses()
	if snap == nil {
		return sts
	}
	pub := make(map[string]*catalogmcp.Status, len(snap.statuses))
	for i := range snap.statuses {
		pub[snap.statuses[i].Name] = &snap.statuses[i]
	}
	for i := range sts {
		if sts[i].State != catalogmcp.StateReady {
			continue
		}
		if p := pub[sts[i].Name]; p == nil || p.State != catalogmcp.StateReady || p.ChangedAt.Before(sts[i].ChangedAt) {
			sts[i].State = catalogmcp.StateConnecting
		}
	}
	return sts
}

package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
)

func (s *Server) serverList() []*catalogv1.Server {
	scoped := map[string]int{}
	for _, k := range s.mgr.Pool().Keys() {
		scoped[k.Server]++
	}
	sts := s.mgr.Statuses()
	snap := s.snap.Load()
	out := make([]*catalogv1.Server, len(sts))
	for i, st := range sts {
		out[i] = serverProto(st, scoped[st.Name])
		out[i].NameCollisions = snap.collisions[st.Name]
		out[i].OmittedTools = snap.omitted[st.Name]
		out[i].Pinned, _ = s.pinnedServer(&st.Config)
	}
	return out
}

func (s *Server) serverByName(name string) (*catalogv1.Server, error) {
	for _, sv := range s.serverList() {
		if sv.GetConfig().GetName() == name {
			return sv, nil
		}
	}
	return nil, serverNotFound(name)
}

// ListServers lists servers in config-file order, secrets masked.
func (s *Server) ListServers(context.Context, *catalogv1.ListServersRequest) (*catalogv1.ListServersResponse, error) {
	return &catalogv1.ListServersResponse{Servers: s.serverList()}, nil
}

// GetServer returns one server, secrets masked.
func (s *Server) GetServer(_ context.Context, req *catalogv1.GetServerRequest) (*catalogv1.GetServerResponse, error) {
	sv, err := s.serverByName(req.GetName())
	if err != nil {
		return nil, err
	}
	return &catalogv1.GetServerResponse{Server: sv}, nil
}

// UpdateServer enables or disables one server, persisting the change to
// extensions_config.json atomically (placeholders and unknown keys kept).
func (s *Server) UpdateServer(_ context.Context, req *catalogv1.UpdateServerRequest) (*catalogv1.UpdateServerResponse, error) {
	s.writeMu.Lock()
	f, err := s.loadLocked()
	if err != nil {
		s.writeMu.Unlock()
		return nil, configUnavailable(codes.FailedPrecondition, err)
	}
	i := slices.IndexFunc(f.Servers, func(x catalogconfig.Server) bool { return x.Name == req.GetName() })
	if i < 0 {
		s.writeMu.Unlock()
		return nil, serverNotFound(req.GetName())
	}
	if e := req.GetServer().Enabled; e != nil {
		f.Servers[i].SetEnabled(*e) // keeps Claude Desktop's `disabled` spelling
	}
	err = s.writeFileLocked(f)
	s.writeMu.Unlock()
	if err != nil {
		return nil, configUnavailable(codes.Internal, err)
	}
	sv, err := s.serverByName(req.GetName())
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
// fsync + rename) keeping every other top-level key, and applied.
func (s *Server) ReplaceServers(_ context.Context, req *catalogv1.ReplaceServersRequest) (*catalogv1.ReplaceServersResponse, error) {
	s.writeMu.Lock()
	f, err := s.loadLocked()
	if err != nil {
		s.writeMu.Unlock()
		return nil, configUnavailable(codes.FailedPrecondition, err)
	}
	next, err := s.buildServers(req.GetServers(), f)
	if err != nil {
		s.writeMu.Unlock()
		return nil, err
	}
	f.Servers = next
	err = s.writeFileLocked(f)
	s.writeMu.Unlock()
	if err != nil {
		return nil, configUnavailable(codes.Internal, err)
	}
	return &catalogv1.ReplaceServersResponse{Servers: s.serverList()}, nil
}

func (s *Server) buildServers(in []*catalogv1.ServerConfig, cur *catalogconfig.File) ([]catalogconfig.Server, error) {
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
		srv, err := configFromProto(c, prev)
		if err != nil {
			return nil, invalidServerConfig(i, err)
		}
		if srv, err = catalogconfig.MergeMasked(srv, prev); err != nil {
			return nil, invalidServerConfig(i, err)
		}
		if err := srv.Validate(); err != nil {
			return nil, invalidServerConfig(i, err)
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
func (s *Server) ReloadServers(context.Context, *catalogv1.ReloadServersRequest) (*catalogv1.ReloadServersResponse, error) {
	restarted, unchanged, err := s.reload(true)
	if err != nil {
		return nil, configUnavailable(codes.FailedPrecondition, err)
	}
	return &catalogv1.ReloadServersResponse{Servers: s.serverList(), Restarted: restarted, Unchanged: unchanged}, nil
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

package catalog

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// scopeDirCwd reports whether cwd is the session's scope directory or a
// directory below it (no ".." element).
func scopeDirCwd(cwd string) bool {
	for _, p := range []string{"${" + catalogconfig.ScopeDirVar + "}", "$" + catalogconfig.ScopeDirVar} {
		if rest, ok := strings.CutPrefix(cwd, p); ok && (rest == "" || rest[0] == '/') {
			return !slices.Contains(strings.Split(rest, "/"), "..") && !strings.Contains(rest, "$")
		}
	}
	return false
}

// writer is who changes MCP server configurations: a global admin (any
// server) or a tenant admin, confined to the servers whose `tenants` is
// exactly its tenant (docs/decisions/0105-tenant-scoped-servers.md).
type writer struct {
	tenantAdmin bool
	tenant      string
	// denied is set for a caller that is neither (e.g. a service credential
	// with the admin role outside auth.global_admin_tenants).
	denied bool
}

// writerOf classifies the caller of a server write (the RPC class already
// required the admin role).
func writerOf(ctx context.Context) writer {
	id, ok := auth.Caller(ctx)
	switch {
	case !ok:
		return writer{denied: true}
	case id.Admin() && id.GlobalAdmin:
		return writer{}
	}
	if t, ok := id.TenantAdmin(); ok {
		return writer{tenantAdmin: true, tenant: t}
	}
	return writer{denied: true}
}

// viewer is what the writer sees of the catalog.
func (w writer) viewer() viewer {
	if w.tenantAdmin {
		return viewer{tenant: w.tenant, owned: true}
	}
	if w.denied {
		return viewer{}
	}
	return viewer{all: true}
}

func (w writer) refuse(format string, args ...any) error {
	return auth.Error(codes.PermissionDenied, auth.ReasonAdminRequired, fmt.Sprintf(format, args...))
}

// allowed is PERMISSION_DENIED for a caller that may not write servers at all.
func (w writer) allowed() error {
	if w.denied {
		return w.refuse("changing MCP servers needs a global admin or a tenant admin (a user credential with the admin role)")
	}
	return nil
}

// mayChange reports whether the writer may change the stored server srv.
func (w writer) mayChange(srv *catalogconfig.Server) error {
	if err := w.allowed(); err != nil {
		return err
	}
	if w.tenantAdmin && !srv.OwnedBy(w.tenant) {
		return w.refuse("server %q is shared beyond tenant %q: only a global admin changes it", srv.Name, w.tenant)
	}
	return nil
}

// checkServer applies the rules of a tenant admin's servers to servers[i]
// (after the secrets and unknown keys of the stored entry prev, or nil,
// were merged back): its tenants are exactly the admin's tenant; it is a
// remote server (sse / http, under the egress policy): a stdio server runs
// on the suite's host with its rights, so no command is a tenant admin's
// to choose (docs/decisions/0136-tenant-admins-write-remote-servers-only.md);
// a stdio server is accepted only unchanged from its stored entry; it
// reads nothing of the host: no `$VAR` / `${VAR}` reference (they expand
// from the suite's environment), the `oauth` block included, no `cwd`, no
// static `path`; and it does not move a stored `oauth` block to another
// url or type (docs/decisions/0137-oauth-stays-with-its-host.md). The
// command policy and the egress check apply to every writer (buildServers).
func (w writer) checkServer(i int, srv, prev *catalogconfig.Server) error {
	if err := w.allowed(); err != nil {
		return err
	}
	if !w.tenantAdmin {
		return nil
	}
	f := fmt.Sprintf("servers[%d]", i)
	if !srv.OwnedBy(w.tenant) {
		return w.refuse("%s.tenants: a tenant admin writes servers of its own tenant only: set tenants to [%q]", f, w.tenant)
	}
	if srv.EffectiveType() == catalogconfig.TypeStdio && (prev == nil || !sameAsStored(srv, prev)) {
		// A stdio server a global admin gave the tenant may be kept as
		// stored (so a replace can keep it next to new remote servers),
		// never changed or added.
		return w.refuse("%s.type: a tenant admin writes remote servers only (SERVER_TYPE_HTTP or SERVER_TYPE_SSE): a stdio server runs a command on the suite's host, which only a global admin configures", f)
	}
	if prev != nil && hasOAuthBlock(prev) &&
		(prev.EffectiveType() != srv.EffectiveType() || prev.EffectiveURL() != srv.EffectiveURL()) {
		return w.refuse("%s.url: server %q has an oauth block set by a global admin; its credentials stay with the url and type they were configured for: a tenant admin may not change them (remove the server and add a new one, or ask a global admin)", f, srv.Name)
	}
	if field, v, ok := catalogconfig.Reference(*srv); ok {
		if v == "" {
			return w.refuse("%s.%s: variable expansion is not available to servers written by a tenant admin", f, field)
		}
		return w.refuse("%s.%s: references environment variable %s; variable expansion is not available to servers written by a tenant admin", f, field, v)
	}
	if srv.Cwd != "" && !scopeDirCwd(srv.Cwd) {
		return w.refuse("%s.cwd: a tenant admin's server runs in the default working directory or under ${%s}", f, catalogconfig.ScopeDirVar)
	}
	if srv.EffectiveType() == catalogconfig.TypeStatic || srv.Path != "" {
		return w.refuse("%s.path: static servers read files of the host; only a global admin adds them", f)
	}
	if srv.WorkingDir != "" {
		// Like cwd: where a child runs on the host is a global admin's
		// choice (docs/decisions/0159-path-translation-details.md).
		return w.refuse("%s.working_dir: only a global admin runs servers in thread workspaces", f)
	}
	return nil
}

// keepsSecretsWithHost refuses a tenant admin's write that keeps a stored
// secret ("***" for a header or env value) while changing the server's url
// or type: the stored value (perhaps a global admin's, which the tenant
// admin never saw) would be sent to the new host. The rule of the oauth
// block (docs/decisions/0137-oauth-stays-with-its-host.md) for every stored
// secret; a tenant admin moving its server sends the values again.
func (w writer) keepsSecretsWithHost(i int, srv, prev *catalogconfig.Server) error {
	if !w.tenantAdmin || prev == nil ||
		(prev.EffectiveType() == srv.EffectiveType() && prev.EffectiveURL() == srv.EffectiveURL()) {
		return nil
	}
	for _, kv := range []struct {
		field string
		m     map[string]string
	}{{"headers", srv.Headers}, {"env", srv.Env}} {
		keys := make([]string, 0, len(kv.m))
		for k, v := range kv.m {
			if v == catalogconfig.Mask {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			sort.Strings(keys)
			return w.refuse("servers[%d].%s.%s: %q keeps a stored secret, which stays with the url and type it was configured for: send the value again to move server %q to another url or type", i, kv.field, keys[0], catalogconfig.Mask, srv.Name)
		}
	}
	return nil
}

// hasOAuthBlock reports whether srv carries an `oauth` key (kept in Extra,
// which the API can neither show nor set), enabled or not.
func hasOAuthBlock(srv *catalogconfig.Server) bool {
	for _, f := range srv.Extra {
		if f.Key == "oauth" {
			return string(bytes.TrimSpace(f.Value)) != "null"
		}
	}
	return false
}

// sameAsStored reports whether the written srv says what the stored prev
// says, compared in the API's form (the form the writer read it in: the
// explicit type and enabled flag of the proto do not count as a change).
// Every key that decides what runs (command, args, env, cwd, working_dir)
// is part of that form; the unknown keys are prev's own (configFromProto).
func sameAsStored(srv, prev *catalogconfig.Server) bool {
	return prev.EffectiveType() == srv.EffectiveType() && proto.Equal(configProto(*srv), configProto(*prev))
}

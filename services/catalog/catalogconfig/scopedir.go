package catalogconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ScopeDirVar is the variable a stdio server's args, env values and cwd may
// reference to get a directory of its session's scope (docs/architecture.md
// §10.3): one per tenant (per_tenant), per (tenant, user) (per_user) or per
// (tenant, user, thread) (per_thread) under the suite's data dir, created
// 0700, so a stateful server writes per-scope files. For a shared server,
// and for the catalog's own discovery session of a scoped server, it is a
// directory of that server alone.
const ScopeDirVar = "TOOLPLANE_SCOPE_DIR"

// scopeDirPlaceholder stands for the scope directory in an expanded
// configuration until a session is dialled for a known scope (BindScopeDir).
// The NUL bytes keep it from ever being a real path or a configured value.
const scopeDirPlaceholder = "\x00toolplane-scope-dir\x00"

// LookupWithScopeDir wraps lookup so ScopeDirVar expands to a placeholder
// that BindScopeDir later replaces; every other name goes to lookup.
func LookupWithScopeDir(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if k == ScopeDirVar {
			return scopeDirPlaceholder, true
		}
		return lookup(k)
	}
}

// referencesScopeDir reports whether v refers to ScopeDirVar in any form.
func referencesScopeDir(v string) bool {
	return strings.Contains(v, "$") && strings.Contains(v, ScopeDirVar)
}

// validateScopeDir refuses ScopeDirVar outside a stdio server's args, env
// values and cwd: a scope directory means nothing to a URL, a header, a
// static file or the executable to start.
func (s *Server) validateScopeDir(p string) error {
	bad := func(field string) error {
		return fmt.Errorf("%s.%s: ${%s} is expanded only in args, env and cwd of a stdio server", p, field, ScopeDirVar)
	}
	if referencesScopeDir(s.Command) {
		return bad("command")
	}
	for _, f := range []struct{ name, v string }{{"url", s.URL}, {"serverUrl", s.ServerURL}, {"path", s.Path}} {
		if referencesScopeDir(f.v) {
			return bad(f.name)
		}
	}
	for k, v := range s.Headers {
		if referencesScopeDir(v) {
			return bad("headers." + k)
		}
	}
	if s.EffectiveType() == TypeStdio {
		return s.validateScopeDirDots(p)
	}
	for i, a := range s.Args {
		if referencesScopeDir(a) {
			return bad(fmt.Sprintf("args[%d]", i))
		}
	}
	for k, v := range s.Env {
		if referencesScopeDir(v) {
			return bad("env." + k)
		}
	}
	if referencesScopeDir(s.Cwd) {
		return bad("cwd")
	}
	return nil
}

// validateScopeDirDots refuses a stdio server's args, env value or cwd that
// uses ${TOOLPLANE_SCOPE_DIR} and holds a `..` path segment anywhere in it:
// `${TOOLPLANE_SCOPE_DIR}/../..` names another scope's directory (another
// user's or tenant's files). It applies to every writer (the file, a global
// admin, a tenant admin) — docs/decisions/0136-tenant-admins-write-remote-servers-only.md.
func (s *Server) validateScopeDirDots(p string) error {
	bad := func(field string) error {
		return fmt.Errorf("%s.%s: a value using ${%s} may not contain a '..' path segment (it would leave the session's scope directory)", p, field, ScopeDirVar)
	}
	// With cwd in the scope directory, a relative `../..` in any arg or env
	// value resolves from there: the same escape without the placeholder.
	inScope := referencesScopeDir(s.Cwd)
	badRel := func(field string) error {
		return fmt.Errorf("%s.%s: the server runs in ${%s} (cwd), so a '..' path segment would leave the session's scope directory", p, field, ScopeDirVar)
	}
	for i, a := range s.Args {
		if HasDotDotSegment(a) {
			if referencesScopeDir(a) {
				return bad(fmt.Sprintf("args[%d]", i))
			}
			if inScope {
				return badRel(fmt.Sprintf("args[%d]", i))
			}
		}
	}
	for _, k := range sortedKeys(s.Env) {
		if HasDotDotSegment(s.Env[k]) {
			if referencesScopeDir(s.Env[k]) {
				return bad("env." + k)
			}
			if inScope {
				return badRel("env." + k)
			}
		}
	}
	if referencesScopeDir(s.Cwd) && HasDotDotSegment(s.Cwd) {
		return bad("cwd")
	}
	return nil
}

// HasDotDotSegment reports whether v holds `..` as a path segment: bounded
// on each side by the start or end of v or by one of / \ : ; , = { } - + ?
// and whitespace (so `--root=${TOOLPLANE_SCOPE_DIR}/..`, `a:../b` and
// `${TOOLPLANE_SCOPE_DIR:-..}` count; `file..txt` does not).
func HasDotDotSegment(v string) bool {
	sep := func(r rune) bool {
		switch r {
		case '/', '\\', ':', ';', ',', '=', ' ', '\t', '\n', '\r', '{', '}', '-', '+', '?':
			return true
		}
		return false
	}
	for _, f := range strings.FieldsFunc(v, sep) {
		if f == ".." {
			return true
		}
	}
	return false
}

// escapesScopeDir is the same rule on an expanded value: a value holding the
// scope directory placeholder with a `..` segment (a `${VAR}` of the
// environment may have supplied it) is refused before a session starts.
func escapesScopeDir(v string) bool {
	return strings.Contains(v, scopeDirPlaceholder) && HasDotDotSegment(strings.ReplaceAll(v, scopeDirPlaceholder, "/scope"))
}

// UsesScopeDir reports whether an expanded configuration references the
// scope directory (it must then be bound with BindScopeDir before it starts).
func UsesScopeDir(s Server) bool {
	if strings.Contains(s.Cwd, scopeDirPlaceholder) {
		return true
	}
	for _, a := range s.Args {
		if strings.Contains(a, scopeDirPlaceholder) {
			return true
		}
	}
	for _, v := range s.Env {
		if strings.Contains(v, scopeDirPlaceholder) {
			return true
		}
	}
	return false
}

// BindScopeDir returns a copy of the expanded s with the scope directory dir
// in place of every ScopeDirVar reference (args, env values, cwd).
func BindScopeDir(s Server, dir string) Server {
	if !UsesScopeDir(s) {
		return s
	}
	out := s.Clone()
	r := func(v string) string { return strings.ReplaceAll(v, scopeDirPlaceholder, dir) }
	for i := range out.Args {
		out.Args[i] = r(out.Args[i])
	}
	for k, v := range out.Env {
		out.Env[k] = r(v)
	}
	out.Cwd = r(out.Cwd)
	return out
}

// ScopeDir returns (and creates, mode 0700 at every level it creates, the
// leaf forced to 0700) the directory of one scope of server under root:
//
//	root/<server>/shared                          shared scope, discovery
//	root/<server>/tenant/t-<tenant>               per_tenant
//	root/<server>/user/t-<tenant>/u-<subject>     per_user
//	root/<server>/thread/t-<tenant>/u-<subject>/th-<thread>   per_thread
//
// Every name is encoded by pathSegment, so no tenant, subject or thread id
// (which may hold `/`, `..`, NUL or non-ASCII) can name a directory outside
// its own, and distinct ids never share one. An empty root is an error (the
// suite runs without a data dir).
func ScopeDir(root, server, scope, tenant, subject, thread string) (string, error) {
	if root == "" {
		return "", fmt.Errorf("${%s}: the suite has no data dir (server.data_dir) to hold scope directories", ScopeDirVar)
	}
	parts := []string{root, pathSegment("s-", server)}
	switch scope {
	case ScopePerTenant:
		parts = append(parts, "tenant", pathSegment("t-", tenant))
	case ScopePerUser:
		parts = append(parts, "user", pathSegment("t-", tenant), pathSegment("u-", subject))
	case ScopePerThread:
		parts = append(parts, "thread", pathSegment("t-", tenant), pathSegment("u-", subject), pathSegment("th-", thread))
	default:
		parts = append(parts, "shared")
	}
	dir := filepath.Join(parts...)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("${%s}: %w", ScopeDirVar, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", fmt.Errorf("${%s}: %w", ScopeDirVar, err)
	}
	return dir, nil
}

// pathSegment encodes id as one file name: prefix, then the id's bytes with
// everything but [A-Za-z0-9_-] written as %XX (so `.`, `/` and NUL never
// appear raw); an encoding longer than 200 bytes is replaced by "%h" and the
// SHA-256 of the id ("%h" is never produced by the encoding, so the two forms
// cannot meet). The prefix keeps the empty id a valid, distinct name.
func pathSegment(prefix, id string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	if b.Len() > 200 {
		sum := sha256.Sum256([]byte(id))
		return prefix + "%h" + hex.EncodeToString(sum[:])
	}
	return b.String()
}

package catalogconfig

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// MissingVarError reports an environment variable referenced by a server's
// configuration that is not set (or empty, for the `${VAR:?message}` form).
// Only that server fails. It names the variable, never any value.
type MissingVarError struct {
	// Server is the server name, Field the key path inside it, Var the variable.
	Server, Field, Var string
	// Empty reports a set but empty variable refused by `${VAR:?message}`.
	Empty bool
	// Message is the `message` of `${VAR:?message}` / `${VAR?message}` (text
	// from the configuration file, not from the environment).
	Message string
}

func (e *MissingVarError) Error() string {
	what := "is not set"
	if e.Empty {
		what = "is empty"
	}
	msg := ""
	if e.Message != "" {
		msg = ": " + e.Message
	}
	if e.Server == "" {
		return fmt.Sprintf("environment variable %s %s%s", e.Var, what, msg)
	}
	return fmt.Sprintf("mcpServers.%s.%s: environment variable %s %s%s", e.Server, e.Field, e.Var, what, msg)
}

// SyntaxError reports a `${...}` expansion Toolplane does not support (for
// example the assigning `${VAR:=word}` or the pattern forms `${VAR#x}`).
type SyntaxError struct {
	// Server, Field as in MissingVarError; Expr is the expression as written
	// (configuration text, never a value).
	Server, Field, Expr string
}

func (e *SyntaxError) Error() string {
	const forms = "supported: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:+alt}, ${VAR+alt}, ${VAR:?message}, ${VAR?message}"
	if e.Server == "" {
		return fmt.Sprintf("unsupported expansion %s (%s)", e.Expr, forms)
	}
	return fmt.Sprintf("mcpServers.%s.%s: unsupported expansion %s (%s)", e.Server, e.Field, e.Expr, forms)
}

// Expand returns a copy of s whose connection strings (command, args, env
// values, cwd, url, serverUrl, header values, path) have their variable
// references replaced anywhere inside the string (see ExpandString). Display
// text (description, routing) is never expanded. An unset variable without
// a default is a *MissingVarError naming it; an empty but set variable
// expands to "". This extends docs/deerflow.md §5.2, which only replaces
// whole-string `$VAR` (DeerFlow issue #2855). A `serverUrl` is copied to
// `url` in the expanded copy (it is what the transport dials).
func Expand(s Server, lookup func(string) (string, bool)) (Server, error) {
	out := s.Clone()
	var err error
	ex := func(field, v string) string {
		if err != nil {
			return v
		}
		r, e := ExpandString(v, lookup)
		switch x := e.(type) {
		case nil:
		case *MissingVarError:
			c := *x
			c.Server, c.Field = s.Name, field
			err = &c
		case *SyntaxError:
			c := *x
			c.Server, c.Field = s.Name, field
			err = &c
		default:
			err = fmt.Errorf("mcpServers.%s.%s: %w", s.Name, field, e)
		}
		return r
	}
	out.Command = ex("command", out.Command)
	for i := range out.Args {
		out.Args[i] = ex(fmt.Sprintf("args[%d]", i), out.Args[i])
	}
	for _, k := range sortedKeys(out.Env) {
		out.Env[k] = ex("env."+k, out.Env[k])
	}
	out.Cwd = ex("cwd", out.Cwd)
	out.URL = ex("url", out.URL)
	out.ServerURL = ex("serverUrl", out.ServerURL)
	for _, k := range sortedKeys(out.Headers) {
		out.Headers[k] = ex("headers."+k, out.Headers[k])
	}
	out.Path = ex("path", out.Path)
	if err != nil {
		return s, err
	}
	// A `..` segment in a value that holds the scope directory, wherever it
	// came from (docs/decisions/0136-tenant-admins-write-remote-servers-only.md).
	for i, a := range out.Args {
		if escapesScopeDir(a) {
			return s, scopeDirEscapeError(s.Name, fmt.Sprintf("args[%d]", i))
		}
	}
	for _, k := range sortedKeys(out.Env) {
		if escapesScopeDir(out.Env[k]) {
			return s, scopeDirEscapeError(s.Name, "env."+k)
		}
	}
	if escapesScopeDir(out.Cwd) {
		return s, scopeDirEscapeError(s.Name, "cwd")
	}
	if s.URL == "" && s.ServerURL != "" {
		out.URL = out.ServerURL
		if out.Type == "" && out.Transport == "" {
			out.Type = TypeHTTP
		}
	}
	return out, nil
}

func scopeDirEscapeError(server, field string) error {
	return fmt.Errorf("mcpServers.%s.%s: a value using ${%s} may not contain a '..' path segment (it would leave the session's scope directory)", server, field, ScopeDirVar)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ExpandString expands variable references in v with lookup:
//
//   - `$VAR` and `${VAR}`: the value; unset is a *MissingVarError;
//   - `${VAR:-word}`: the value, or word when VAR is unset or empty;
//     `${VAR-word}`: word only when VAR is unset;
//   - `${VAR:+word}`: word when VAR is set and non-empty, else "";
//     `${VAR+word}`: word when VAR is set;
//   - `${VAR:?message}`: the value; unset or empty is a *MissingVarError
//     carrying message (as written, not expanded); `${VAR?message}`: only unset is an error;
//   - `$$` is a literal `$`; a `$` not followed by a name or `{` is kept, as
//     is an unterminated `${`.
//
// word may itself hold references (expanded only when used). Any other
// operator after a name (`${VAR:=x}`, `${VAR#x}`, ...) is a *SyntaxError. The
// error never contains a value of any variable.
func ExpandString(v string, lookup func(string) (string, bool)) (string, error) {
	return expandDepth(v, lookup, 0)
}

// maxExpandDepth bounds nested `${A:-${B:-...}}` words.
const maxExpandDepth = 16

func expandDepth(v string, lookup func(string) (string, bool), depth int) (string, error) {
	if !strings.Contains(v, "$") {
		return v, nil
	}
	if depth > maxExpandDepth {
		return "", &SyntaxError{Expr: "(nested more than 16 levels)"}
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '$' || i+1 >= len(v) {
			b.WriteByte(c)
			continue
		}
		n := v[i+1]
		switch {
		case n == '$':
			b.WriteByte('$')
			i++
		case n == '{':
			end := matchBrace(v, i+2)
			if end < 0 {
				b.WriteByte(c)
				continue
			}
			body := v[i+2 : end]
			j := 0
			for j < len(body) && isVarChar(body[j]) {
				j++
			}
			name := body[:j]
			if !validVarName(name) {
				// Not a reference (e.g. "${ }"): kept as written.
				b.WriteByte(c)
				continue
			}
			r, err := expandBraced(name, body[j:], "${"+body+"}", lookup, depth)
			if err != nil {
				return "", err
			}
			b.WriteString(r)
			i = end
		case isVarStart(n):
			j := i + 1
			for j < len(v) && isVarChar(v[j]) {
				j++
			}
			name := v[i+1 : j]
			val, ok := lookup(name)
			if !ok {
				return "", &MissingVarError{Var: name}
			}
			b.WriteString(val)
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// expandBraced resolves `${name<rest>}`; expr is the whole expression for errors.
func expandBraced(name, rest, expr string, lookup func(string) (string, bool), depth int) (string, error) {
	val, set := lookup(name)
	if rest == "" {
		if !set {
			return "", &MissingVarError{Var: name}
		}
		return val, nil
	}
	colon := rest[0] == ':'
	op := rest
	if colon {
		op = rest[1:]
	}
	if op == "" {
		return "", &SyntaxError{Expr: expr}
	}
	word := op[1:]
	// present: set (and, with the colon, non-empty).
	present := set && (!colon || val != "")
	switch op[0] {
	case '-':
		if present {
			return val, nil
		}
		return expandDepth(word, lookup, depth+1)
	case '+':
		if present {
			return expandDepth(word, lookup, depth+1)
		}
		return "", nil
	case '?':
		if present {
			return val, nil
		}
		// The message is shown as written: it is never expanded, so no
		// value can reach an error through it.
		return "", &MissingVarError{Var: name, Empty: set, Message: word}
	}
	return "", &SyntaxError{Expr: expr}
}

// matchBrace returns the index of the `}` closing a `${` whose body starts
// at from, counting nested `${...}`; -1 when there is none.
func matchBrace(v string, from int) int {
	depth := 0
	for k := from; k < len(v); k++ {
		switch {
		case v[k] == '$' && k+1 < len(v) && v[k+1] == '{':
			depth++
			k++
		case v[k] == '}':
			if depth == 0 {
				return k
			}
			depth--
		}
	}
	return -1
}

func isVarStart(c byte) bool {
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
}

func isVarChar(c byte) bool { return isVarStart(c) || (c >= '0' && c <= '9') }

func validVarName(s string) bool {
	if s == "" || !isVarStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isVarChar(s[i]) {
			return false
		}
	}
	return true
}

// Reference returns the key path of the first connection string of s (the
// fields Expand expands) that references an environment variable, and the
// variable (an unsupported `${...}` form counts, with Var "").
// ScopeDirVar is not one: it names the session's scope directory, not
// the suite's environment. Servers written by a tenant admin may not read
// the suite's environment (docs/decisions/0105-tenant-scoped-servers.md).
func Reference(s Server) (field, variable string, found bool) {
	check := func(f, v string) bool {
		if found || !strings.Contains(v, "$") {
			return found
		}
		// Expanded with the scope directory set and empty, so a word of
		// `${TOOLPLANE_SCOPE_DIR:-word}` or `:+word` is seen either way.
		name := ""
		var err error
		for _, dir := range []string{"/scope", ""} {
			_, e := ExpandString(v, func(n string) (string, bool) {
				if n == ScopeDirVar {
					return dir, true // the session's own directory, not the host's environment
				}
				if name == "" {
					name = n
				}
				return "", true
			})
			if e != nil {
				err = e
			}
		}
		if name != "" || err != nil {
			field, variable, found = f, name, true
		}
		return found
	}
	check("command", s.Command)
	for i, a := range s.Args {
		check(fmt.Sprintf("args[%d]", i), a)
	}
	for _, k := range sortedKeys(s.Env) {
		check("env."+k, s.Env[k])
	}
	check("cwd", s.Cwd)
	check("url", s.URL)
	check("serverUrl", s.ServerURL)
	for _, k := range sortedKeys(s.Headers) {
		check("headers."+k, s.Headers[k])
	}
	check("path", s.Path)
	// The oauth block (kept in Extra) is expanded by ExpandOAuth: its
	// strings read the environment too. A block that does not decode counts
	// as a reference (fail closed).
	for _, x := range s.Extra {
		if x.Key != "oauth" || found {
			continue
		}
		var o OAuth
		if err := json.Unmarshal(x.Value, &o); err != nil {
			return "oauth", "", true
		}
		check("oauth.token_url", o.TokenURL)
		check("oauth.client_id", o.ClientID)
		check("oauth.client_secret", o.ClientSecret)
		check("oauth.refresh_token", o.RefreshToken)
		check("oauth.scope", o.Scope)
		check("oauth.audience", o.Audience)
		for _, k := range sortedKeys(o.ExtraTokenParams) {
			check("oauth.extra_token_params."+k, o.ExtraTokenParams[k])
		}
	}
	return field, variable, found
}

package catalogconfig

import (
	"fmt"
	"strings"
)

// MissingVarError reports an environment variable referenced by a server's
// configuration that is not set. Only that server fails.
type MissingVarError struct {
	// Server is the server name, Field the key path inside it, Var the variable.
	Server, Field, Var string
}

func (e *MissingVarError) Error() string {
	return fmt.Sprintf("mcpServers.%s.%s: environment variable %s is not set", e.Server, e.Field, e.Var)
}

// Expand returns a copy of s whose connection strings (command, args, env
// values, cwd, url, header values, path) have `$VAR` and `${VAR}` replaced
// anywhere inside the string by lookup's value; `$$` is a literal `$`, and a
// `$` not followed by a name is kept. Display text (description, routing) is
// never expanded. An unset variable is a *MissingVarError naming it; an empty
// but set variable expands to "". This extends docs/deerflow.md §5.2, which
// only replaces whole-string `$VAR` (DeerFlow issue #2855).
func Expand(s Server, lookup func(string) (string, bool)) (Server, error) {
	out := s.Clone()
	var err error
	ex := func(field, v string) string {
		if err != nil {
			return v
		}
		r, e := ExpandString(v, lookup)
		if e != nil {
			err = &MissingVarError{Server: s.Name, Field: field, Var: e.(*MissingVarError).Var}
		}
		return r
	}
	out.Command = ex("command", out.Command)
	for i := range out.Args {
		out.Args[i] = ex(fmt.Sprintf("args[%d]", i), out.Args[i])
	}
	for k, v := range out.Env {
		out.Env[k] = ex("env."+k, v)
	}
	out.Cwd = ex("cwd", out.Cwd)
	out.URL = ex("url", out.URL)
	for k, v := range out.Headers {
		out.Headers[k] = ex("headers."+k, v)
	}
	out.Path = ex("path", out.Path)
	if err != nil {
		return s, err
	}
	return out, nil
}

// ExpandString expands `$VAR`, `${VAR}` and `$$` in v (see Expand). The
// returned error is a *MissingVarError with only Var set.
func ExpandString(v string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(v, "$") {
		return v, nil
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
			end := strings.IndexByte(v[i+2:], '}')
			name := ""
			if end >= 0 {
				name = v[i+2 : i+2+end]
			}
			if end < 0 || !validVarName(name) {
				b.WriteByte(c)
				continue
			}
			val, ok := lookup(name)
			if !ok {
				return "", &MissingVarError{Var: name}
			}
			b.WriteString(val)
			i += 2 + end
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

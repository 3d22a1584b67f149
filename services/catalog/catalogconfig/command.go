package catalogconfig

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultCommandAllowlist is the default set of executables a stdio server
// written through the API may use (docs/architecture.md §10.4).
var DefaultCommandAllowlist = []string{"npx", "uvx", "node", "python3"}

// codeEvalFlags are interpreter/launcher flags that evaluate code given on the
// command line or preload code (node, python, npx, deno, bun, uv).
var codeEvalFlags = []string{
	"-e", "--eval", "-c", "--call", "-p", "--print", "-r", "--require", "--import",
	"--loader", "--experimental-loader", "--experimental-policy", "-i", "--interactive",
	"--inspect", "--inspect-brk", "--env-file",
}

// codeInjectingEnv are environment variables that make an interpreter,
// package runner or the dynamic loader run code other than the server's, or
// resolve the command elsewhere. Names are compared case-insensitively;
// entries ending in "*" are prefixes.
var codeInjectingEnv = []string{
	"NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT",
	"DYLD_*", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PYTHONUSERBASE",
	"PERL5OPT", "PERL5LIB", "RUBYOPT", "BASH_ENV", "ENV", "PATH", "JAVA_TOOL_OPTIONS",
	"NPM_CONFIG_*", "UV_*", "PIP_*", "GIT_SSH_COMMAND",
}

const shellMeta = " \t\r\n;&|$<>`'\"()*?[]{}!#~\\%^"

// ValidateCommand checks a stdio server's command against the write policy:
// the command is a bare executable name from allowlist (no path separators,
// no shell metacharacters), no argument is a code-evaluation flag (-e, -c,
// --eval, -p, --print, -r, --require, --import, --loader, ... or a short-flag
// cluster containing e, c or p such as -pe), and no env key may inject code
// (NODE_OPTIONS, LD_PRELOAD, PYTHONPATH, PATH, NPM_CONFIG_*, ...). The error
// names the offending field, e.g. `mcpServers.x.args[1]: ...`. Non-stdio
// servers pass.
func ValidateCommand(s *Server, allowlist []string) error {
	if s.EffectiveType() != TypeStdio {
		return nil
	}
	p := "mcpServers." + s.Name
	cmd := s.Command
	if cmd == "" {
		return fmt.Errorf("%s.command: required for type stdio", p)
	}
	if strings.ContainsAny(cmd, "/\\") {
		return fmt.Errorf("%s.command: %q must be a bare executable name, not a path", p, cmd)
	}
	if strings.ContainsAny(cmd, shellMeta) || strings.ContainsRune(cmd, 0) {
		return fmt.Errorf("%s.command: %q contains shell metacharacters", p, cmd)
	}
	if !slices.Contains(allowlist, cmd) {
		return fmt.Errorf("%s.command: %q is not in the stdio command allowlist %v", p, cmd, allowlist)
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%s.args[%d]: contains a NUL byte", p, i)
		}
		if f := evalFlag(a); f != "" {
			return fmt.Errorf("%s.args[%d]: %q is a code-evaluation flag (%s) and is not allowed", p, i, a, f)
		}
	}
	for k := range s.Env {
		if injectingEnv(k) {
			return fmt.Errorf("%s.env.%s: this variable can inject code and is not allowed", p, k)
		}
	}
	return nil
}

func evalFlag(a string) string {
	flag := a
	if i := strings.IndexByte(a, '='); i > 0 && strings.HasPrefix(a, "-") {
		flag = a[:i]
	}
	if slices.Contains(codeEvalFlags, flag) {
		return flag
	}
	// -pe, -ec, -ce...: a cluster of single-letter flags.
	if len(a) > 2 && a[0] == '-' && a[1] != '-' {
		letters := true
		for _, c := range a[1:] {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				letters = false
				break
			}
		}
		if letters && strings.ContainsAny(a[1:], "ecp") {
			return "-" + string(a[1+strings.IndexAny(a[1:], "ecp")])
		}
	}
	return ""
}

func injectingEnv(k string) bool {
	u := strings.ToUpper(k)
	for _, e := range codeInjectingEnv {
		if strings.HasSuffix(e, "*") {
			if strings.HasPrefix(u, strings.TrimSuffix(e, "*")) {
				return true
			}
		} else if u == e {
			return true
		}
	}
	return false
}

package catalogconfig

import (
	"fmt"
	"os/exec"
	"path"
	"slices"
	"strings"
)

// DefaultCommandAllowlist is the default set of executables a stdio server
// may start (docs/architecture.md §10.4).
var DefaultCommandAllowlist = []string{"npx", "uvx", "node", "python3"}

// The stdio command policy (docs/architecture.md §10.4) is an allowlist of
// executables plus, for the interpreters and package runners it knows, the
// argument patterns that run code given in the configuration instead of a
// server's program: inline-code flags in every spelling (separate, "=value",
// attached value, inside a short-flag cluster), reading the program from
// stdin ("-"), data: URLs, code-taking subcommands (deno eval), module
// runners that take code (python -m timeit/code/runpy/...) and, for package
// runners (npx, uvx, ...), an interpreter named as the package, whose
// arguments are then checked by that interpreter's rules. Patterns are
// refused anywhere in the argument list, also after the script (a false
// refusal is an admin's fix; a missed one is code execution). An executable
// the policy does not know gets the union of the interpreter flags.

// interp is the argument policy of one interpreter or runner.
type interp struct {
	flags      []string // refused long or short flags, also as flag=value
	prefixes   []string // refused flag prefixes (--inspect, --env-file, ...)
	shortCodes string   // single-letter flags that take or enable code, refused inside a cluster or with an attached value
	subcmds    []string // refused first positional arguments (code-taking subcommands)
	runner     bool     // a package runner: an interpreter named as an argument is checked with its rules
	pyModule   bool     // python's -m: the module must not be a code runner
}

var nodeFlags = []string{"-e", "--eval", "-p", "--print", "-r", "--require", "--import", "--loader",
	"--experimental-loader", "--experimental-policy", "-i", "--interactive", "--run", "--input-type", "-"}

var interpreters = map[string]interp{
	"node":   {flags: nodeFlags, prefixes: []string{"--inspect", "--env-file", "--experimental-loader", "--loader", "--import", "--require", "--eval", "--print"}, shortCodes: "epri"},
	"bun":    {flags: append(slices.Clone(nodeFlags), "repl"), prefixes: []string{"--inspect", "--env-file", "--preload", "--eval", "--print"}, shortCodes: "epri", subcmds: []string{"repl", "exec"}, runner: true},
	"deno":   {flags: []string{"--eval", "-", "--env-file", "--import-map"}, prefixes: []string{"--inspect", "--env-file", "--eval", "--preload"}, subcmds: []string{"eval", "repl", "jupyter", "task"}, runner: true},
	"tsx":    {flags: nodeFlags, prefixes: []string{"--inspect", "--env-file", "--import", "--require", "--eval", "--print"}, shortCodes: "epri"},
	"python": {flags: []string{"-c", "-i", "-"}, shortCodes: "ci", pyModule: true},
	"sh":     {flags: []string{"-c", "-s", "-i", "--rcfile", "--init-file", "-"}, prefixes: []string{"--rcfile", "--init-file"}, shortCodes: "cis"},
	"perl":   {flags: []string{"-e", "-E", "-M", "-m", "-x", "-"}, shortCodes: "eEMmx"},
	"ruby":   {flags: []string{"-e", "-r", "-x", "-"}, prefixes: []string{"--require"}, shortCodes: "erx"},
	"php":    {flags: []string{"-r", "-a", "-B", "-R", "-F", "-E", "-d", "-"}, shortCodes: "raBRFEd"},
	// Package runners: npx/npm exec -c runs a shell command; --node-options
	// and script shells inject code.
	"npx":  {flags: []string{"-c", "--call", "--node-options", "--script-shell", "--shell"}, prefixes: []string{"--node-options", "--script-shell", "--call", "--shell"}, shortCodes: "c", runner: true},
	"uvx":  {flags: []string{"-", "--with-editable"}, runner: true},
	"uv":   {flags: []string{"-", "-m", "--module", "--script"}, runner: true},
	"pipx": {flags: []string{"--spec"}, runner: true},
}

// aliases map executable names to the interpreter whose rules apply.
var aliases = map[string]string{
	"nodejs": "node", "ts-node": "tsx", "bunx": "bun", "pnpx": "npx", "pnpm": "npx", "npm": "npx", "yarn": "npx",
	"python": "python", "python2": "python", "python3": "python", "pypy": "python", "pypy3": "python",
	"sh": "sh", "bash": "sh", "dash": "sh", "zsh": "sh", "ksh": "sh", "ash": "sh", "fish": "sh", "busybox": "sh",
	"perl": "perl", "ruby": "ruby", "php": "php", "deno": "deno", "bun": "bun", "tsx": "tsx", "node": "node",
	"npx": "npx", "uvx": "uvx", "uv": "uv", "pipx": "pipx",
}

// pythonCodeModules are modules that, run with python -m, execute code given
// on the command line or from stdin, or install and run packages.
var pythonCodeModules = []string{"code", "codeop", "runpy", "timeit", "pdb", "cProfile", "profile", "trace",
	"doctest", "idlelib", "IPython", "ptpython", "bpython", "asyncio", "pip", "ensurepip", "pydoc", "site", "this", "py_compile", "compileall", "zipapp", "venv"}

// interpreterOf returns the policy for an executable name or a runner's
// package spec ("node@20", "python3.12", "@scope/pkg" is none).
func interpreterOf(name string) (interp, string, bool) {
	n := name
	for _, pre := range []string{"npm:", "jsr:", "pypi:"} {
		n = strings.TrimPrefix(n, pre)
	}
	if i := strings.LastIndexByte(n, '@'); i > 0 {
		n = n[:i]
	}
	n = path.Base(n)
	if k, ok := aliases[n]; ok {
		return interpreters[k], k, true
	}
	// python3.12, python3.12m, perl5.36, ruby3.2, php8.2, node20
	for _, base := range []string{"python", "pypy", "perl", "ruby", "php", "node"} {
		if rest, ok := strings.CutPrefix(n, base); ok && rest != "" && strings.Trim(rest, "0123456789.m") == "" {
			return interpreters[aliases[base]], aliases[base], true
		}
	}
	return interp{}, "", false
}

// unknownPolicy is applied to an allowlisted executable the policy does not
// know: every interpreter's inline-code flag.
var unknownPolicy = func() interp {
	var u interp
	for _, k := range []string{"node", "python", "sh", "npx"} {
		u.flags = append(u.flags, interpreters[k].flags...)
		u.prefixes = append(u.prefixes, interpreters[k].prefixes...)
	}
	u.shortCodes = "epric"
	return u
}()

// codeInjectingEnv are environment variables that make an interpreter,
// package runner, git or the dynamic loader run code other than the
// server's, or resolve the command elsewhere. Names are compared
// case-insensitively; entries ending in "*" are prefixes.
var codeInjectingEnv = []string{
	"NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE", "NODE_EXTRA_CA_CERTS", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT",
	"DYLD_*", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PYTHONUSERBASE", "PYTHONBREAKPOINT",
	"PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "BASH_ENV", "ENV", "PATH", "JAVA_TOOL_OPTIONS",
	"NPM_CONFIG_*", "UV_*", "PIP_*", "BUN_*", "DENO_*", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_CONFIG_*",
	"GIT_ASKPASS", "GIT_EDITOR", "GIT_PAGER", "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR",
	"EDITOR", "VISUAL", "PAGER", "BROWSER", "SHELL", "PROMPT_COMMAND", "IFS",
}

const shellMeta = " \t\r\n;&|$<>`'\"()*?[]{}!#~\\%^"

// ValidateCommand checks a stdio server's command against the command
// policy: the command is a bare executable name from allowlist (no path
// separators, no shell metacharacters); no argument runs code given in the
// configuration (see the rules above, per interpreter); and no env key may
// inject code (NODE_OPTIONS, LD_PRELOAD, PYTHONPATH, PATH, NPM_CONFIG_*,
// GIT_SSH_COMMAND, ...). The error names the offending field, e.g.
// `mcpServers.x.args[1]: ...`. Non-stdio servers pass. It applies to every
// configuration an admin supplies: ReplaceServers, UpdateServer (enabling a
// server) and extensions_config.json.
func ValidateCommand(s *Server, allowlist []string) error {
	if s.EffectiveType() != TypeStdio {
		return nil
	}
	return ValidateStdioCommand("mcpServers."+s.Name, s.Command, s.Args, s.Env, allowlist)
}

// ValidateStdioCommand applies the command policy of ValidateCommand to
// any child process the catalog starts (stdio MCP servers, ACP agents);
// errors name fields under p (e.g. `catalog.acp_agents.coder.args[0]`).
func ValidateStdioCommand(p, cmd string, args []string, env map[string]string, allowlist []string) error {
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
	for i, a := range args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%s.args[%d]: contains a NUL byte", p, i)
		}
	}
	pol, name, known := interpreterOf(cmd)
	if !known {
		pol, name = unknownPolicy, cmd
	}
	if err := checkArgs(p, name, pol, args, 0, 0); err != nil {
		return err
	}
	for k := range env {
		if injectingEnv(k) {
			return fmt.Errorf("%s.env.%s: this variable can inject code and is not allowed", p, k)
		}
	}
	return nil
}

// lookPath finds host executables (a variable for tests).
var lookPath = exec.LookPath

// checkArgs applies one interpreter's rules to args (which start at
// args[base] of the configuration) and recurses into interpreters a runner
// names.
func checkArgs(p, name string, pol interp, args []string, base, depth int) error {
	if depth > 4 {
		return fmt.Errorf("%s.args: interpreters nested deeper than 4", p)
	}
	refuse := func(i int, why string) error {
		return fmt.Errorf("%s.args[%d]: %q %s for %s and is not allowed", p, base+i, args[i], why, name)
	}
	positional := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		low := strings.ToLower(a)
		if strings.HasPrefix(low, "data:") || strings.HasPrefix(low, "javascript:") {
			return refuse(i, "is inline code (a data: or javascript: URL)")
		}
		flag := a
		if j := strings.IndexByte(a, '='); j > 0 && strings.HasPrefix(a, "-") {
			flag = a[:j]
		}
		if slices.Contains(pol.flags, flag) {
			return refuse(i, "is a code-evaluation flag")
		}
		for _, pre := range pol.prefixes {
			if strings.HasPrefix(flag, pre) {
				return refuse(i, "is a code-evaluation flag")
			}
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' {
			if err := shortCluster(a, pol, args, i, refuse); err != nil {
				return err
			}
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		if positional == 0 && slices.Contains(pol.subcmds, a) {
			return refuse(i, "is a code-taking subcommand")
		}
		positional++
		if pol.runner {
			if sub, subName, ok := interpreterOf(a); ok && subName != name {
				return checkArgs(p, subName, sub, args[i+1:], base+i+1, depth+1)
			}
		}
		if name == "npx" && i > 0 && (args[i-1] == "-p" || args[i-1] == "--package") {
			positional-- // the value of -p/--package, not the command
		} else if name == "npx" && positional == 1 {
			// npx runs a host executable of that name before it looks for a
			// package (`npx awk 'BEGIN{system(...)}'`, `npx -- touch f`):
			// the package must not name one.
			if path, err := lookPath(a); err == nil {
				return refuse(i, fmt.Sprintf("names the host executable %s, which npx would run instead of a package", path))
			}
		}
	}
	return nil
}

// shortCluster checks a single-dash argument: a cluster of letters (-pe,
// -lc) or a letter with an attached value (-cprint(1), -mtimeit).
func shortCluster(a string, pol interp, args []string, i int, refuse func(int, string) error) error {
	for k := 1; k < len(a); k++ {
		c := a[k]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return nil
		}
		if strings.IndexByte(pol.shortCodes, c) >= 0 {
			return refuse(i, fmt.Sprintf("contains the code-evaluation flag -%c", c))
		}
		if c == 'm' && pol.pyModule {
			mod := a[k+1:]
			if mod == "" && i+1 < len(args) {
				mod = args[i+1]
			}
			root, _, _ := strings.Cut(mod, ".")
			if slices.Contains(pythonCodeModules, root) || mod == "" {
				return refuse(i, fmt.Sprintf("runs the module %q, which executes code from its arguments", mod))
			}
			return nil
		}
		if c == 'X' || c == 'W' || c == 'O' && pol.pyModule {
			return nil // python options that take a value
		}
	}
	return nil
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

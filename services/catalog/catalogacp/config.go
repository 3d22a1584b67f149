// Package catalogacp runs ACP agents (Agent Client Protocol, JSON-RPC over
// stdio) for the catalog: the `acp_agents` configuration in DeerFlow's
// shape, one supervised child per (agent, thread) working in the thread's
// ACP workspace, and the client side of a prompt turn — streamed updates,
// permission requests answered by policy (deny by default), cancellation
// (docs/decisions/0150-where-acp-and-workspace-servers-run.md,
// docs/deerflow.md §1.2 step 8).
//
// The protocol types and the JSON-RPC connection are those of
// github.com/coder/acp-go-sdk; the process is catalogmcp's (own process
// group, parent-death signal, bounded stderr tail).
package catalogacp

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// Agent is one entry of `acp_agents` (DeerFlow's shape): the command that
// speaks ACP on stdio, its environment ($VAR resolved from the host), the
// description shown in the invoke_acp_agent tool, an optional model hint
// and whether permission requests are approved (default false: denied).
type Agent struct {
	Command                string            `yaml:"command" json:"command"`
	Args                   []string          `yaml:"args" json:"args,omitempty"`
	Env                    map[string]string `yaml:"env" json:"env,omitempty"`
	Description            string            `yaml:"description" json:"description"`
	Model                  string            `yaml:"model" json:"model,omitempty"`
	AutoApprovePermissions bool              `yaml:"auto_approve_permissions" json:"auto_approve_permissions,omitempty"`
}

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// maxDescription bounds an agent's description (it goes into a tool
// description the model reads).
const maxDescription = 1000

// ValidateAgents checks every entry of the mapping; errors name the path
// (`<prefix>.<name>.<field>`) and the reason.
func ValidateAgents(prefix string, agents map[string]Agent) error {
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := agents[n].Validate(prefix + "." + n); err != nil {
			return err
		}
		if !nameRE.MatchString(n) {
			return fmt.Errorf("%s.%s: the agent name must match %s", prefix, n, nameRE)
		}
	}
	return nil
}

// Validate checks one agent; p is its path, e.g. catalog.acp_agents.coder.
func (a Agent) Validate(p string) error {
	switch {
	case strings.TrimSpace(a.Command) == "":
		return fmt.Errorf("%s.command: required", p)
	case strings.ContainsRune(a.Command, 0):
		return fmt.Errorf("%s.command: contains NUL", p)
	case strings.TrimSpace(a.Description) == "":
		return fmt.Errorf("%s.description: required (it is shown to the model in invoke_acp_agent)", p)
	case len(a.Description) > maxDescription:
		return fmt.Errorf("%s.description: longer than %d bytes", p, maxDescription)
	case len(a.Model) > 200 || strings.ContainsAny(a.Model, "\x00\n"):
		return fmt.Errorf("%s.model: at most 200 bytes on one line", p)
	}
	for i, s := range a.Args {
		if strings.ContainsRune(s, 0) {
			return fmt.Errorf("%s.args[%d]: contains NUL", p, i)
		}
	}
	for k, v := range a.Env {
		if !envKeyRE.MatchString(k) {
			return fmt.Errorf("%s.env.%s: not a valid variable name", p, k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("%s.env.%s: contains NUL", p, k)
		}
	}
	return nil
}

// Resolve expands $VAR and ${VAR} in command, args and env from lookup
// (the host environment), with the same syntax as MCP server entries
// (docs/deerflow.md §5.2). A missing variable is an error naming the field;
// the value never appears in it.
func (a Agent) Resolve(p string, lookup func(string) (string, bool)) (Agent, error) {
	out := a
	var err error
	if out.Command, err = catalogconfig.ExpandString(a.Command, lookup); err != nil {
		return Agent{}, fmt.Errorf("%s.command: %w", p, err)
	}
	out.Args = make([]string, len(a.Args))
	for i, s := range a.Args {
		if out.Args[i], err = catalogconfig.ExpandString(s, lookup); err != nil {
			return Agent{}, fmt.Errorf("%s.args[%d]: %w", p, i, err)
		}
	}
	out.Env = make(map[string]string, len(a.Env))
	for k, v := range a.Env {
		if out.Env[k], err = catalogconfig.ExpandString(v, lookup); err != nil {
			return Agent{}, fmt.Errorf("%s.env.%s: %w", p, k, err)
		}
	}
	return out, nil
}

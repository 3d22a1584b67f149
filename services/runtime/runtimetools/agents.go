package runtimetools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
)

// Agents is what update_agent and setup_agent need of the runtime's agents
// (docs/decisions/0152-owned-agents.md). Validation errors are
// *AgentInvalidError; the ownership and existence refusals are the
// sentinels below.
type Agents interface {
	// UpdateOwned applies ch to agent name when p owns it (ErrNotOwner
	// otherwise, also for a shared or missing agent).
	UpdateOwned(ctx context.Context, p *typev1.Principal, name string, ch AgentChange) (*runtimev1.Agent, error)
	// CreateOwned stores a as a new agent owned by p (ErrAgentExists when
	// the name is taken, by a stored agent or a built-in one).
	CreateOwned(ctx context.Context, p *typev1.Principal, a *runtimev1.Agent) (*runtimev1.Agent, error)
}

// AgentChange is what update_agent changes; nil fields are unchanged.
type AgentChange struct {
	Soul, Description, Model *string
	Skills, ToolGroups       *[]string
}

var (
	// ErrNotOwner: the agent is not owned by the caller (shared, another
	// user's, or gone).
	ErrNotOwner = errors.New("agent not owned by the caller")
	// ErrAgentExists: setup_agent's name is taken.
	ErrAgentExists = errors.New("agent exists")
)

// AgentInvalidError is an agent that does not validate like UpsertAgent;
// Field names the argument.
type AgentInvalidError struct{ Field, Reason string }

func (e *AgentInvalidError) Error() string { return e.Field + ": " + e.Reason }

// ReasonNotOwner is the POLICY reason of update_agent on an agent the caller
// does not own.
const ReasonNotOwner = "update_agent.not_owner"

// updateAgent implements update_agent: it changes only the thread's own
// agent, and only when the agent is owned by the thread's user in the
// user's tenant; a shared or global agent is never changed from a thread
// (a prompt-injected thread must not rewrite an agent others use). The
// change applies from the next assembly (agents are cached by update time).
func (s *Dispatcher) updateAgent(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	if s.agents == nil {
		return nil, fmt.Errorf("update_agent is not wired")
	}
	if ec.Thread.Child != nil {
		return runtimechain.PolicyErr(ReasonNotOwner, "Error: update_agent is not available to subagents."), nil
	}
	var ch AgentChange
	n := 0
	for _, f := range []struct {
		key string
		dst **string
	}{{"soul", &ch.Soul}, {"description", &ch.Description}, {"model", &ch.Model}} {
		if v, ok := ec.Args[f.key]; ok && v != nil {
			str, ok := v.(string)
			if !ok {
				return nil, runtimechain.Business("%s must be a string", f.key)
			}
			*f.dst = &str
			n++
		}
	}
	for _, f := range []struct {
		key string
		dst **[]string
	}{{"skills", &ch.Skills}, {"tool_groups", &ch.ToolGroups}} {
		list, ok, err := strList(ec.Args, f.key)
		if err != nil {
			return nil, err
		}
		if ok {
			*f.dst = &list
			n++
		}
	}
	if n == 0 {
		return nil, runtimechain.Business("give at least one of soul, description, skills, tool_groups, model")
	}
	name := ec.View.Base.Agent.GetName()
	a, err := s.agents.UpdateOwned(ctx, runtimeident.Principal(ctx), name, ch)
	if err != nil {
		return agentRefusal(err, "update_agent")
	}
	if s.assembly != nil {
		s.assembly.Invalidate()
	}
	return &runtimechain.Outcome{Text: fmt.Sprintf("Agent %s updated (%s); the change applies from the next turn.", a.GetName(), changed(ch))}, nil
}

// setupAgent implements setup_agent (bootstrap agent threads): it creates
// a new agent owned by the caller; an existing name is refused.
func (s *Dispatcher) setupAgent(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	if s.agents == nil {
		return nil, fmt.Errorf("setup_agent is not wired")
	}
	a := &runtimev1.Agent{Name: strings.TrimSpace(strArg(ec.Args, "name")), SystemPrompt: strArg(ec.Args, "soul"),
		Description: strArg(ec.Args, "description"), Model: strArg(ec.Args, "model")}
	for _, k := range []string{"name", "soul", "description"} {
		if v, ok := ec.Args[k].(string); !ok || strings.TrimSpace(v) == "" {
			return nil, runtimechain.Business("%s is required (a non-empty string)", k)
		}
	}
	for _, f := range []struct {
		key string
		dst **typev1.StringList
	}{{"skills", &a.Skills}, {"tool_groups", &a.ToolGroups}} {
		list, ok, err := strList(ec.Args, f.key)
		if err != nil {
			return nil, err
		}
		if ok {
			*f.dst = &typev1.StringList{Values: list}
		}
	}
	out, err := s.agents.CreateOwned(ctx, runtimeident.Principal(ctx), a)
	if err != nil {
		return agentRefusal(err, "setup_agent")
	}
	return &runtimechain.Outcome{Text: fmt.Sprintf("Agent %s created and owned by you; start a thread with agent %q to use it.", out.GetName(), out.GetName())}, nil
}

// agentRefusal maps an Agents error: not owned → POLICY
// update_agent.not_owner; invalid and existing name → BUSINESS; anything
// else stays a failure of the tool.
func agentRefusal(err error, tool string) (*runtimechain.Outcome, error) {
	var inv *AgentInvalidError
	switch {
	case errors.Is(err, ErrNotOwner):
		return runtimechain.PolicyErr(ReasonNotOwner, "Error: %s refused: this thread's agent is shared or not yours; only an agent you own can be changed from a thread.", tool), nil
	case errors.As(err, &inv):
		return nil, runtimechain.Business("%s", inv.Error())
	case errors.Is(err, ErrAgentExists):
		return nil, runtimechain.Business("ALREADY_EXISTS: an agent with that name exists; choose another name")
	}
	return nil, err
}

func changed(ch AgentChange) string {
	var parts []string
	for _, f := range []struct {
		set  bool
		name string
	}{{ch.Soul != nil, "soul"}, {ch.Description != nil, "description"}, {ch.Skills != nil, "skills"}, {ch.ToolGroups != nil, "tool_groups"}, {ch.Model != nil, "model"}} {
		if f.set {
			parts = append(parts, f.name)
		}
	}
	return strings.Join(parts, ", ")
}

// strList reads an optional array of strings argument.
func strList(args map[string]any, key string) ([]string, bool, error) {
	v, ok := args[key]
	if !ok || v == nil {
		return nil, false, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, false, runtimechain.Business("%s must be an array of strings", key)
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		str, ok := e.(string)
		if !ok {
			return nil, false, runtimechain.Business("%s[%d] must be a string", key, i)
		}
		out = append(out, str)
	}
	return out, true, nil
}

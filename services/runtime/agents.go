package runtime

import (
	"context"
	"errors"
	"regexp"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// defaultAgentName is the built-in agent used by threads without one.
const defaultAgentName = "default"

var agentNameRE = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)

// agentBook resolves agents: stored agents, the built-in default agent
// (runtime.default_agent) and a subagent thread's override.
type agentBook struct {
	def   DefaultAgentConfig
	store runtimestore.Store
	// bootstrap is runtime.bootstrap_agent ("" = none).
	bootstrap string
}

// reserved reports whether name is a built-in agent's (default, the
// bootstrap agent), which setup_agent may not take.
func (b *agentBook) reserved(name string) bool {
	return name == defaultAgentName || (b.bootstrap != "" && name == b.bootstrap)
}

// bootstrapPrompt is the system prompt of the built-in bootstrap agent.
const bootstrapPrompt = "You help the user design a new custom agent. Ask what the agent is for, which skills and tool groups it needs and how it should behave; " +
	"then call setup_agent with a short name, a one-line description and a soul (the agent's system prompt). The new agent belongs to the user only."

// bootstrapAgent is the built-in bootstrap agent (docs/deerflow.md §1.3):
// skills restricted to {bootstrap}, every tool group.
func (b *agentBook) bootstrapAgent() *runtimev1.Agent {
	return &runtimev1.Agent{Name: b.bootstrap, Description: "Sets up a new custom agent with you.", SystemPrompt: bootstrapPrompt,
		Skills: &typev1.StringList{Values: []string{"bootstrap"}}}
}

// loopAgent resolves the agent of a thread for the agent loop.
func (b *agentBook) loopAgent(ctx context.Context, th *runtimestore.Thread) (runtimeloop.Agent, error) {
	ag, err := b.ThreadAgent(ctx, th)
	if err != nil {
		return runtimeloop.Agent{}, err
	}
	return runtimeloop.Agent{Name: ag.GetName(), Model: ag.GetModel(), SystemPrompt: ag.GetSystemPrompt(), SubagentsEnabled: ag.GetSubagentsEnabled(), Skills: ag.GetSkills()}, nil
}

// defaultAgent returns the built-in default agent from runtime.default_agent
// (empty tool_groups / skills lists mean "all", i.e. unset StringLists).
// A stored agent named "default" replaces it.
func (b *agentBook) defaultAgent() *runtimev1.Agent {
	d := b.def
	a := &runtimev1.Agent{Name: defaultAgentName, Description: d.Description, Model: d.Model, SystemPrompt: d.SystemPrompt, SubagentsEnabled: d.SubagentsEnabled}
	if a.Description == "" {
		a.Description = "The default agent."
	}
	if len(d.ToolGroups) > 0 {
		a.ToolGroups = &typev1.StringList{Values: d.ToolGroups}
	}
	if len(d.Skills) > 0 {
		a.Skills = &typev1.StringList{Values: d.Skills}
	}
	return a
}

// ThreadAgent returns the agent of a thread (implements
// runtimeassembly.AgentResolver): a subagent thread's agent
// override (runtimestore.Child.Agent), else the agent it names.
func (b *agentBook) ThreadAgent(ctx context.Context, th *runtimestore.Thread) (*runtimev1.Agent, error) {
	if th.Child != nil && th.Child.Agent != nil {
		return proto.Clone(th.Child.Agent).(*runtimev1.Agent), nil
	}
	a, _, err := b.resolveAgent(ctx, th.Proto.GetAgent())
	return a, err
}

// resolveAgent returns the agent of a thread: the stored agent of that name,
// else the default agent for "" / "default". A thread whose agent was
// deleted falls back to the default agent (reported by the caller).
func (b *agentBook) resolveAgent(ctx context.Context, name string) (*runtimev1.Agent, bool, error) {
	if name == "" {
		name = defaultAgentName
	}
	a, err := b.store.GetAgent(ctx, name)
	if err == nil {
		return a, true, nil
	}
	if !errors.Is(err, runtimestore.ErrNotFound) {
		return nil, false, storeErr(err)
	}
	if b.bootstrap != "" && name == b.bootstrap {
		return b.bootstrapAgent(), true, nil
	}
	return b.defaultAgent(), name == defaultAgentName, nil
}

// ListAgents lists the stored agents plus the default agent when it is not
// stored.
func (s *Server) ListAgents(ctx context.Context, _ *runtimev1.ListAgentsRequest) (*runtimev1.ListAgentsResponse, error) {
	agents, err := s.store.ListAgents(ctx)
	if err != nil {
		return nil, storeErr(err)
	}
	hasDefault, hasBootstrap := false, false
	visible := agents[:0]
	for _, a := range agents {
		if !visibleTo(ctx, a) {
			continue // another user's agent (docs/decisions/0152-owned-agents.md)
		}
		visible = append(visible, a)
		switch a.GetName() {
		case defaultAgentName:
			hasDefault = true
		case s.agents.bootstrap:
			hasBootstrap = true
		}
	}
	agents = visible
	if s.agents.bootstrap != "" && !hasBootstrap {
		agents = append([]*runtimev1.Agent{s.agents.bootstrapAgent()}, agents...)
	}
	if !hasDefault {
		agents = append([]*runtimev1.Agent{s.agents.defaultAgent()}, agents...)
	}
	return &runtimev1.ListAgentsResponse{Agents: agents}, nil
}

// GetAgent returns one agent ("default" always exists).
func (s *Server) GetAgent(ctx context.Context, req *runtimev1.GetAgentRequest) (*runtimev1.GetAgentResponse, error) {
	a, err := s.store.GetAgent(ctx, req.GetName())
	if err == nil && !visibleTo(ctx, a) {
		err = runtimestore.ErrNotFound // another user's agent: not even its name leaks
	}
	if errors.Is(err, runtimestore.ErrNotFound) {
		if req.GetName() == defaultAgentName {
			return &runtimev1.GetAgentResponse{Agent: s.agents.defaultAgent()}, nil
		}
		if s.agents.bootstrap != "" && req.GetName() == s.agents.bootstrap {
			return &runtimev1.GetAgentResponse{Agent: s.agents.bootstrapAgent()}, nil
		}
		return nil, statusErr(codes.NotFound, runtimev1.ErrorReason_ERROR_REASON_AGENT_NOT_FOUND, "agent %q not found", req.GetName())
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return &runtimev1.GetAgentResponse{Agent: a}, nil
}

// UpsertAgent creates or replaces an agent (admin). Cached assemblies are
// keyed by the agent's update_time, so the change applies at the next turn.
func (s *Server) UpsertAgent(ctx context.Context, req *runtimev1.UpsertAgentRequest) (*runtimev1.UpsertAgentResponse, error) {
	a := proto.Clone(req.GetAgent()).(*runtimev1.Agent)
	// The owner is output only: an operator's write keeps the stored one
	// (an owned agent stays private), a new agent is shared.
	a.Owner = nil
	if cur, err := s.store.GetAgent(ctx, a.GetName()); err == nil {
		a.Owner = cur.GetOwner()
	} else if !errors.Is(err, runtimestore.ErrNotFound) {
		return nil, storeErr(err)
	}
	a.UpdateTime = timestamppb.New(s.now())
	if err := s.store.PutAgent(ctx, a); err != nil {
		return nil, storeErr(err)
	}
	return &runtimev1.UpsertAgentResponse{Agent: a}, nil
}

// DeleteAgent deletes an agent (admin). Threads using it fall back to the
// default agent.
func (s *Server) DeleteAgent(ctx context.Context, req *runtimev1.DeleteAgentRequest) (*runtimev1.DeleteAgentResponse, error) {
	if err := s.store.DeleteAgent(ctx, req.GetName()); errors.Is(err, runtimestore.ErrNotFound) {
		return nil, statusErr(codes.NotFound, runtimev1.ErrorReason_ERROR_REASON_AGENT_NOT_FOUND, "agent %q not found", req.GetName())
	} else if err != nil {
		return nil, storeErr(err)
	}
	return &runtimev1.DeleteAgentResponse{}, nil
}

package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

// Owned agents (docs/decisions/0152-owned-agents.md): setup_agent creates
// an agent owned by its caller; only the owner sees it, starts threads with
// it and changes it with update_agent. Agents written with UpsertAgent are
// shared (no owner) and are never changed from a thread.

// agentViolation is why an agent does not validate (field relative to the agent).
type agentViolation struct{ field, why, msg string }

// agentProblem validates an agent as UpsertAgent does; nil when valid.
func agentProblem(a *runtimev1.Agent) *agentViolation {
	if !agentNameRE.MatchString(a.GetName()) {
		return &agentViolation{"name", grpcx.ViolationInvalid, fmt.Sprintf("%q must be 1..64 of [a-z0-9-]", a.GetName())}
	}
	if len(a.GetDescription()) > 1024 {
		return &agentViolation{"description", grpcx.ViolationTooLong, "longer than 1024 characters"}
	}
	if len(a.GetSystemPrompt()) > 64<<10 {
		return &agentViolation{"system_prompt", grpcx.ViolationTooLong, "longer than 64 KiB"}
	}
	if len(a.GetModel()) > 256 {
		return &agentViolation{"model", grpcx.ViolationTooLong, "longer than 256 characters"}
	}
	for i, sv := range a.GetToolSearch().GetExemptServers() {
		if sv == "" {
			return &agentViolation{fmt.Sprintf("tool_search.exempt_servers[%d]", i), grpcx.ViolationRequired, "must not be empty"}
		}
	}
	for _, l := range []struct {
		field string
		vals  []string
	}{{"tool_groups", a.GetToolGroups().GetValues()}, {"skills", a.GetSkills().GetValues()}} {
		if len(l.vals) > 256 {
			return &agentViolation{l.field + ".values", grpcx.ViolationTooMany, "more than 256 entries"}
		}
		for i, g := range l.vals {
			if g == "" {
				return &agentViolation{fmt.Sprintf("%s.values[%d]", l.field, i), grpcx.ViolationRequired, "must not be empty"}
			}
		}
	}
	return nil
}

// toolField names an agent field by the tools' argument names
// ("system_prompt" is "soul", "skills.values[0]" is "skills[0]").
func toolField(f string) string {
	f = strings.Replace(f, ".values", "", 1)
	if f == "system_prompt" {
		return "soul"
	}
	return f
}

// visibleTo reports whether agent a may be seen and used by the caller of
// ctx: shared agents by everyone, owned ones by their owner (and service
// callers, which act for users and see what they are told).
func visibleTo(ctx context.Context, a *runtimev1.Agent) bool {
	if a.GetOwner() == nil {
		return true
	}
	return runtimeassembly.OwnedBy(a, principalOf(ctx)) || (auth.IsService(ctx) && !actingFor(ctx))
}

func actingFor(ctx context.Context) bool {
	id, ok := auth.Caller(ctx)
	return ok && id.ActingFor != nil
}

// maxOwnedAgents bounds the agents one user creates with setup_agent (the
// agent namespace is shared by every tenant).
const maxOwnedAgents = 50

// ownedAgents implements runtimetools.Agents over the agent store. mu
// serialises create-if-absent and read-modify-write in this process.
type ownedAgents struct {
	mu       sync.Mutex
	store    runtimestore.Store
	now      func() time.Time
	reserved func(name string) bool
}

var _ runtimetools.Agents = (*ownedAgents)(nil)

func agentInvalid(v *agentViolation) error {
	return &runtimetools.AgentInvalidError{Field: toolField(v.field), Reason: v.msg}
}

// UpdateOwned implements runtimetools.Agents.
func (o *ownedAgents) UpdateOwned(ctx context.Context, p *typev1.Principal, name string, ch runtimetools.AgentChange) (*runtimev1.Agent, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, err := o.store.GetAgent(ctx, name)
	if errors.Is(err, runtimestore.ErrNotFound) {
		return nil, runtimetools.ErrNotOwner
	}
	if err != nil {
		return nil, err
	}
	if !runtimeassembly.OwnedBy(a, p) {
		return nil, runtimetools.ErrNotOwner
	}
	if ch.Soul != nil {
		a.SystemPrompt = *ch.Soul
	}
	if ch.Description != nil {
		a.Description = *ch.Description
	}
	if ch.Model != nil {
		a.Model = *ch.Model
	}
	if ch.Skills != nil {
		a.Skills = &typev1.StringList{Values: *ch.Skills}
	}
	if ch.ToolGroups != nil {
		a.ToolGroups = &typev1.StringList{Values: *ch.ToolGroups}
	}
	if v := agentProblem(a); v != nil {
		return nil, agentInvalid(v)
	}
	a.UpdateTime = timestamppb.New(o.now())
	if err := o.store.PutAgent(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

// CreateOwned implements runtimetools.Agents.
func (o *ownedAgents) CreateOwned(ctx context.Context, p *typev1.Principal, a *runtimev1.Agent) (*runtimev1.Agent, error) {
	if p.GetSubject() == "" {
		return nil, runtimetools.ErrNotOwner
	}
	a = proto.Clone(a).(*runtimev1.Agent)
	if v := agentProblem(a); v != nil {
		return nil, agentInvalid(v)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reserved(a.GetName()) {
		return nil, runtimetools.ErrAgentExists
	}
	if _, err := o.store.GetAgent(ctx, a.GetName()); err == nil {
		return nil, runtimetools.ErrAgentExists
	} else if !errors.Is(err, runtimestore.ErrNotFound) {
		return nil, err
	}
	all, err := o.store.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, x := range all {
		if runtimeassembly.OwnedBy(x, p) {
			n++
		}
	}
	if n >= maxOwnedAgents {
		return nil, &runtimetools.AgentInvalidError{Field: "name", Reason: fmt.Sprintf("you own %d agents already, the most one user may create", n)}
	}
	a.Owner = &runtimev1.AgentOwner{Tenant: auth.TenantOf(p), Subject: p.GetSubject()}
	a.UpdateTime = timestamppb.New(o.now())
	if err := o.store.PutAgent(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

package runtimechain

import (
	"context"
	"strings"
)

// SkillPolicy refuses tools the thread's active skills do not allow
// (docs/deerflow.md §4.9). The policy source is the call's View: the
// assembly resolved it with skills ResolveSkillPolicy (fail closed to the
// always-available names).
type SkillPolicy struct{}

// Name implements Step.
func (SkillPolicy) Name() string { return "skill_policy" }

// Description implements Step.
func (SkillPolicy) Description() string {
	return "tools outside the active skills' allowed-tools are refused (skill_policy.denied)"
}

// Run implements Step.
func (SkillPolicy) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	if !c.View.Allows(c.Name) {
		return PolicyErr("skill_policy.denied", "Error: Tool '%s' is not allowed by the active skill policy (%s). Use one of the tools the skill allows.", c.Name, strings.Join(c.View.Policy.Skills, ", ")), nil
	}
	return next(ctx, c)
}

package runtimechain

import (
	"context"
	"fmt"
	"sort"
	"strings"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// ToolLookup refuses a name that is not in the thread's assembly
// (POLICY tool.unknown), naming the tools that are bound.
type ToolLookup struct{}

// Name implements Step.
func (ToolLookup) Name() string { return "tool_lookup" }

// Description implements Step.
func (ToolLookup) Description() string {
	return "a name outside the thread's assembly is refused (tool.unknown) with the bound tools listed; a promoted tool absent right now gets tool.server_unavailable (retry)"
}

// Run implements Step.
func (ToolLookup) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	if c.Tool() == nil && !c.IsToolSearch() {
		if c.View != nil && c.View.PromotedUnavailable(c.Name) {
			return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_RUNTIME, Reason: ReasonServerUnavailable, Text: fmt.Sprintf(
				"Error: Tool '%s' is temporarily unavailable: its server is not connected right now, so it was not run. It stays loaded; retry the call in a moment.", c.Name)}, nil
		}
		return PolicyErr("tool.unknown", "Error: Tool '%s' is not available in this thread. Available tools: %s.", c.Name, availableList(c)), nil
	}
	return next(ctx, c)
}

func availableList(c *Call) string {
	bound, _ := c.View.BoundTools()
	names := make([]string, 0, len(bound))
	for _, t := range bound {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	if len(names) > 30 {
		return strings.Join(names[:30], ", ") + fmt.Sprintf(" and %d more", len(names)-30)
	}
	return strings.Join(names, ", ")
}

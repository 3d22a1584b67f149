package runtimechain

import (
	"context"
	"fmt"
	"sort"
	"strings"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// ToolLookup refuses a name that is not in the thread's assembly
// (POLICY tool.unknown), naming the tools that are bound.
type ToolLookup struct{}

// Name implements Step.
func (ToolLookup) Name() string { return "tool_lookup" }

// Description implements Step.
func (ToolLookup) Description() string {
	return "a name outside the thread's assembly is refused (tool.unknown) with the bound tools listed; a promoted tool held for review gets tool.pending_review, one absent right now tool.server_unavailable (retry)"
}

// Run implements Step.
func (ToolLookup) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	if c.Tool() == nil && !c.IsToolSearch() {
		if c.View != nil && c.View.PromotedUnavailable(c.Name) {
			if st, held := c.View.Base.Held[c.Name]; held {
				// The tool's server is pinned and its definition is not the
				// approved one (docs/architecture.md §7.1).
				why := "its definition changed since it was approved and waits for an administrator's review"
				switch st {
				case catalogv1.ToolState_TOOL_STATE_PENDING:
					why = "it waits for an administrator's review"
				case catalogv1.ToolState_TOOL_STATE_REJECTED:
					why = "an administrator rejected its current definition"
				}
				return PolicyErr(ReasonPendingReview, "Error: Tool '%s' was not run: %s (state %s). It stays loaded and can be called once an approved definition is served.",
					c.Name, why, strings.TrimPrefix(st.String(), "TOOL_STATE_")), nil
			}
			return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_RUNTIME, Reason: ReasonServerUnavailable, Text: fmt.Sprintf(
				"Error: Tool '%s' is temporarily unavailable: its server is not connected right now, so it was not run. It stays loaded; retry the call in a moment.", c.Name)}, nil
		}
		return PolicyErr("tool.unknown", "Error: Tool '%s' is not available in this thread. Available tools: %s.", c.Name, availableList(c)), nil
	}
	return next(ctx, c)
}

// ReasonPendingReview refuses a promoted tool whose definition is held for
// an admin's review (catalog state PENDING, CHANGED or REJECTED).
const ReasonPendingReview = "tool.pending_review"

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

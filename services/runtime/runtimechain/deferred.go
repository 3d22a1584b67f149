package runtimechain

import "context"

// DeferredFilter refuses a deferred tool that has not been promoted with its
// current definition yet, telling the model to call tool_search first
// (docs/deerflow.md §2.5).
type DeferredFilter struct{}

// Name implements Step.
func (DeferredFilter) Name() string { return "deferred_filter" }

// Description implements Step.
func (DeferredFilter) Description() string {
	return "a deferred tool not promoted with its current definition is refused (deferred.not_promoted): call tool_search first"
}

// Run implements Step.
func (DeferredFilter) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	if c.View.Hidden(c.Name) {
		return PolicyErr("deferred.not_promoted", "Error: Tool '%s' is deferred and has not been loaded yet, so it was not run. Call tool_search first (for example with the query \"select:%s\"), then retry this call.", c.Name, c.Name), nil
	}
	return next(ctx, c)
}

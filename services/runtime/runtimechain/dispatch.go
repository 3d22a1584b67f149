package runtimechain

import "context"

// Dispatch runs the tool: built-in, config tool, or catalog CallTool. It
// is the innermost step and never calls next; the ToolCaller bounds
// local tools by runtime.tool_call_timeout.
type Dispatch struct{ Tools ToolCaller }

// Name implements Step.
func (Dispatch) Name() string { return "dispatch" }

// Description implements Step.
func (Dispatch) Description() string {
	return "runs the tool: built-in, config tool, or catalog CallTool (MCP, streaming notifications when asked)"
}

// Run implements Step.
func (s Dispatch) Run(ctx context.Context, c *Call, _ Next) (*Outcome, error) {
	return s.Tools.CallTool(ctx, c)
}

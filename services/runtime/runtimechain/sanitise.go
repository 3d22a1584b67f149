package runtimechain

import (
	"context"

	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
)

// ResultSanitisation neutralises framework tags in results of remote
// tools (MCP) and of skill reviews; local tool results are left as they
// are (docs/deerflow.md §6.2 ToolResultSanitization, widened to every MCP
// tool). It applies to every result of an assembled call.
type ResultSanitisation struct{}

// Name implements Step.
func (ResultSanitisation) Name() string { return "result_sanitisation" }

// Description implements Step.
func (ResultSanitisation) Description() string {
	return "framework tags in MCP, ACP and skill-review results are neutralised"
}

// Run implements Step.
func (ResultSanitisation) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	o, err := next(ctx, c)
	if err != nil || o == nil {
		return o, err
	}
	t := c.Tool()
	if t == nil || !(t.Source == runtimeassembly.SourceMCP || t.Source == runtimeassembly.SourceACP || t.Use == runtimeassembly.ReviewSkillPackage) {
		return o, nil
	}
	o.Text = runtimeassembly.Neutralise(o.Text)
	for _, b := range o.Content {
		if b.GetText() != "" {
			b.Text = runtimeassembly.Neutralise(b.GetText())
		}
	}
	return o, nil
}

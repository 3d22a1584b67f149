package runtimechain

import (
	"context"

	"google.golang.org/grpc/status"
)

// Assembly builds the thread's tool view for the call (the same assembly
// as AssembleTools). Without an assembly nothing is known to be allowed:
// a failure refuses the call (POLICY assembly.failed, fail closed).
type Assembly struct{ Views Views }

// Name implements Step.
func (Assembly) Name() string { return "assembly" }

// Description implements Step.
func (Assembly) Description() string {
	return "the thread's tool view (sources, groups, authz listing, deferral, promotions, skill policy); failure refuses (fail closed)"
}

// Run implements Step.
func (s Assembly) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	b, err := s.Views.Build(ctx, c.Thread)
	if err != nil {
		return PolicyErr("assembly.failed", "Error: Tool '%s' cannot run now: %s. %s", c.Name, TruncDetail(status.Convert(err).Message()), RecoverySentence), nil
	}
	c.View = s.Views.View(ctx, c.Thread, b)
	return next(ctx, c)
}

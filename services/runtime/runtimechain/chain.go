// Package runtimechain is the runtime's tool-call chain
// (docs/architecture.md §3.2): an ordered list of steps, built once at
// start, that every tool call runs through — ExecuteToolCall,
// ExecuteToolCallStream, the agent loop (runtimeloop, through the
// runtime's executor) and the MCP front door (runtimemcp, a client of
// ExecuteToolCallStream).
//
// A step is a small type holding only the narrow interfaces it needs. It
// receives the call and the rest of the chain (next); it may answer
// without calling next (a refusal), call next and post-process its
// outcome (the output budget), or wrap next (a lock, error
// normalisation). Standard lists the steps in force, outer → inner; adding
// a step is one file with its type and one line in Standard
// (docs/decisions/0010-tool-call-chain.md).
package runtimechain

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Next runs the rest of the chain for a call.
type Next func(ctx context.Context, c *Call) (*Outcome, error)

// Step is one link of the chain.
type Step interface {
	// Name is the step's stable identifier (printed by `toolplane debug chain`).
	Name() string
	// Description is one line saying what the step does.
	Description() string
	// Run handles the call: answer, or call next (once at most).
	Run(ctx context.Context, c *Call, next Next) (*Outcome, error)
}

// Chain is an ordered list of steps, outer → inner. It is immutable and
// safe for concurrent use once built.
type Chain struct {
	steps []Step
	run   Next
}

// New builds a chain of steps, outer → inner. Names must be unique and
// non-empty; the innermost step must answer every call (its next fails).
func New(steps ...Step) (*Chain, error) {
	seen := map[string]bool{}
	for i, s := range steps {
		if s == nil || s.Name() == "" {
			return nil, fmt.Errorf("runtimechain: step %d has no name", i)
		}
		if seen[s.Name()] {
			return nil, fmt.Errorf("runtimechain: step %q listed twice", s.Name())
		}
		seen[s.Name()] = true
	}
	c := &Chain{steps: append([]Step(nil), steps...)}
	run := Next(func(context.Context, *Call) (*Outcome, error) {
		return nil, errors.New("no step of the tool-call chain answered the call")
	})
	for i := len(c.steps) - 1; i >= 0; i-- {
		s, inner := c.steps[i], run
		run = func(ctx context.Context, call *Call) (*Outcome, error) { return s.Run(ctx, call, inner) }
	}
	c.run = run
	return c, nil
}

// Steps returns the steps in order, outer → inner.
func (c *Chain) Steps() []Step { return append([]Step(nil), c.steps...) }

// Run runs a call through the chain. Tool failures are outcomes; an error
// that escapes every step (none does in the standard chain, whose error
// normalisation step sits outside the steps that fail) becomes a RUNTIME
// outcome too, so a call always has a result.
func (c *Chain) Run(ctx context.Context, call *Call) *Outcome {
	o, err := c.run(ctx, call)
	if err != nil {
		return normalise(call, err)
	}
	if o == nil {
		return normalise(call, errors.New("the tool-call chain produced no result"))
	}
	return o
}

// Describe renders the steps one per line, "N. name — description".
func (c *Chain) Describe() string {
	var sb strings.Builder
	for i, s := range c.steps {
		fmt.Fprintf(&sb, "%2d. %-20s %s\n", i+1, s.Name(), s.Description())
	}
	return sb.String()
}

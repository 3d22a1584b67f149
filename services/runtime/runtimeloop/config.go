package runtimeloop

import (
	"fmt"
	"time"
)

// Limits bound one turn. Zero values mean "use the engine default"; see
// Config.Limits for the defaults.
type Limits struct {
	// MaxModelCalls is the maximum number of model calls per turn (>= 1).
	MaxModelCalls int
	// TokenBudget is the maximum total tokens (input + output, summed over
	// the turn's model calls); 0 = no budget (docs/deerflow.md §6.2
	// TokenBudget is off by default).
	TokenBudget int64
	// Deadline is the wall-clock limit of the turn (model and tool time).
	Deadline time.Duration
}

// LoopDetection configures the one loop detector (docs/deerflow.md §6.2
// LoopDetection; defaults warn 3, hard 5, window 20, per-tool warn 30 / hard 50).
type LoopDetection struct {
	// Disabled turns the detector off.
	Disabled bool
	// WarnThreshold: identical tool-call sets seen this many times in the
	// window queue a [LOOP DETECTED] warning for the next model call.
	WarnThreshold int
	// HardLimit: seen this many times, the tool calls are stripped and the
	// turn stops with reason loop_capped.
	HardLimit int
	// Window is the number of most recent tool-call sets considered.
	Window int
	// ToolWarn / ToolHard bound the calls of one tool name in a turn
	// regardless of arguments.
	ToolWarn, ToolHard int
}

// SubagentType is one subagent type the task tool can run (docs/deerflow.md §1.4).
type SubagentType struct {
	// Name is the subagent_type argument value.
	Name string
	// Description is shown in the task tool's description.
	Description string
	// SystemPrompt is the subagent's prompt.
	SystemPrompt string
	// Model overrides the parent's model (still authorized with model:use).
	Model string
	// Tools is an allowlist of tool names (nil = all).
	Tools []string
	// DisallowedTools is a denylist (nil = ["task"]); task is always denied.
	DisallowedTools []string
	// Skills is the subagent's skills allowlist (nil = the parent's).
	Skills []string
}

// Subagents configures the task tool (docs/deerflow.md §6.2 SubagentLimit).
type Subagents struct {
	// MaxConcurrent task calls kept from one model response (default 3, clamped 1..4).
	MaxConcurrent int
	// MaxTotal task calls per run (default 6, clamped 1..50).
	MaxTotal int
	// Limits of a child turn (defaults: 25 model calls, 1,000,000 tokens,
	// the parent's remaining deadline).
	Limits Limits
	// Types are the subagent types; empty = one built-in "general-purpose".
	Types []SubagentType
}

// Config configures the Engine. Zero values are replaced by defaults in SetDefaults.
type Config struct {
	// Limits are the default per-turn limits (25 model calls, no token
	// budget, 10 minutes).
	Limits Limits
	// TokenBudgetWarn is the fraction of the budget at which a warning is
	// injected (default 0.8).
	TokenBudgetWarn float64
	// ParallelToolCalls bounds the tool calls of one model response run at
	// once (default 4); results are appended in call order regardless.
	ParallelToolCalls int
	// LoopDetection configures the loop detector.
	LoopDetection LoopDetection
	// Subagents configures the task tool.
	Subagents Subagents
	// DefaultModel is the model used when neither the request nor the
	// agent names one (empty = the first model of Models.Names()).
	DefaultModel string
	// DisableInputSanitization turns off the escaping of framework tags in
	// user text (on by default, docs/deerflow.md §6.2 InputSanitization).
	DisableInputSanitization bool
}

// SetDefaults fills zero values.
func (c *Config) SetDefaults() {
	if c.Limits.MaxModelCalls == 0 {
		c.Limits.MaxModelCalls = 25
	}
	if c.Limits.Deadline == 0 {
		c.Limits.Deadline = 10 * time.Minute
	}
	if c.TokenBudgetWarn == 0 {
		c.TokenBudgetWarn = 0.8
	}
	if c.ParallelToolCalls == 0 {
		c.ParallelToolCalls = 4
	}
	ld := &c.LoopDetection
	if ld.WarnThreshold == 0 {
		ld.WarnThreshold = 3
	}
	if ld.HardLimit == 0 {
		ld.HardLimit = 5
	}
	if ld.Window == 0 {
		ld.Window = 20
	}
	if ld.ToolWarn == 0 {
		ld.ToolWarn = 30
	}
	if ld.ToolHard == 0 {
		ld.ToolHard = 50
	}
	s := &c.Subagents
	if s.MaxConcurrent == 0 {
		s.MaxConcurrent = 3
	}
	s.MaxConcurrent = clamp(s.MaxConcurrent, 1, 4)
	if s.MaxTotal == 0 {
		s.MaxTotal = 6
	}
	s.MaxTotal = clamp(s.MaxTotal, 1, 50)
	if s.Limits.MaxModelCalls == 0 {
		s.Limits.MaxModelCalls = 25
	}
	if s.Limits.TokenBudget == 0 {
		s.Limits.TokenBudget = 1_000_000
	}
	if len(s.Types) == 0 {
		s.Types = []SubagentType{DefaultSubagent()}
	}
}

// DefaultSubagent is the built-in general-purpose subagent: every parent
// tool except task, ask_clarification and present_files (docs/deerflow.md §1.4).
func DefaultSubagent() SubagentType {
	return SubagentType{
		Name:            "general-purpose",
		Description:     "A general-purpose agent for self-contained research or multi-step work; it has the parent's tools except task, ask_clarification and present_files.",
		SystemPrompt:    "You are a subagent working on one delegated task. Work autonomously with the tools you have, then reply with a concise, complete result for the agent that delegated the task. You cannot ask the user questions.",
		DisallowedTools: []string{ToolTask, ToolAskClarification, "present_files"},
	}
}

// Validate checks the configuration; errors name the field.
func (c *Config) Validate() error {
	if c.Limits.MaxModelCalls < 1 {
		return fmt.Errorf("limits.max_model_calls: must be >= 1")
	}
	if c.Limits.TokenBudget < 0 {
		return fmt.Errorf("limits.token_budget: must not be negative")
	}
	if c.Limits.TokenBudget > 0 && c.Limits.TokenBudget < 1000 {
		return fmt.Errorf("limits.token_budget: must be 0 (off) or >= 1000 (docs/deerflow.md §6.2)")
	}
	if c.Limits.Deadline < 0 {
		return fmt.Errorf("limits.deadline: must not be negative")
	}
	if c.TokenBudgetWarn <= 0 || c.TokenBudgetWarn > 1 {
		return fmt.Errorf("token_budget_warn: %v is outside (0, 1]", c.TokenBudgetWarn)
	}
	if c.ParallelToolCalls < 1 {
		return fmt.Errorf("parallel_tool_calls: must be >= 1")
	}
	ld := c.LoopDetection
	if ld.WarnThreshold < 1 || ld.HardLimit <= ld.WarnThreshold || ld.Window < ld.HardLimit {
		return fmt.Errorf("loop_detection: need 1 <= warn_threshold < hard_limit <= window (got %d, %d, %d)", ld.WarnThreshold, ld.HardLimit, ld.Window)
	}
	if ld.ToolWarn < 1 || ld.ToolHard <= ld.ToolWarn {
		return fmt.Errorf("loop_detection: need 1 <= tool_warn < tool_hard (got %d, %d)", ld.ToolWarn, ld.ToolHard)
	}
	seen := map[string]bool{}
	for i, t := range c.Subagents.Types {
		if t.Name == "" {
			return fmt.Errorf("subagents.types[%d].name: must not be empty", i)
		}
		if seen[t.Name] {
			return fmt.Errorf("subagents.types[%d].name: duplicate %q", i, t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

func clamp(v, lo, hi int) int {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

// merge returns l with zero fields taken from def.
func (l Limits) merge(def Limits) Limits {
	if l.MaxModelCalls <= 0 {
		l.MaxModelCalls = def.MaxModelCalls
	}
	if l.TokenBudget <= 0 {
		l.TokenBudget = def.TokenBudget
	}
	if l.Deadline <= 0 {
		l.Deadline = def.Deadline
	}
	return l
}

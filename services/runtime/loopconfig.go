package runtime

import (
	"fmt"
	"net/url"
	"time"

	"github.com/toolplane/toolplane/services/runtime/runtimeloop"
)

// LoopConfig is `runtime.loop`, the agent loop of RunTurn (docs/architecture.md §3.3,
// docs/architecture.md §3.3). Defaults follow docs/deerflow.md §6.2.
type LoopConfig struct {
	// Models are the OpenAI-compatible chat models the loop may use; an
	// agent's `model` and RunTurn's `model` name one of them (authorized
	// with model:use, docs/deerflow.md §3.6). Empty: RunTurn fails with
	// FAILED_PRECONDITION naming this key.
	Models []ModelConfig `yaml:"models"`
	// DefaultModel is used when neither the request nor the agent names a
	// model (default: the first of models).
	DefaultModel string `yaml:"default_model"`
	// MaxModelCalls bounds the model calls of one turn (default 25).
	MaxModelCalls int `yaml:"max_model_calls"`
	// TokenBudget bounds the tokens (input + output) of one turn; 0 = no
	// budget (default 0, docs/deerflow.md §6.2 TokenBudget is off by
	// default; otherwise >= 1000).
	TokenBudget int64 `yaml:"token_budget"`
	// TokenBudgetWarn is the fraction of the budget at which the model is
	// warned (default 0.8).
	TokenBudgetWarn float64 `yaml:"token_budget_warn"`
	// Deadline is the wall-clock limit of one turn (default 10m).
	Deadline time.Duration `yaml:"deadline"`
	// ParallelToolCalls bounds the tool calls of one response run at once
	// when the executor leaves storing to the loop (default 4).
	ParallelToolCalls int `yaml:"parallel_tool_calls"`
	// InputSanitization escapes framework tags in user text sent to the
	// model (default true, docs/deerflow.md §6.2 InputSanitization).
	InputSanitization *bool `yaml:"input_sanitization"`
	// LoopDetection is the one loop detector.
	LoopDetection LoopDetectionConfig `yaml:"loop_detection"`
	// Subagents configures the task tool.
	Subagents SubagentsConfig `yaml:"subagents"`
}

// Model providers of runtime.loop.models[].provider.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	// ProviderOpenAIResponses is the OpenAI Responses API
	// (docs/decisions/0092-model-adapters.md).
	ProviderOpenAIResponses = "openai_responses"
)

// ModelConfig is one `runtime.loop.models` entry.
type ModelConfig struct {
	// Name is the model's name in Toolplane (authz target of model:use,
	// agent.model); required, unique.
	Name string `yaml:"name"`
	// Model is the provider's model id (default: name).
	Model string `yaml:"model"`
	// Provider is the API the model is reached with: "openai" (an
	// OpenAI-compatible Chat Completions endpoint; the default),
	// "openai_responses" (the OpenAI Responses API, not streamed) or
	// "anthropic" (the Anthropic Messages API). It decides the profile
	// the tools are bound in (docs/architecture.md §3.1, §3.3).
	Provider string `yaml:"provider"`
	// BaseURL is the API root, e.g. "https://api.openai.com/v1" or
	// "https://api.anthropic.com" (required).
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the API key; empty
	// sends no key (local servers). The key itself is never in the config.
	APIKeyEnv string `yaml:"api_key_env"`
	// Stream requests server-sent events (text deltas as they arrive;
	// default true).
	Stream *bool `yaml:"stream"`
	// MaxRetries is the client's retry count on 429, 5xx and connection
	// errors (default 2; openai-go's backoff).
	MaxRetries *int `yaml:"max_retries"`
	// Timeout bounds one model request (default 2m).
	Timeout time.Duration `yaml:"timeout"`
	// MaxTokens caps completion tokens per request (0 = provider default).
	MaxTokens int64 `yaml:"max_tokens"`
	// Temperature, when set, is sent with each request.
	Temperature *float64 `yaml:"temperature"`
	// SupportsVision says the model accepts image input: turns on this
	// model bind view_image and images it viewed are sent as image parts
	// (docs/deerflow.md §1.6; default false).
	SupportsVision bool `yaml:"supports_vision"`
}

// LoopDetectionConfig is `runtime.loop.loop_detection` (docs/deerflow.md §6.2 LoopDetection).
type LoopDetectionConfig struct {
	// Enabled turns the detector on (default true).
	Enabled *bool `yaml:"enabled"`
	// WarnThreshold: identical tool-call sets in the window before a warning (default 3).
	WarnThreshold int `yaml:"warn_threshold"`
	// HardLimit: identical tool-call sets before the turn is stopped (default 5).
	HardLimit int `yaml:"hard_limit"`
	// Window is the number of recent tool-call sets compared (default 20).
	Window int `yaml:"window"`
	// ToolWarn: calls of one tool name in a turn before a warning (default 30).
	ToolWarn int `yaml:"tool_warn"`
	// ToolHard: calls of one tool name in a turn before the stop (default 50).
	ToolHard int `yaml:"tool_hard"`
}

// SubagentsConfig is `runtime.loop.subagents` (docs/deerflow.md §1.4, §6.2 SubagentLimit).
type SubagentsConfig struct {
	// MaxConcurrent task calls kept from one response (default 3, clamped 1..4).
	MaxConcurrent int `yaml:"max_concurrent"`
	// MaxTotal task calls per run (default 6, clamped 1..50).
	MaxTotal int `yaml:"max_total"`
	// MaxModelCalls of a subagent's turn (default 25).
	MaxModelCalls int `yaml:"max_model_calls"`
	// TokenBudget of a subagent's turn (default 1000000).
	TokenBudget int64 `yaml:"token_budget"`
	// Types are the subagent types (default: one "general-purpose" type
	// denied task, ask_clarification and present_files).
	Types []SubagentTypeConfig `yaml:"types"`
}

// SubagentTypeConfig is one subagent type.
type SubagentTypeConfig struct {
	// Name is the task tool's subagent_type value.
	Name string `yaml:"name"`
	// Description tells the lead model when to use it.
	Description string `yaml:"description"`
	// SystemPrompt is the subagent's prompt.
	SystemPrompt string `yaml:"system_prompt"`
	// Model overrides the parent's model.
	Model string `yaml:"model"`
	// Tools is an allowlist of tool names (absent = all).
	Tools []string `yaml:"tools"`
	// DisallowedTools is a denylist (absent = [task]; task is always denied).
	DisallowedTools []string `yaml:"disallowed_tools"`
	// Skills is the skills allowlist, intersected with the parent agent's (absent = the parent's).
	Skills []string `yaml:"skills"`
}

// SetDefaults fills unset keys.
func (c *LoopConfig) SetDefaults() {
	if c.MaxModelCalls == 0 {
		c.MaxModelCalls = 25
	}
	if c.TokenBudgetWarn == 0 {
		c.TokenBudgetWarn = 0.8
	}
	if c.Deadline == 0 {
		c.Deadline = 10 * time.Minute
	}
	if c.ParallelToolCalls == 0 {
		c.ParallelToolCalls = 4
	}
	if c.InputSanitization == nil {
		t := true
		c.InputSanitization = &t
	}
	ld := &c.LoopDetection
	if ld.Enabled == nil {
		t := true
		ld.Enabled = &t
	}
	setInt(&ld.WarnThreshold, 3)
	setInt(&ld.HardLimit, 5)
	setInt(&ld.Window, 20)
	setInt(&ld.ToolWarn, 30)
	setInt(&ld.ToolHard, 50)
	sa := &c.Subagents
	setInt(&sa.MaxConcurrent, 3)
	setInt(&sa.MaxTotal, 6)
	setInt(&sa.MaxModelCalls, 25)
	if sa.TokenBudget == 0 {
		sa.TokenBudget = 1_000_000
	}
	for i := range c.Models {
		m := &c.Models[i]
		if m.Model == "" {
			m.Model = m.Name
		}
		if m.Provider == "" {
			m.Provider = ProviderOpenAI
		}
		if m.Stream == nil {
			t := true
			m.Stream = &t
		}
		if m.MaxRetries == nil {
			n := 2
			m.MaxRetries = &n
		}
		if m.Timeout == 0 {
			m.Timeout = 2 * time.Minute
		}
	}
}

func setInt(p *int, def int) {
	if *p == 0 {
		*p = def
	}
}

// Validate checks the section; errors name the key path.
func (c *LoopConfig) Validate() error {
	seen := map[string]bool{}
	for i, m := range c.Models {
		key := fmt.Sprintf("runtime.loop.models[%d]", i)
		if m.Name == "" {
			return fmt.Errorf("%s.name: must not be empty", key)
		}
		if seen[m.Name] {
			return fmt.Errorf("%s.name: duplicate model %q", key, m.Name)
		}
		seen[m.Name] = true
		if m.Provider != ProviderOpenAI && m.Provider != ProviderAnthropic && m.Provider != ProviderOpenAIResponses {
			return fmt.Errorf("%s.provider: %q must be %q, %q or %q", key, m.Provider, ProviderOpenAI, ProviderOpenAIResponses, ProviderAnthropic)
		}
		if m.Provider == ProviderAnthropic && m.Temperature != nil {
			return fmt.Errorf("%s.temperature: not supported with provider %q", key, ProviderAnthropic)
		}
		u, err := url.Parse(m.BaseURL)
		if m.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.base_url: %q must be an http(s) URL", key, m.BaseURL)
		}
		if m.MaxRetries != nil && *m.MaxRetries < 0 {
			return fmt.Errorf("%s.max_retries: must not be negative", key)
		}
		if m.Timeout < 0 || m.MaxTokens < 0 {
			return fmt.Errorf("%s: timeout and max_tokens must not be negative", key)
		}
	}
	if c.DefaultModel != "" && !seen[c.DefaultModel] {
		return fmt.Errorf("runtime.loop.default_model: %q is not one of runtime.loop.models", c.DefaultModel)
	}
	switch {
	case c.MaxModelCalls < 1:
		return fmt.Errorf("runtime.loop.max_model_calls: must be >= 1")
	case c.TokenBudget < 0 || (c.TokenBudget > 0 && c.TokenBudget < 1000):
		return fmt.Errorf("runtime.loop.token_budget: must be 0 (off) or >= 1000")
	case c.TokenBudgetWarn <= 0 || c.TokenBudgetWarn > 1:
		return fmt.Errorf("runtime.loop.token_budget_warn: %v is outside (0, 1]", c.TokenBudgetWarn)
	case c.Deadline < 0:
		return fmt.Errorf("runtime.loop.deadline: must not be negative")
	case c.ParallelToolCalls < 1:
		return fmt.Errorf("runtime.loop.parallel_tool_calls: must be >= 1")
	}
	if ld := c.LoopDetection; ld.WarnThreshold < 1 || ld.HardLimit <= ld.WarnThreshold || ld.Window < ld.HardLimit || ld.ToolWarn < 1 || ld.ToolHard <= ld.ToolWarn {
		return fmt.Errorf("runtime.loop.loop_detection: need 1 <= warn_threshold < hard_limit <= window and 1 <= tool_warn < tool_hard")
	}
	for i, t := range c.Subagents.Types {
		if t.Name == "" {
			return fmt.Errorf("runtime.loop.subagents.types[%d].name: must not be empty", i)
		}
	}
	ec := c.engineConfig()
	if err := ec.Validate(); err != nil {
		return fmt.Errorf("runtime.loop: %w", err)
	}
	if c.Subagents.TokenBudget < 0 || c.Subagents.MaxModelCalls < 0 {
		return fmt.Errorf("runtime.loop.subagents: max_model_calls and token_budget must not be negative")
	}
	return nil
}

// engineConfig translates the section for runtimeloop.
func (c *LoopConfig) engineConfig() runtimeloop.Config {
	ec := runtimeloop.Config{
		Limits:            runtimeloop.Limits{MaxModelCalls: c.MaxModelCalls, TokenBudget: c.TokenBudget, Deadline: c.Deadline},
		TokenBudgetWarn:   c.TokenBudgetWarn,
		ParallelToolCalls: c.ParallelToolCalls,
		DefaultModel:      c.DefaultModel,
		LoopDetection: runtimeloop.LoopDetection{
			Disabled: c.LoopDetection.Enabled != nil && !*c.LoopDetection.Enabled, WarnThreshold: c.LoopDetection.WarnThreshold,
			HardLimit: c.LoopDetection.HardLimit, Window: c.LoopDetection.Window, ToolWarn: c.LoopDetection.ToolWarn, ToolHard: c.LoopDetection.ToolHard,
		},
		Subagents: runtimeloop.Subagents{
			MaxConcurrent: c.Subagents.MaxConcurrent, MaxTotal: c.Subagents.MaxTotal,
			Limits: runtimeloop.Limits{MaxModelCalls: c.Subagents.MaxModelCalls, TokenBudget: c.Subagents.TokenBudget},
		},
		DisableInputSanitization: c.InputSanitization != nil && !*c.InputSanitization,
	}
	for _, t := range c.Subagents.Types {
		ec.Subagents.Types = append(ec.Subagents.Types, runtimeloop.SubagentType{
			Name: t.Name, Description: t.Description, SystemPrompt: t.SystemPrompt, Model: t.Model,
			Tools: t.Tools, DisallowedTools: t.DisallowedTools, Skills: t.Skills,
		})
	}
	ec.SetDefaults()
	return ec
}

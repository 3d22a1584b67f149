package runtimeloop

import (
	"context"
	"sort"
	"strings"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// ModelRequest is one chat-completions request.
type ModelRequest struct {
	// System is the single coalesced system message.
	System string
	// Messages are the conversation after repair and sanitisation (no
	// system messages): user, assistant (with tool calls) and tool messages.
	Messages []*runtimev1.Message
	// Tools are the tools to bind, in the model's profile (ToolSchema.bound)
	// or the v0.1.0 forms.
	Tools []*runtimev1.ToolSchema
	// Deferred names the thread's deferred set (promoted tools included):
	// an adapter with provider-native tool search keeps them deferred.
	Deferred []string
	// Images are the viewed images to send with their view_image results,
	// by tool call id (vision models only; images.go).
	Images map[string]*Image
}

// ModelResponse is the model's answer.
type ModelResponse struct {
	// Content is the assistant text.
	Content string
	// ToolCalls are the tool calls; Arguments is nil and RawArguments set
	// when the model's argument text was not a JSON object.
	ToolCalls []*runtimev1.ToolCall
	// FinishReason is the provider's finish reason ("stop", "tool_calls",
	// "length", "content_filter", ...).
	FinishReason string
	// Usage is the token usage of this call (zero when the provider sent none).
	Usage *runtimev1.TokenUsage
}

// Model is one chat model.
type Model interface {
	// Complete runs one chat completion; onDelta receives text deltas as
	// they arrive (never called by non-streaming models except once with the
	// whole text).
	Complete(ctx context.Context, req *ModelRequest, onDelta func(string)) (*ModelResponse, error)
}

// Profiled is implemented by models whose provider has a tool profile
// (docs/architecture.md §3.1): assembly binds the tools in that form.
type Profiled interface {
	// ToolProfile is the provider's profile.
	ToolProfile() runtimev1.ToolProfile
}

// ProfileOf is m's tool profile; UNSPECIFIED (the v0.1.0 forms) for a model
// that names none.
func ProfileOf(m Model) runtimev1.ToolProfile {
	if p, ok := m.(Profiled); ok {
		return p.ToolProfile()
	}
	return runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED
}

// Models resolves model names (as authorized with model:use) to clients.
type Models interface {
	// Names lists the configured model names in configuration order.
	Names() []string
	// Model returns the client of a name.
	Model(name string) (Model, bool)
}

// StaticModels is a Models over a fixed list (tests and simple setups).
type StaticModels struct {
	// Order is the name order.
	Order []string
	// ByName maps names to clients.
	ByName map[string]Model
}

// Names returns Order.
func (s *StaticModels) Names() []string { return s.Order }

// Model returns ByName[name].
func (s *StaticModels) Model(name string) (Model, bool) { m, ok := s.ByName[name]; return m, ok }

// safetyFinish reports a safety-terminated response: OpenAI-compatible
// content_filter, Anthropic refusal, the Gemini SAFETY family
// (docs/deerflow.md §6.2 SafetyFinishReason).
func safetyFinish(reason string) bool {
	switch strings.ToLower(reason) {
	case "content_filter", "refusal", "safety", "prohibited_content", "blocklist", "spii", "image_safety":
		return true
	}
	return false
}

// stableToolOrder orders the tools of a request with native tool search so
// that a promotion does not reorder them (the tools array is the cached
// prompt prefix): the tools outside the deferred set keep their order, the
// deferred set's tools — promoted or not — follow in name order.
func stableToolOrder(tools []*runtimev1.ToolSchema, deferred []string) []*runtimev1.ToolSchema {
	set := make(map[string]bool, len(deferred))
	for _, n := range deferred {
		set[n] = true
	}
	var fixed, def []*runtimev1.ToolSchema
	for _, t := range tools {
		if set[t.GetName()] {
			def = append(def, t)
		} else {
			fixed = append(fixed, t)
		}
	}
	sort.SliceStable(def, func(i, j int) bool { return def[i].GetName() < def[j].GetName() })
	return append(fixed, def...)
}

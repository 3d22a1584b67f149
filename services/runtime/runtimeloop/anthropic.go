package runtimeloop

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// AnthropicSpec configures one Anthropic Messages API model.
type AnthropicSpec struct {
	// BaseURL is the API root, e.g. "https://api.anthropic.com/" (required).
	BaseURL string
	// Model is the provider's model id sent in requests (required).
	Model string
	// APIKey is sent as x-api-key; empty sends a placeholder (local fakes).
	APIKey string
	// Stream uses server-sent events and reports text deltas as they arrive.
	Stream bool
	// MaxRetries is the client's retry count for transient errors (429,
	// 5xx, connection errors; the library's backoff). Negative = 0.
	MaxRetries int
	// Timeout bounds one request (0 = none beyond the turn's deadline).
	Timeout time.Duration
	// MaxTokens caps the output tokens; the Messages API requires it
	// (0 = DefaultAnthropicMaxTokens).
	MaxTokens int64
	// Vision: the model accepts images (images.go).
	Vision bool
}

// DefaultAnthropicMaxTokens is max_tokens when the spec sets none.
const DefaultAnthropicMaxTokens = 8192

// AnthropicModel is a Model over the official anthropic-sdk-go client
// (Messages API: POST /v1/messages).
type AnthropicModel struct {
	client anthropic.Client
	spec   AnthropicSpec
}

// NewAnthropicModel builds a client for spec. The SDK's environment
// defaults (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, profiles, federation)
// are switched off, so a model is configured only by Toolplane's config.
func NewAnthropicModel(spec AnthropicSpec) (*AnthropicModel, error) {
	if spec.BaseURL == "" {
		return nil, errors.New("base_url: must not be empty")
	}
	if spec.Model == "" {
		return nil, errors.New("model: must not be empty")
	}
	if spec.MaxTokens < 0 {
		return nil, errors.New("max_tokens: must not be negative")
	}
	retries := spec.MaxRetries
	if retries < 0 {
		retries = 0
	}
	key := spec.APIKey
	if key == "" {
		key = "unused"
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(spec.BaseURL),
		option.WithAPIKey(key),
		option.WithMaxRetries(retries),
	}
	if spec.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(spec.Timeout))
	}
	return &AnthropicModel{client: anthropic.NewClient(opts...), spec: spec}, nil
}

// Complete implements Model.
func (m *AnthropicModel) Complete(ctx context.Context, req *ModelRequest, onDelta func(string)) (*ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	if !m.spec.Stream {
		msg, err := m.client.Messages.New(ctx, params)
		if err != nil {
			return nil, err
		}
		out := anthropicResponse(msg)
		if out.Content != "" && onDelta != nil {
			onDelta(out.Content)
		}
		return out, nil
	}
	stream := m.client.Messages.NewStreaming(ctx, params)
	defer func() { _ = stream.Close() }()
	var acc anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			return nil, err
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && ev.Delta.Text != "" && onDelta != nil {
			onDelta(ev.Delta.Text)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return anthropicResponse(&acc), nil
}

// anthropicResponse reads a Message: text blocks joined, tool_use blocks as
// tool calls, the stop reason mapped onto the loop's finish reasons.
func anthropicResponse(msg *anthropic.Message) *ModelResponse {
	out := &ModelResponse{FinishReason: AnthropicFinishReason(string(msg.StopReason)), Usage: anthropicUsage(msg.Usage)}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			out.ToolCalls = append(out.ToolCalls, ParseToolCall(b.ID, b.Name, string(b.Input)))
		}
	}
	out.Content = text.String()
	return out
}

// AnthropicFinishReason maps a Messages API stop_reason onto the loop's
// finish reasons (the OpenAI-compatible vocabulary the guards read):
// end_turn and stop_sequence → "stop"; tool_use → "tool_calls"; max_tokens
// and model_context_window_exceeded → "length"; refusal stays "refusal"
// (a safety finish). Others (pause_turn) pass through.
func AnthropicFinishReason(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence", "":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	}
	return stop
}

// anthropicUsage counts cached input too: the Messages API reports
// input_tokens without the cache reads and writes.
func anthropicUsage(u anthropic.Usage) *runtimev1.TokenUsage {
	in := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	return &runtimev1.TokenUsage{InputTokens: in, OutputTokens: u.OutputTokens, TotalTokens: in + u.OutputTokens}
}

func (m *AnthropicModel) params(req *ModelRequest) (anthropic.MessageNewParams, error) {
	maxTokens := m.spec.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultAnthropicMaxTokens
	}
	p := anthropic.MessageNewParams{Model: anthropic.Model(m.spec.Model), MaxTokens: maxTokens}
	system := []string{}
	if strings.TrimSpace(req.System) != "" {
		system = append(system, req.System)
	}
	// Native tool search ("Tool search tool", custom client-side search):
	// a tool the runtime defers goes out with defer_loading: true — also
	// once promoted, when a tool_reference in the history loaded it, so
	// the tool definitions (the cached prefix) stay as they were; a
	// promoted tool no reference loaded (a routing promotion, a thread
	// that switched provider) goes out loaded.
	tools := make([]*anthropic.ToolParam, 0, len(req.Tools))
	deferrable := map[string]bool{}
	ordered := stableToolOrder(req.Tools, req.Deferred)
	for _, t := range ordered {
		tp, err := anthropicToolOf(t)
		if err != nil {
			return p, err
		}
		tools = append(tools, tp)
	}
	deferredSet := map[string]bool{}
	for _, n := range req.Deferred {
		deferredSet[n] = true
	}
	referenced := map[string]bool{}
	for _, msg := range req.Messages {
		for _, ref := range toolReferences(msg) {
			referenced[ref] = true
		}
	}
	for i, t := range ordered {
		if deferredSet[t.GetName()] && referenced[tools[i].Name] {
			tools[i].DeferLoading = anthropic.Bool(true)
		}
		if tools[i].DeferLoading.Valid() && tools[i].DeferLoading.Value {
			deferrable[tools[i].Name] = true
		}
	}
	type turn struct {
		user   bool
		blocks []anthropic.ContentBlockParamUnion
	}
	var turns []turn
	push := func(user bool, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].user == user {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, turn{user: user, blocks: blocks})
	}
	for _, msg := range req.Messages {
		switch msg.GetRole() {
		case runtimev1.MessageRole_MESSAGE_ROLE_SYSTEM:
			if strings.TrimSpace(msg.GetContent()) != "" {
				system = append(system, msg.GetContent())
			}
		case runtimev1.MessageRole_MESSAGE_ROLE_USER:
			if msg.GetContent() != "" {
				push(true, anthropic.NewTextBlock(msg.GetContent()))
			}
		case runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT:
			var blocks []anthropic.ContentBlockParamUnion
			if msg.GetContent() != "" {
				blocks = append(blocks, anthropic.NewTextBlock(msg.GetContent()))
			}
			for _, tc := range msg.GetToolCalls() {
				input := map[string]any{}
				if a := tc.GetArguments(); a != nil {
					input = a.AsMap()
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.GetId(), input, tc.GetName()))
			}
			push(false, blocks...)
		case runtimev1.MessageRole_MESSAGE_ROLE_TOOL:
			res := anthropic.ToolResultBlockParam{ToolUseID: msg.GetToolCallId()}
			if c := msg.GetContent(); c != "" {
				res.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: c}}}
			}
			for _, ref := range toolReferences(msg) {
				if deferrable[ref] {
					res.Content = append(res.Content, anthropic.ToolResultBlockParamContentUnion{OfToolReference: &anthropic.ToolReferenceBlockParam{ToolName: ref}})
				}
			}
			if im := req.Images[msg.GetToolCallId()]; im != nil {
				res.Content = append(res.Content, anthropicImageContent(im))
			}
			if msg.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR {
				res.IsError = anthropic.Bool(true)
			}
			push(true, anthropic.ContentBlockParamUnion{OfToolResult: &res})
		}
	}
	for _, t := range turns {
		if !t.user {
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(t.blocks...))
			continue
		}
		// "tool_result blocks must come first" in a user message: a user
		// text merged after tool results (a queued warning) goes after them.
		var results, rest []anthropic.ContentBlockParamUnion
		for _, b := range t.blocks {
			if b.OfToolResult != nil {
				results = append(results, b)
			} else {
				rest = append(rest, b)
			}
		}
		p.Messages = append(p.Messages, anthropic.NewUserMessage(append(results, rest...)...))
	}
	if len(system) > 0 {
		p.System = []anthropic.TextBlockParam{{Text: strings.Join(system, "\n\n")}}
	}
	for _, tp := range tools {
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	return p, nil
}

// toolReferences are the tool names of the tool_reference blocks in a tool
// message's provider output (a tool_search result under native deferral).
func toolReferences(msg *runtimev1.Message) []string {
	if msg.GetRole() != runtimev1.MessageRole_MESSAGE_ROLE_TOOL {
		return nil
	}
	var out []string
	for _, v := range msg.GetProviderOutput().GetFields()["content"].GetListValue().GetValues() {
		b := v.GetStructValue().GetFields()
		if b["type"].GetStringValue() == "tool_reference" && b["tool_name"].GetStringValue() != "" {
			out = append(out, b["tool_name"].GetStringValue())
		}
	}
	return out
}

// anthropicToolOf reads a ToolSchema's Messages API form ({"name",
// "description", "input_schema"}, and "defer_loading" when assembly defers
// the tool): bound when assembly bound the tools for anthropic_messages,
// else the anthropic form; the input schema is sent as assembly normalised
// it (docs/architecture.md §3.1).
func anthropicToolOf(t *runtimev1.ToolSchema) (*anthropic.ToolParam, error) {
	form := t.GetAnthropic()
	if b := t.GetBound(); b != nil && b.GetFields()["input_schema"] != nil {
		form = b
	}
	f := form.GetFields()
	tp := &anthropic.ToolParam{Name: t.GetName()}
	if n := f["name"].GetStringValue(); n != "" {
		tp.Name = n
	}
	if d := f["description"].GetStringValue(); d != "" {
		tp.Description = anthropic.String(d)
	}
	if f["defer_loading"].GetBoolValue() {
		tp.DeferLoading = anthropic.Bool(true)
	}
	schema := map[string]any{}
	if s := f["input_schema"].GetStructValue(); s != nil {
		schema = s.AsMap()
	} else if fn := t.GetOpenai().GetFields()["function"].GetStructValue(); fn != nil {
		// No Anthropic form: the OpenAI form's parameters (same JSON Schema).
		if ps := fn.GetFields()["parameters"].GetStructValue(); ps != nil {
			schema = ps.AsMap()
		}
		if d := fn.GetFields()["description"].GetStringValue(); d != "" && !tp.Description.Valid() {
			tp.Description = anthropic.String(d)
		}
	}
	in := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for k, v := range schema {
		switch k {
		case "type":
			if v != "object" {
				// The SDK always sends type "object"; a schema of another
				// type would silently change meaning.
				return nil, errors.New("tool " + tp.Name + ": input_schema type must be \"object\"")
			}
		case "properties":
			in.Properties = v
		case "required":
			l, _ := v.([]any)
			for _, r := range l {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		default:
			in.ExtraFields[k] = v
		}
	}
	if in.Properties == nil {
		in.Properties = map[string]any{}
	}
	tp.InputSchema = in
	return tp, nil
}

// ToolProfile implements Profiled: Messages API client tools.
func (m *AnthropicModel) ToolProfile() runtimev1.ToolProfile {
	return runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES
}

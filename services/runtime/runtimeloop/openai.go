package runtimeloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// OpenAISpec configures one OpenAI-compatible chat-completions endpoint.
type OpenAISpec struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1/" (required).
	BaseURL string
	// Model is the provider's model id sent in requests (required).
	Model string
	// APIKey is the bearer key; empty sends none (local servers).
	APIKey string
	// Stream uses server-sent events and reports text deltas as they arrive.
	Stream bool
	// MaxRetries is the client's retry count for transient errors
	// (429, 5xx, connection errors; the library's backoff). Negative = 0.
	MaxRetries int
	// Timeout bounds one request (0 = none beyond the turn's deadline).
	Timeout time.Duration
	// MaxTokens caps the completion tokens (0 = provider default).
	MaxTokens int64
	// Temperature, when non-nil, is sent as is.
	Temperature *float64
	// Vision: the model accepts images (images.go).
	Vision bool
}

// OpenAIModel is a Model over the openai-go client.
type OpenAIModel struct {
	client openai.Client
	spec   OpenAISpec
}

// NewOpenAIModel builds a client for spec. The process environment
// (OPENAI_BASE_URL, OPENAI_API_KEY, ...) is overridden by spec, so a model
// is configured only by Toolplane's config.
func NewOpenAIModel(spec OpenAISpec) (*OpenAIModel, error) {
	if spec.BaseURL == "" {
		return nil, errors.New("base_url: must not be empty")
	}
	if spec.Model == "" {
		return nil, errors.New("model: must not be empty")
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
		option.WithBaseURL(spec.BaseURL),
		option.WithAPIKey(key),
		option.WithMaxRetries(retries),
	}
	if spec.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(spec.Timeout))
	}
	return &OpenAIModel{client: openai.NewClient(opts...), spec: spec}, nil
}

// Complete implements Model.
func (m *OpenAIModel) Complete(ctx context.Context, req *ModelRequest, onDelta func(string)) (*ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	if !m.spec.Stream {
		res, err := m.client.Chat.Completions.New(ctx, params)
		if err != nil {
			return nil, err
		}
		if len(res.Choices) == 0 {
			return nil, errors.New("model returned no choices")
		}
		ch := res.Choices[0]
		out := &ModelResponse{Content: ch.Message.Content, FinishReason: ch.FinishReason, Usage: usageOf(res.Usage)}
		if out.Content == "" && ch.Message.Refusal != "" {
			out.Content = ch.Message.Refusal
		}
		for _, tc := range ch.Message.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, ParseToolCall(tc.ID, tc.Function.Name, tc.Function.Arguments))
		}
		if out.Content != "" && onDelta != nil {
			onDelta(out.Content)
		}
		return out, nil
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := m.client.Chat.Completions.NewStreaming(ctx, params)
	defer func() { _ = stream.Close() }()
	var (
		text   strings.Builder
		calls  = map[int64]*partialCall{}
		finish string
		usage  *runtimev1.TokenUsage
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Usage.TotalTokens > 0 || chunk.Usage.PromptTokens > 0 {
			usage = usageOf(chunk.Usage)
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				text.WriteString(d)
				if onDelta != nil {
					onDelta(d)
				}
			}
			if d := ch.Delta.Refusal; d != "" {
				text.WriteString(d)
			}
			for _, tc := range ch.Delta.ToolCalls {
				p := calls[tc.Index]
				if p == nil {
					p = &partialCall{}
					calls[tc.Index] = p
				}
				if tc.ID != "" && p.id == "" {
					p.id = tc.ID
				}
				p.name += tc.Function.Name // appended, as the library's accumulator does
				p.args.WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	out := &ModelResponse{Content: text.String(), FinishReason: finish, Usage: usage}
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		p := calls[i]
		out.ToolCalls = append(out.ToolCalls, ParseToolCall(p.id, p.name, p.args.String()))
	}
	return out, nil
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func usageOf(u openai.CompletionUsage) *runtimev1.TokenUsage {
	t := u.TotalTokens
	if t == 0 {
		t = u.PromptTokens + u.CompletionTokens
	}
	return &runtimev1.TokenUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: t}
}

// ParseToolCall builds a ToolCall from the model's raw argument text: a JSON
// object becomes Arguments ("" counts as {}); anything else is kept in
// RawArguments with Arguments nil, so the executor can report it.
func ParseToolCall(id, name, args string) *runtimev1.ToolCall {
	tc := &runtimev1.ToolCall{Id: id, Name: name}
	if strings.TrimSpace(args) == "" {
		tc.Arguments = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		return tc
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil || m == nil {
		tc.RawArguments = args
		return tc
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		tc.RawArguments = args
		return tc
	}
	tc.Arguments = s
	return tc
}

// argumentsJSON renders a call's arguments for a provider: the JSON object,
// or "{}" when they were malformed (providers reject invalid JSON in
// history; the tool result already told the model what was wrong,
// docs/deerflow.md §6.2 DanglingToolCall).
func argumentsJSON(tc *runtimev1.ToolCall) string {
	if tc.GetArguments() == nil {
		return "{}"
	}
	b, err := protojson.Marshal(tc.GetArguments())
	if err != nil {
		return "{}"
	}
	return string(b)
}

func (m *OpenAIModel) params(req *ModelRequest) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.spec.Model)}
	if m.spec.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(m.spec.MaxTokens)
	}
	if m.spec.Temperature != nil {
		p.Temperature = openai.Float(*m.spec.Temperature)
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for i, msg := range req.Messages {
		if i > 0 && msg.GetRole() != runtimev1.MessageRole_MESSAGE_ROLE_TOOL {
			p.Messages = appendOpenAIImages(p.Messages, req, req.Messages[:i])
		}
		switch msg.GetRole() {
		case runtimev1.MessageRole_MESSAGE_ROLE_USER:
			p.Messages = append(p.Messages, openai.UserMessage(msg.GetContent()))
		case runtimev1.MessageRole_MESSAGE_ROLE_SYSTEM:
			p.Messages = append(p.Messages, openai.SystemMessage(msg.GetContent()))
		case runtimev1.MessageRole_MESSAGE_ROLE_TOOL:
			p.Messages = append(p.Messages, openai.ToolMessage(msg.GetContent(), msg.GetToolCallId()))
		case runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT:
			a := openai.ChatCompletionAssistantMessageParam{}
			if msg.GetContent() != "" || len(msg.GetToolCalls()) == 0 {
				a.Content.OfString = openai.String(msg.GetContent())
			}
			for _, tc := range msg.GetToolCalls() {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.GetId(),
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.GetName(), Arguments: argumentsJSON(tc)},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	p.Messages = appendOpenAIImages(p.Messages, req, req.Messages)
	for _, t := range req.Tools {
		fn, err := functionOf(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return p, nil
}

// functionOf reads a ToolSchema's Chat Completions form ({"type":
// "function", "function": {name, description, parameters, strict}}): bound
// when assembly bound the tools for openai_chat, else the openai form; the
// parameters are sent as assembly normalised them for the provider, the
// catalog's schema itself unchanged (docs/architecture.md §2, §3.1).
func functionOf(t *runtimev1.ToolSchema) (shared.FunctionDefinitionParam, error) {
	fn := shared.FunctionDefinitionParam{Name: t.GetName()}
	form := t.GetOpenai()
	if b := t.GetBound(); b != nil && b.GetFields()["function"] != nil {
		form = b
	}
	f := form.GetFields()["function"].GetStructValue()
	if f == nil {
		return fn, fmt.Errorf("tool %q: openai schema has no function object", t.GetName())
	}
	if n := f.GetFields()["name"].GetStringValue(); n != "" {
		fn.Name = n
	}
	if d := f.GetFields()["description"].GetStringValue(); d != "" {
		fn.Description = openai.String(d)
	}
	if st, ok := f.GetFields()["strict"]; ok {
		fn.Strict = openai.Bool(st.GetBoolValue())
	}
	if ps := f.GetFields()["parameters"].GetStructValue(); ps != nil {
		fn.Parameters = shared.FunctionParameters(ps.AsMap())
	} else {
		fn.Parameters = shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	}
	return fn, nil
}

// ToolProfile implements Profiled: Chat Completions function tools.
func (m *OpenAIModel) ToolProfile() runtimev1.ToolProfile {
	return runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_CHAT
}

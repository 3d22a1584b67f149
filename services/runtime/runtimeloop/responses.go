package runtimeloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// ResponsesSpec configures one OpenAI Responses API model.
type ResponsesSpec struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1/" (required).
	BaseURL string
	// Model is the provider's model id sent in requests (required).
	Model string
	// APIKey is the bearer key; empty sends a placeholder (local fakes).
	APIKey string
	// MaxRetries is the client's retry count for transient errors (429,
	// 5xx, connection errors; openai-go's backoff). Negative = 0.
	MaxRetries int
	// Timeout bounds one request (0 = none beyond the turn's deadline).
	Timeout time.Duration
	// MaxTokens caps the output tokens (max_output_tokens; 0 = provider default).
	MaxTokens int64
	// Temperature, when non-nil, is sent as is.
	Temperature *float64
	// Vision: the model accepts images (images.go).
	Vision bool
}

// ResponsesModel is a Model over the Responses API (POST /v1/responses)
// with openai-go's transport (retries, timeouts, auth). The request is
// stateless (store: false, no previous_response_id): the loop sends the
// whole conversation as input items each time, as it does for the other
// providers. It is not streamed: the text is reported once, whole.
//
// Tools are sent in the openai_responses profile's form; under native
// deferral (runtimeassembly.NativeDeferral) that is deferred functions with
// defer_loading: true and the client-executed tool_search tool
// (docs/decisions/0091-openai-responses-native-tool-search.md). A
// tool_search_call item the model emits becomes a tool_search ToolCall
// (id = call_id); its result's provider_output, the tool_search_output
// item, goes back as the next input item, and the functions it loaded keep
// defer_loading in later requests so the tools array (the cached prefix)
// does not change with a promotion.
type ResponsesModel struct {
	client openai.Client
	spec   ResponsesSpec
}

// NewResponsesModel builds a client for spec; the process environment
// (OPENAI_BASE_URL, OPENAI_API_KEY, ...) is overridden by spec.
func NewResponsesModel(spec ResponsesSpec) (*ResponsesModel, error) {
	if spec.BaseURL == "" {
		return nil, errors.New("base_url: must not be empty")
	}
	if spec.Model == "" {
		return nil, errors.New("model: must not be empty")
	}
	if spec.MaxTokens < 0 {
		return nil, errors.New("max_tokens: must not be negative")
	}
	key := spec.APIKey
	if key == "" {
		key = "unused"
	}
	opts := []option.RequestOption{
		option.WithBaseURL(spec.BaseURL),
		option.WithAPIKey(key),
		option.WithMaxRetries(max(spec.MaxRetries, 0)),
	}
	if spec.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(spec.Timeout))
	}
	return &ResponsesModel{client: openai.NewClient(opts...), spec: spec}, nil
}

// ToolProfile implements Profiled: Responses API function tools.
func (m *ResponsesModel) ToolProfile() runtimev1.ToolProfile {
	return runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES
}

// responsesAnswer is the part of the Response object the loop reads
// (API reference, "The response object": status, incomplete_details,
// output items, usage).
type responsesAnswer struct {
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		Type      string          `json:"type"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Content   []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

// Complete implements Model.
func (m *ResponsesModel) Complete(ctx context.Context, req *ModelRequest, onDelta func(string)) (*ModelResponse, error) {
	body, err := m.body(req)
	if err != nil {
		return nil, err
	}
	var ans responsesAnswer
	if err := m.client.Post(ctx, "responses", body, &ans); err != nil {
		return nil, err
	}
	out := &ModelResponse{Usage: &runtimev1.TokenUsage{InputTokens: ans.Usage.InputTokens, OutputTokens: ans.Usage.OutputTokens,
		TotalTokens: ans.Usage.InputTokens + ans.Usage.OutputTokens}}
	var text strings.Builder
	refused := false
	for _, it := range ans.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					text.WriteString(c.Text)
				case "refusal":
					refused = true
					text.WriteString(c.Refusal)
				}
			}
		case "function_call":
			var raw string
			if json.Unmarshal(it.Arguments, &raw) != nil {
				raw = string(it.Arguments)
			}
			out.ToolCalls = append(out.ToolCalls, ParseToolCall(it.CallID, it.Name, raw))
		case "tool_search_call":
			// Client-executed tool search: arguments are a JSON value
			// following the tool_search tool's parameters.
			out.ToolCalls = append(out.ToolCalls, ParseToolCall(it.CallID, responsesToolSearch, string(it.Arguments)))
		}
	}
	out.Content = text.String()
	switch {
	case refused:
		out.FinishReason = "refusal"
	case len(out.ToolCalls) > 0:
		out.FinishReason = "tool_calls"
	case ans.Status == "incomplete" && ans.IncompleteDetails != nil && ans.IncompleteDetails.Reason == "max_output_tokens":
		out.FinishReason = "length"
	case ans.Status == "incomplete" && ans.IncompleteDetails != nil && ans.IncompleteDetails.Reason == "content_filter":
		out.FinishReason = "content_filter"
	default:
		out.FinishReason = "stop"
	}
	if out.Content != "" && onDelta != nil {
		onDelta(out.Content)
	}
	return out, nil
}

// responsesToolSearch is the runtime's tool_search name.
const responsesToolSearch = "tool_search"

// body builds the request: instructions (the system prompt), the
// conversation as input items, the tools in the openai_responses form.
func (m *ResponsesModel) body(req *ModelRequest) (map[string]any, error) {
	body := map[string]any{"model": m.spec.Model, "store": false}
	if m.spec.MaxTokens > 0 {
		body["max_output_tokens"] = m.spec.MaxTokens
	}
	if m.spec.Temperature != nil {
		body["temperature"] = *m.spec.Temperature
	}
	system := []string{}
	if strings.TrimSpace(req.System) != "" {
		system = append(system, req.System)
	}
	searchIsNative := false
	for _, t := range req.Tools {
		if t.GetBound().GetFields()["type"].GetStringValue() == "tool_search" {
			searchIsNative = true
		}
	}
	// Functions loaded by a tool_search_output of the history stay
	// deferred: the output item in the input loads them.
	loaded := map[string]bool{}
	for _, msg := range req.Messages {
		for _, n := range searchOutputNames(msg) {
			loaded[n] = true
		}
	}
	deferredSet := map[string]bool{}
	for _, n := range req.Deferred {
		deferredSet[n] = true
	}
	tools := make([]any, 0, len(req.Tools))
	for _, t := range stableToolOrder(req.Tools, req.Deferred) {
		f, err := responsesToolOf(t)
		if err != nil {
			return nil, err
		}
		if name, _ := f["name"].(string); f["type"] == "function" && deferredSet[t.GetName()] && loaded[name] {
			f["defer_loading"] = true
		}
		tools = append(tools, f)
	}
	var input []any
	for i, msg := range req.Messages {
		if i > 0 && msg.GetRole() != runtimev1.MessageRole_MESSAGE_ROLE_TOOL {
			input = appendResponsesImages(input, req, req.Messages[:i])
		}
		switch msg.GetRole() {
		case runtimev1.MessageRole_MESSAGE_ROLE_SYSTEM:
			if strings.TrimSpace(msg.GetContent()) != "" {
				system = append(system, msg.GetContent())
			}
		case runtimev1.MessageRole_MESSAGE_ROLE_USER:
			if msg.GetContent() != "" {
				input = append(input, map[string]any{"type": "message", "role": "user", "content": msg.GetContent()})
			}
		case runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT:
			if msg.GetContent() != "" {
				input = append(input, map[string]any{"type": "message", "role": "assistant", "content": msg.GetContent()})
			}
			for _, tc := range msg.GetToolCalls() {
				if tc.GetName() == responsesToolSearch && searchIsNative {
					args := map[string]any{}
					if a := tc.GetArguments(); a != nil {
						args = a.AsMap()
					}
					input = append(input, map[string]any{"type": "tool_search_call", "call_id": tc.GetId(), "execution": "client",
						"status": "completed", "arguments": args})
					continue
				}
				input = append(input, map[string]any{"type": "function_call", "call_id": tc.GetId(), "name": tc.GetName(),
					"arguments": argumentsJSON(tc)})
			}
		case runtimev1.MessageRole_MESSAGE_ROLE_TOOL:
			if msg.GetName() == responsesToolSearch && searchIsNative {
				po := msg.GetProviderOutput()
				if po.GetFields()["type"].GetStringValue() == "tool_search_output" && po.GetFields()["call_id"].GetStringValue() == msg.GetToolCallId() {
					input = append(input, po.AsMap())
				} else {
					// No native result (the call was refused before the
					// search ran): the call is still answered, loading nothing.
					input = append(input, map[string]any{"type": "tool_search_output", "call_id": msg.GetToolCallId(),
						"execution": "client", "status": "completed", "tools": []any{}})
				}
				continue
			}
			out := msg.GetContent()
			if out == "" {
				out = "(no output)"
			}
			input = append(input, map[string]any{"type": "function_call_output", "call_id": msg.GetToolCallId(), "output": out})
		}
	}
	input = appendResponsesImages(input, req, req.Messages)
	if len(input) == 0 {
		return nil, errors.New("responses: the conversation has no input")
	}
	body["input"] = input
	if len(system) > 0 {
		body["instructions"] = strings.Join(system, "\n\n")
	}
	if len(tools) > 0 {
		body["tools"] = tools
	}
	return body, nil
}

// searchOutputNames are the function names a tool message's
// tool_search_output item loaded.
func searchOutputNames(msg *runtimev1.Message) []string {
	if msg.GetRole() != runtimev1.MessageRole_MESSAGE_ROLE_TOOL {
		return nil
	}
	po := msg.GetProviderOutput().GetFields()
	if po["type"].GetStringValue() != "tool_search_output" {
		return nil
	}
	var out []string
	for _, v := range po["tools"].GetListValue().GetValues() {
		if n := v.GetStructValue().GetFields()["name"].GetStringValue(); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// responsesToolOf reads a ToolSchema's Responses form: the bound form when
// assembly bound for openai_responses (a function, or the tool_search tool
// under native deferral), else the v0.1.0 openai form rewritten as a
// Responses function ({"type": "function", "name", "description",
// "parameters", "strict": false}).
func responsesToolOf(t *runtimev1.ToolSchema) (map[string]any, error) {
	if b := t.GetBound(); b != nil {
		if typ := b.GetFields()["type"].GetStringValue(); (typ == "function" && b.GetFields()["parameters"] != nil) || typ == "tool_search" {
			return b.AsMap(), nil
		}
	}
	fn := t.GetOpenai().GetFields()["function"].GetStructValue()
	if fn == nil {
		return nil, fmt.Errorf("tool %s: no openai_responses or openai form", t.GetName())
	}
	f := map[string]any{"type": "function", "name": fn.GetFields()["name"].GetStringValue(), "strict": false}
	if d := fn.GetFields()["description"].GetStringValue(); d != "" {
		f["description"] = d
	}
	params := map[string]any{"type": "object", "properties": map[string]any{}}
	if p := fn.GetFields()["parameters"].GetStructValue(); p != nil {
		params = p.AsMap()
	}
	f["parameters"] = params
	return f, nil
}

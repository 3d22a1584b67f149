// Package providerflow is the loop of an application that calls a model
// provider itself (not through RunTurn) and uses Toolplane for its tools:
// AssembleTools with the provider's profile → the provider request built
// from the bound forms → ExecuteToolCall of the model's tool search with the
// same profile → the next request carrying the provider-native search result
// (ToolResult.provider_output) → a call of the promoted tool → the final
// answer (docs/architecture.md §3.1). It runs against the strict local
// fakes of each provider (fakeanthropic, fakeresponses, fakemodel), so a
// request a provider would refuse fails the flow. The README's provider
// section and scripts/walkthrough-providers.sh run it over REST; the
// runtime's tests run it over gRPC.
package providerflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakeanthropic"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodel"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakeresponses"
)

// Backend is Toolplane as the application reaches it.
type Backend interface {
	// NewThread creates a thread and returns its id.
	NewThread(ctx context.Context) (string, error)
	// Assemble is AssembleTools with a profile.
	Assemble(ctx context.Context, thread string, profile runtimev1.ToolProfile) (*runtimev1.AssembleToolsResponse, error)
	// Execute is ExecuteToolCall with a profile.
	Execute(ctx context.Context, thread string, profile runtimev1.ToolProfile, call *runtimev1.ToolCall) (*runtimev1.ToolResult, error)
}

// Script is what the scripted model does: search with Query, then call
// Tool (its bound name) with Args, then answer.
type Script struct {
	// Prompt is the user message.
	Prompt string
	// Query is the tool_search query, e.g. "select:everything_get-sum".
	Query string
	// Tool is the promoted tool the model calls.
	Tool string
	// Args is the call's arguments JSON (in the bound form's shape).
	Args string
}

// Exchange is one provider request and its answer.
type Exchange struct {
	// Request is the request body as sent.
	Request json.RawMessage
	// Response is the provider's answer body.
	Response json.RawMessage
}

// Transcript is what one flow did.
type Transcript struct {
	// Provider is the profile name.
	Provider string
	// Thread is the thread the flow ran in.
	Thread string
	// Exchanges are the provider round trips in order.
	Exchanges []Exchange
	// Bound lists the tool names of the first request, deferred ones
	// marked with "(deferred)".
	Bound []string
	// Notes are AssembleTools' report notes.
	Notes []string
	// SearchOutput is the provider-native tool search result
	// (ToolResult.provider_output, or the text for openai_chat).
	SearchOutput json.RawMessage
	// ToolResult is the promoted tool's result text.
	ToolResult string
	// Answer is the model's final text.
	Answer string
	// LargestRequest is the largest request body in bytes.
	LargestRequest int
	// Log is the flow step by step, one line each (what the walk-through prints).
	Log []string
}

func (tr *Transcript) say(format string, args ...any) {
	tr.Log = append(tr.Log, fmt.Sprintf(format, args...))
}

// clip shortens a JSON text for the log.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// toolForm is the request's form of the named tool, for the log; the
// description of tool_search is elided (it is long and the same everywhere).
func toolForm(tools []any, name string) string {
	for _, t := range tools {
		m, _ := t.(map[string]any)
		fn, _ := m["function"].(map[string]any)
		if m["name"] == name || (fn != nil && fn["name"] == name) || (name == "tool_search" && m["type"] == "tool_search") {
			if name == "tool_search" {
				c := map[string]any{}
				for k, v := range m {
					c[k] = v
				}
				if _, ok := c["description"]; ok {
					c["description"] = "…"
				}
				if fn != nil {
					f := map[string]any{}
					for k, v := range fn {
						f[k] = v
					}
					f["description"] = "…"
					c["function"] = f
				}
				m = c
			}
			b, _ := json.Marshal(m)
			return string(b)
		}
	}
	return "(not in the request)"
}

// Providers are the flows Run knows, in order.
var Providers = []string{"anthropic_messages", "openai_responses", "openai_chat"}

// Run runs the flow for provider against its strict fake.
func Run(ctx context.Context, b Backend, provider string, sc Script) (*Transcript, error) {
	switch provider {
	case "anthropic_messages":
		return runAnthropic(ctx, b, sc)
	case "openai_responses":
		return runResponses(ctx, b, sc)
	case "openai_chat":
		return runChat(ctx, b, sc)
	}
	return nil, fmt.Errorf("provider %q: not one of %s", provider, strings.Join(Providers, ", "))
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// post sends body as JSON and returns the answer; a non-200 answer (the
// fake's refusal) is an error with its message.
func post(ctx context.Context, url string, hdr map[string]string, body any, tr *Transcript) (json.RawMessage, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	tr.Exchanges = append(tr.Exchanges, Exchange{Request: b, Response: out})
	tr.LargestRequest = max(tr.LargestRequest, len(b))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: the provider fake refused request %d (HTTP %d): %s", tr.Provider, len(tr.Exchanges), resp.StatusCode, out)
	}
	return out, nil
}

func boundForms(asm *runtimev1.AssembleToolsResponse, tr *Transcript) []any {
	var tools []any
	for _, ts := range asm.GetTools() {
		f := ts.GetBound().AsMap()
		tools = append(tools, f)
		name := ts.GetName()
		if d, _ := f["defer_loading"].(bool); d {
			name += " (deferred)"
		}
		tr.Bound = append(tr.Bound, name)
	}
	tr.Notes = asm.GetReport().GetNotes()
	return tools
}

func system(asm *runtimev1.AssembleToolsResponse) string {
	var parts []string
	for _, s := range asm.GetPromptSections() {
		if strings.TrimSpace(s.GetText()) != "" {
			parts = append(parts, s.GetText())
		}
	}
	return strings.Join(parts, "\n\n")
}

func resultText(r *runtimev1.ToolResult) string {
	var parts []string
	for _, c := range r.GetContent() {
		if c.GetText() != "" {
			parts = append(parts, c.GetText())
		}
	}
	return strings.Join(parts, "\n")
}

func argsStruct(raw string) (*structpb.Struct, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("arguments %q: %w", raw, err)
	}
	return structpb.NewStruct(m)
}

func checkSuccess(what string, r *runtimev1.ToolResult) error {
	if r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		return fmt.Errorf("%s: %v %s: %s", what, r.GetStatus(), r.GetReasonCode(), resultText(r))
	}
	return nil
}

// runAnthropic: Messages API, native tool search with tool_reference blocks.
func runAnthropic(ctx context.Context, b Backend, sc Script) (*Transcript, error) {
	const profile = runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES
	tr := &Transcript{Provider: "anthropic_messages"}
	fake := fakeanthropic.New(
		fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{ID: "toolu_search", Name: "tool_search", Input: mustJSON(map[string]any{"query": sc.Query})}}},
		fakeanthropic.Reply{From: func(r fakeanthropic.Request) fakeanthropic.Reply {
			return fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{ID: "toolu_call", Name: sc.Tool, Input: sc.Args}}}
		}},
		fakeanthropic.Reply{From: func(r fakeanthropic.Request) fakeanthropic.Reply {
			last := r.Messages[len(r.Messages)-1].Content
			text := ""
			for _, rb := range last[0].ResultBlocks() {
				if rb.Text != nil {
					text += *rb.Text
				}
			}
			return fakeanthropic.Reply{Text: "The tool said: " + text}
		}},
	)
	defer fake.Close()
	th, err := b.NewThread(ctx)
	if err != nil {
		return nil, err
	}
	tr.Thread = th
	asm, err := b.Assemble(ctx, th, profile)
	if err != nil {
		return nil, err
	}
	tools := boundForms(asm, tr)
	body := map[string]any{"model": "claude-fake", "max_tokens": 1024, "system": system(asm), "tools": tools,
		"messages": []any{map[string]any{"role": "user", "content": sc.Prompt}}}
	tr.logAssembly(asm, profile)
	tr.say("request tools[%s] = %s", sc.Tool, toolForm(tools, sc.Tool))
	tr.say("request tools[tool_search] = %s", toolForm(tools, "tool_search"))
	hdr := map[string]string{"x-api-key": "fake", "anthropic-version": "2023-06-01"}
	url := fake.BaseURL() + "v1/messages"
	messages := body["messages"].([]any)
	for turn := 0; turn < 3; turn++ {
		out, err := post(ctx, url, hdr, body, tr)
		if err != nil {
			return tr, err
		}
		var msg struct {
			Content    []map[string]any `json:"content"`
			StopReason string           `json:"stop_reason"`
		}
		if err := json.Unmarshal(out, &msg); err != nil {
			return tr, err
		}
		if msg.StopReason != "tool_use" {
			for _, c := range msg.Content {
				if t, _ := c["text"].(string); t != "" {
					tr.Answer += t
				}
			}
			tr.say("model → %q", tr.Answer)
			return tr, nil
		}
		messages = append(messages, map[string]any{"role": "assistant", "content": msg.Content})
		var results []any
		for _, c := range msg.Content {
			if c["type"] != "tool_use" {
				continue
			}
			id, _ := c["id"].(string)
			name, _ := c["name"].(string)
			in, _ := c["input"].(map[string]any)
			args, err := structpb.NewStruct(in)
			if err != nil {
				return tr, err
			}
			ib, _ := json.Marshal(in)
			tr.say("model → tool_use %s %s", name, ib)
			res, err := b.Execute(ctx, th, profile, &runtimev1.ToolCall{Id: id, Name: name, Arguments: args})
			if err != nil {
				return tr, err
			}
			if err := checkSuccess(name, res); err != nil {
				return tr, err
			}
			tr.logResult(name, res)
			block := map[string]any{"type": "tool_result", "tool_use_id": id}
			if po := res.GetProviderOutput(); po != nil && name == "tool_search" {
				// The native result: the tool_reference blocks load the
				// deferred definitions the request already carries.
				block["content"] = po.AsMap()["content"]
				tr.SearchOutput, _ = json.Marshal(po.AsMap())
			} else {
				block["content"] = resultText(res)
				if res.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR {
					block["is_error"] = true
				}
				if name == sc.Tool {
					tr.ToolResult = resultText(res)
				}
			}
			results = append(results, block)
		}
		messages = append(messages, map[string]any{"role": "user", "content": results})
		body["messages"] = messages
	}
	return tr, fmt.Errorf("anthropic_messages: no final answer after 3 requests")
}

// runResponses: Responses API, deferred functions with defer_loading and a
// client-executed tool_search answered by the tool_search_output item.
func runResponses(ctx context.Context, b Backend, sc Script) (*Transcript, error) {
	const profile = runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES
	tr := &Transcript{Provider: "openai_responses"}
	fake := fakeresponses.New(
		fakeresponses.Reply{ToolSearch: mustJSON(map[string]any{"query": sc.Query})},
		fakeresponses.Reply{Calls: []fakeresponses.Call{{Name: sc.Tool, Args: sc.Args}}},
		fakeresponses.Reply{From: func(r fakeresponses.Request) fakeresponses.Reply {
			return fakeresponses.Reply{Text: "The tool said: " + r.LastOutput()}
		}},
	)
	defer fake.Close()
	th, err := b.NewThread(ctx)
	if err != nil {
		return nil, err
	}
	tr.Thread = th
	asm, err := b.Assemble(ctx, th, profile)
	if err != nil {
		return nil, err
	}
	input := []any{map[string]any{"role": "user", "content": sc.Prompt}}
	tools := boundForms(asm, tr)
	body := map[string]any{"model": "gpt-fake", "instructions": system(asm), "tools": tools, "input": input}
	tr.logAssembly(asm, profile)
	tr.say("request tools[%s] = %s", sc.Tool, toolForm(tools, sc.Tool))
	tr.say("request tools[tool_search] = %s", toolForm(tools, "tool_search"))
	hdr := map[string]string{"Authorization": "Bearer fake"}
	url := fake.BaseURL() + "responses"
	for turn := 0; turn < 3; turn++ {
		out, err := post(ctx, url, hdr, body, tr)
		if err != nil {
			return tr, err
		}
		var resp struct {
			Output []map[string]any `json:"output"`
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			return tr, err
		}
		calls := 0
		for _, item := range resp.Output {
			// Output items go back as input items, as they came (the
			// stateless form of a conversation).
			input = append(input, item)
			callID, _ := item["call_id"].(string)
			switch item["type"] {
			case "message":
				for _, c := range item["content"].([]any) {
					if t, _ := c.(map[string]any)["text"].(string); t != "" {
						tr.Answer += t
					}
				}
			case "tool_search_call":
				calls++
				in, _ := item["arguments"].(map[string]any)
				args, err := structpb.NewStruct(in)
				if err != nil {
					return tr, err
				}
				ib, _ := json.Marshal(in)
				tr.say("model → tool_search_call call_id=%s arguments=%s", callID, ib)
				res, err := b.Execute(ctx, th, profile, &runtimev1.ToolCall{Id: callID, Name: "tool_search", Arguments: args})
				if err != nil {
					return tr, err
				}
				po := res.GetProviderOutput()
				if po == nil {
					return tr, fmt.Errorf("openai_responses: tool_search returned no tool_search_output (status %v: %s)", res.GetStatus(), resultText(res))
				}
				tr.SearchOutput, _ = json.Marshal(po.AsMap())
				tr.say("ExecuteToolCall(tool_search) provider_output = %s", tr.SearchOutput)
				input = append(input, po.AsMap())
			case "function_call":
				calls++
				name, _ := item["name"].(string)
				raw, _ := item["arguments"].(string)
				tr.say("model → function_call %s %s", name, raw)
				res, err := b.Execute(ctx, th, profile, &runtimev1.ToolCall{Id: callID, Name: name, RawArguments: raw})
				if err != nil {
					return tr, err
				}
				if err := checkSuccess(name, res); err != nil {
					return tr, err
				}
				tr.ToolResult = resultText(res)
				tr.say("ExecuteToolCall(%s) = %q", name, tr.ToolResult)
				input = append(input, map[string]any{"type": "function_call_output", "call_id": callID, "output": resultText(res)})
			}
		}
		if calls == 0 {
			tr.say("model → %q", tr.Answer)
			return tr, nil
		}
		body["input"] = input
	}
	return tr, fmt.Errorf("openai_responses: no final answer after 3 requests")
}

// runChat: Chat Completions, no native tool search: tool_search is a
// function whose text result lists the definitions, and the promoted tool
// is bound from the next AssembleTools on.
func runChat(ctx context.Context, b Backend, sc Script) (*Transcript, error) {
	const profile = runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_CHAT
	tr := &Transcript{Provider: "openai_chat"}
	fake := fakemodel.New(
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{ID: "call_search", Name: "tool_search", Args: mustJSON(map[string]any{"query": sc.Query})}}},
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{ID: "call_tool", Name: sc.Tool, Args: sc.Args}}},
		fakemodel.Reply{Content: "done"},
	)
	defer fake.Close()
	th, err := b.NewThread(ctx)
	if err != nil {
		return nil, err
	}
	tr.Thread = th
	messages := []any{map[string]any{"role": "user", "content": sc.Prompt}}
	hdr := map[string]string{"Authorization": "Bearer fake"}
	url := fake.BaseURL() + "chat/completions"
	for turn := 0; turn < 3; turn++ {
		// Re-assembled per request: the promotion binds the tool.
		asm, err := b.Assemble(ctx, th, profile)
		if err != nil {
			return tr, err
		}
		var toolsSeen []string
		tools := boundForms(asm, &Transcript{})
		for _, ts := range asm.GetTools() {
			toolsSeen = append(toolsSeen, ts.GetName())
		}
		if turn == 0 {
			tr.Bound, tr.Notes = toolsSeen, asm.GetReport().GetNotes()
			tr.logAssembly(asm, profile)
			tr.say("request tools[tool_search] = %s", toolForm(tools, "tool_search"))
		} else if turn == 1 {
			tr.say("re-assembled: request tools[%s] = %s", sc.Tool, toolForm(tools, sc.Tool))
		}
		msgs := append([]any{map[string]any{"role": "system", "content": system(asm)}}, messages...)
		out, err := post(ctx, url, hdr, map[string]any{"model": "gpt-fake", "messages": msgs, "tools": tools}, tr)
		if err != nil {
			return tr, err
		}
		var resp struct {
			Choices []struct {
				Message struct {
					Content   string           `json:"content"`
					ToolCalls []map[string]any `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out, &resp); err != nil || len(resp.Choices) == 0 {
			return tr, fmt.Errorf("openai_chat: answer %s: %v", out, err)
		}
		m := resp.Choices[0].Message
		if len(m.ToolCalls) == 0 {
			tr.Answer = m.Content
			tr.say("model → %q", tr.Answer)
			return tr, nil
		}
		messages = append(messages, map[string]any{"role": "assistant", "content": nil, "tool_calls": m.ToolCalls})
		for _, tc := range m.ToolCalls {
			id, _ := tc["id"].(string)
			fn, _ := tc["function"].(map[string]any)
			name, _ := fn["name"].(string)
			raw, _ := fn["arguments"].(string)
			tr.say("model → tool_call %s %s", name, raw)
			res, err := b.Execute(ctx, th, profile, &runtimev1.ToolCall{Id: id, Name: name, RawArguments: raw})
			if err != nil {
				return tr, err
			}
			if err := checkSuccess(name, res); err != nil {
				return tr, err
			}
			tr.logResult(name, res)
			if name == "tool_search" {
				tr.SearchOutput, _ = json.Marshal(resultText(res))
			} else if name == sc.Tool {
				tr.ToolResult = resultText(res)
			}
			messages = append(messages, map[string]any{"role": "tool", "tool_call_id": id, "content": resultText(res)})
		}
	}
	return tr, fmt.Errorf("openai_chat: no final answer after 3 requests")
}

func (tr *Transcript) logAssembly(asm *runtimev1.AssembleToolsResponse, p runtimev1.ToolProfile) {
	deferred := 0
	for _, n := range tr.Bound {
		if strings.HasSuffix(n, " (deferred)") {
			deferred++
		}
	}
	tr.say("AssembleTools(profile=%s): %d tools bound, %d of them with defer_loading; %d names deferred", p, len(asm.GetTools()), deferred, len(asm.GetDeferred()))
	for _, n := range asm.GetReport().GetNotes() {
		if strings.HasPrefix(n, "anthropic_messages:") || strings.HasPrefix(n, "openai_responses:") {
			tr.say("report note: %s", n)
		}
	}
}

func (tr *Transcript) logResult(name string, res *runtimev1.ToolResult) {
	if po := res.GetProviderOutput(); po != nil {
		b, _ := json.Marshal(po.AsMap())
		tr.say("ExecuteToolCall(%s) provider_output = %s", name, b)
		return
	}
	tr.say("ExecuteToolCall(%s) = %s", name, clip([]byte(fmt.Sprintf("%q", resultText(res))), 200))
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

package runtimeloop

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakeanthropic"
)

func anthropicModel(t *testing.T, s *fakeanthropic.Server, stream bool) *AnthropicModel {
	t.Helper()
	m, err := NewAnthropicModel(AnthropicSpec{BaseURL: s.BaseURL(), Model: "claude-test", APIKey: "k", Stream: stream, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A turn against the strict Messages API fake: tool_search → promoted tool →
// answer, streamed and not; every request must pass the fake's rules
// (tool_result pairing, roles, schemas).
func TestAnthropicFlowSearchPromoteCallAnswer(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			s := fakeanthropic.New(
				fakeanthropic.Reply{Text: "Searching.", ToolUses: []fakeanthropic.ToolUse{{Name: "tool_search", Input: `{"query":"weather"}`}}, InputTokens: 100, OutputTokens: 10},
				fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{Name: "weather_get", Input: `{"city":"Paris"}`}, {Name: "broken", Input: `{}`}}, InputTokens: 20, CacheReadTokens: 100, OutputTokens: 10},
				fakeanthropic.Reply{Text: "It is sunny in Paris.", InputTokens: 150, OutputTokens: 8},
			)
			defer s.Close()
			w := newWorld()
			w.tools["broken"] = &fakeTool{run: func(context.Context, map[string]any) (string, error) { return "", errors.New("disk on fire") }}
			e := newTestEngine(t, w, single(anthropicModel(t, s, stream)), Config{})
			rec := &recorder{}
			run, err := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "What's the weather in Paris?"}, rec.sink)
			if err != nil {
				t.Fatal(err)
			}
			if p := s.Problems(); len(p) > 0 {
				t.Fatalf("the fake refused requests: %v", p)
			}
			if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
				t.Fatalf("status %v (%s)", run.GetStatus(), run.GetReason())
			}
			if got := finalText(t, w, "t1"); got != "It is sunny in Paris." {
				t.Fatalf("final %q", got)
			}
			reqs := s.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests", len(reqs))
			}
			if reqs[0].Stream != stream || reqs[0].MaxTokens != DefaultAnthropicMaxTokens || reqs[0].Model != "claude-test" {
				t.Fatalf("request 0: stream %v max_tokens %d model %q", reqs[0].Stream, reqs[0].MaxTokens, reqs[0].Model)
			}
			if !strings.Contains(reqs[0].SystemText(), "<available-deferred-tools>") {
				t.Fatalf("system: %q", reqs[0].SystemText())
			}
			if contains(reqs[0].ToolNames(), "weather_get") || !contains(reqs[1].ToolNames(), "weather_get") {
				t.Fatalf("bound tools: %v then %v", reqs[0].ToolNames(), reqs[1].ToolNames())
			}
			// The third request carries both results of the second response in
			// one user message, the broken tool's with is_error.
			last := reqs[2].Messages[len(reqs[2].Messages)-1]
			if last.Role != "user" || len(last.Content) != 2 || last.Content[0].Type != "tool_result" || last.Content[1].Type != "tool_result" {
				t.Fatalf("last message: %+v", last)
			}
			if last.Content[0].IsError != nil && *last.Content[0].IsError {
				t.Fatal("the weather result is marked as an error")
			}
			if last.Content[1].IsError == nil || !*last.Content[1].IsError {
				t.Fatal("the broken tool's result is not is_error")
			}
			if got := last.Content[0].ResultBlocks(); len(got) != 1 || got[0].Text == nil || *got[0].Text != "sunny in Paris" {
				t.Fatalf("weather result content: %+v", got)
			}
			// Usage: cached input counts as input.
			if run.GetUsage().GetInputTokens() != 370 || run.GetUsage().GetOutputTokens() != 28 || run.GetUsage().GetTotalTokens() != 398 {
				t.Fatalf("usage %v", run.GetUsage())
			}
			if stream {
				if d := strings.Join(rec.deltas(), ""); !strings.Contains(d, "It is sunny in Paris.") || len(rec.deltas()) < 3 {
					t.Fatalf("deltas %q", rec.deltas())
				}
			}
			assertNoDangling(t, w.msgs("t1"))
		})
	}
}

func TestAnthropicStopReasons(t *testing.T) {
	for in, want := range map[string]string{"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
		"max_tokens": "length", "model_context_window_exceeded": "length", "refusal": "refusal", "pause_turn": "pause_turn"} {
		if got := AnthropicFinishReason(in); got != want {
			t.Errorf("%s → %s, want %s", in, got, want)
		}
	}
	if !safetyFinish(AnthropicFinishReason("refusal")) {
		t.Fatal("refusal is not a safety finish")
	}
	for _, stream := range []bool{false, true} {
		s := fakeanthropic.New(
			fakeanthropic.Reply{Text: "cut", StopReason: "max_tokens"},
			fakeanthropic.Reply{Text: "no", ToolUses: []fakeanthropic.ToolUse{{Name: "echo", Input: `{"text":"x"}`}}, StopReason: "refusal"},
		)
		m := anthropicModel(t, s, stream)
		req := &ModelRequest{Messages: []*runtimev1.Message{{Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: "hi"}}, Tools: []*runtimev1.ToolSchema{schema("echo")}}
		r1, err := m.Complete(context.Background(), req, nil)
		if err != nil || r1.FinishReason != "length" || r1.Content != "cut" {
			t.Fatalf("max_tokens: %+v %v", r1, err)
		}
		r2, err := m.Complete(context.Background(), req, nil)
		if err != nil || r2.FinishReason != "refusal" || len(r2.ToolCalls) != 1 {
			t.Fatalf("refusal: %+v %v", r2, err)
		}
		// The engine turns a refusal into a safety-capped answer without
		// running the tool call.
		s.Add(fakeanthropic.Reply{Text: "no", ToolUses: []fakeanthropic.ToolUse{{Name: "echo", Input: `{"text":"x"}`}}, StopReason: "refusal"})
		w := newWorld()
		e := newTestEngine(t, w, single(m), Config{})
		run, err := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "hi"}, (&recorder{}).sink)
		if err != nil || run.GetReason() != "safety_capped" || w.execCount("echo") != 0 {
			t.Fatalf("refusal turn: %v %v execs %v", run, err, w.execs)
		}
		if p := s.Problems(); len(p) > 0 {
			t.Fatalf("problems %v", p)
		}
		s.Close()
	}
}

// The adapter refuses what would change a tool's meaning, and the fake's
// 400 for a root union surfaces as the model error.
func TestAnthropicSchemas(t *testing.T) {
	s := fakeanthropic.New(fakeanthropic.Reply{Text: "ok"})
	defer s.Close()
	m := anthropicModel(t, s, false)
	mk := func(in map[string]any) *runtimev1.ToolSchema {
		an, _ := structpb.NewStruct(map[string]any{"name": "u", "description": "d", "input_schema": in})
		return &runtimev1.ToolSchema{Name: "u", Anthropic: an}
	}
	user := []*runtimev1.Message{{Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: "hi"}}
	_, err := m.Complete(context.Background(), &ModelRequest{Messages: user, Tools: []*runtimev1.ToolSchema{mk(map[string]any{"type": "string"})}}, nil)
	if err == nil || !strings.Contains(err.Error(), `input_schema type must be "object"`) {
		t.Fatalf("non-object root: %v", err)
	}
	_, err = m.Complete(context.Background(), &ModelRequest{Messages: user, Tools: []*runtimev1.ToolSchema{mk(map[string]any{"type": "object", "anyOf": []any{map[string]any{"required": []any{"a"}}}})}}, nil)
	if err == nil || !strings.Contains(err.Error(), "at the top level") {
		t.Fatalf("root anyOf: %v", err)
	}
	// defer_loading and the schema's keywords go out as given.
	an, _ := structpb.NewStruct(map[string]any{"name": "d", "defer_loading": true, "input_schema": map[string]any{"type": "object",
		"properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/A"}}, "required": []any{"a"}, "$defs": map[string]any{"A": map[string]any{"type": "string"}}}})
	if _, err := m.Complete(context.Background(), &ModelRequest{Messages: user, Tools: []*runtimev1.ToolSchema{schema("echo"), {Name: "d", Anthropic: an}}}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	got := reqs[len(reqs)-1].Tools[1]
	if !got.DeferLoading || got.InputSchema["$defs"] == nil || compactJSON(got.InputSchema["required"]) != `["a"]` {
		t.Fatalf("tool sent as %+v", got)
	}
	if echo := reqs[len(reqs)-1].Tools[0]; echo.InputSchema["properties"] == nil || echo.Description != "the echo tool" {
		t.Fatalf("OpenAI-form fallback: %+v", echo)
	}
	if _, err := NewAnthropicModel(AnthropicSpec{Model: "m"}); err == nil || !strings.Contains(err.Error(), "base_url") {
		t.Fatalf("no base_url: %v", err)
	}
	if _, err := NewAnthropicModel(AnthropicSpec{BaseURL: "http://x/"}); err == nil || !strings.Contains(err.Error(), "model") {
		t.Fatalf("no model: %v", err)
	}
}

func compactJSON(v any) string {
	s, _ := structpb.NewValue(v)
	b, _ := s.MarshalJSON()
	return strings.ReplaceAll(string(b), " ", "")
}

// Native tool search: a promoted deferred tool stays deferred once a
// tool_reference loaded it, goes out loaded otherwise; references to
// tools not deferred in this request are dropped.
func TestAnthropicNativeDeferral(t *testing.T) {
	s := fakeanthropic.New(fakeanthropic.Reply{Text: "a"}, fakeanthropic.Reply{Text: "b"})
	defer s.Close()
	m := anthropicModel(t, s, false)
	tools := []*runtimev1.ToolSchema{schema("tool_search"), schema("weather_get")}
	user := &runtimev1.Message{Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: "weather?"}
	// Promoted by routing: no reference in the history → loaded.
	if _, err := m.Complete(context.Background(), &ModelRequest{Messages: []*runtimev1.Message{user}, Tools: tools, Deferred: []string{"weather_get"}}, nil); err != nil {
		t.Fatal(err)
	}
	// Promoted by tool_search, whose result referenced it → deferred.
	po, _ := structpb.NewStruct(map[string]any{"content": []any{
		map[string]any{"type": "tool_reference", "tool_name": "weather_get"},
		map[string]any{"type": "tool_reference", "tool_name": "gone_tool"}}})
	hist := []*runtimev1.Message{user,
		{Role: runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT, ToolCalls: []*runtimev1.ToolCall{ParseToolCall("toolu_1", "tool_search", `{"query":"weather"}`)}},
		{Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, ToolCallId: "toolu_1", Content: "Promoted: weather_get", ProviderOutput: po},
	}
	if _, err := m.Complete(context.Background(), &ModelRequest{Messages: hist, Tools: tools, Deferred: []string{"weather_get"}}, nil); err != nil {
		t.Fatal(err)
	}
	if p := s.Problems(); len(p) > 0 {
		t.Fatalf("problems %v", p)
	}
	reqs := s.Requests()
	if reqs[0].Tools[1].DeferLoading || !reqs[1].Tools[1].DeferLoading {
		t.Fatalf("defer_loading: unreferenced %v, referenced %v", reqs[0].Tools[1].DeferLoading, reqs[1].Tools[1].DeferLoading)
	}
	blocks := reqs[1].Messages[2].Content[0].ResultBlocks()
	if len(blocks) != 2 || blocks[1].Type != "tool_reference" || blocks[1].ToolName != "weather_get" {
		t.Fatalf("tool_result content %+v", blocks)
	}
}

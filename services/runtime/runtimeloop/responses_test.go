package runtimeloop

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakeresponses"
)

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestResponsesHistory: the adapter's input items are accepted by the strict
// fake — a tool_search whose call was refused before the search ran (no
// provider output) is still answered by an empty tool_search_output, a
// function call by its function_call_output — and the answer's calls,
// usage and finish reason are read back.
func TestResponsesHistory(t *testing.T) {
	fk := fakeresponses.New(fakeresponses.Reply{Calls: []fakeresponses.Call{{Name: "get", Args: `{"id":"1"}`}}, InputTokens: 7, OutputTokens: 2})
	defer fk.Close()
	m, err := NewResponsesModel(ResponsesSpec{BaseURL: fk.BaseURL(), Model: "gpt-fake"})
	if err != nil {
		t.Fatal(err)
	}
	get := &runtimev1.ToolSchema{Name: "get", Bound: mustStruct(t, map[string]any{"type": "function", "name": "get", "strict": false, "defer_loading": true,
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}}})}
	search := &runtimev1.ToolSchema{Name: "tool_search", Bound: mustStruct(t, map[string]any{"type": "tool_search", "execution": "client",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}})}
	msgs := []*runtimev1.Message{
		{Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: "get 1"},
		{Role: runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT, ToolCalls: []*runtimev1.ToolCall{{Id: "ts0", Name: "tool_search", Arguments: mustStruct(t, map[string]any{})}}},
		{Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, Name: "tool_search", ToolCallId: "ts0", Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, Content: "Error: query must not be empty"},
		{Role: runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT, ToolCalls: []*runtimev1.ToolCall{{Id: "ts1", Name: "tool_search", Arguments: mustStruct(t, map[string]any{"query": "get"})}}},
		{Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, Name: "tool_search", ToolCallId: "ts1", ProviderOutput: mustStruct(t, map[string]any{
			"type": "tool_search_output", "call_id": "ts1", "execution": "client", "status": "completed", "tools": []any{get.GetBound().AsMap()}})},
	}
	out, err := m.Complete(context.Background(), &ModelRequest{System: "be brief", Messages: msgs, Tools: []*runtimev1.ToolSchema{search, get}, Deferred: []string{"get"}}, nil)
	if err != nil {
		t.Fatalf("%v (fake: %v)", err, fk.Problems())
	}
	if len(out.ToolCalls) != 1 || out.ToolCalls[0].GetName() != "get" || out.ToolCalls[0].GetId() != "call_0_0" || out.FinishReason != "tool_calls" || out.Usage.GetTotalTokens() != 9 {
		t.Fatalf("answer %+v", out)
	}
	r := fk.Requests()[0]
	if r.Instructions != "be brief" || len(r.Items) != 5 || r.Items[2].Type != "tool_search_output" || len(r.Items[2].Tools) != 0 {
		t.Fatalf("request items %+v", r.Items)
	}
}

// TestResponsesFinish: incomplete answers map onto the loop's finish reasons.
func TestResponsesFinish(t *testing.T) {
	for body, want := range map[string]string{
		`{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","content":[{"type":"output_text","text":"par"}]}]}`: "length",
		`{"status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[]}`:                                                                      "content_filter",
		`{"status":"completed","output":[{"type":"message","content":[{"type":"refusal","refusal":"no"}]}]}`:                                                        "refusal",
		`{"status":"completed","output":[{"type":"tool_search_call","call_id":"c","execution":"client","arguments":{"query":"x"}}]}`:                                "tool_calls",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}))
		m, _ := NewResponsesModel(ResponsesSpec{BaseURL: srv.URL + "/v1/", Model: "m"})
		out, err := m.Complete(context.Background(), &ModelRequest{Messages: []*runtimev1.Message{{Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: "hi"}}}, nil)
		srv.Close()
		if err != nil || out.FinishReason != want {
			t.Errorf("%s: %v %v, want %s", body, out, err, want)
			continue
		}
		if want == "tool_calls" {
			b, _ := json.Marshal(out.ToolCalls[0].GetArguments().AsMap())
			if out.ToolCalls[0].GetName() != "tool_search" || !strings.Contains(string(b), `"query":"x"`) {
				t.Errorf("tool_search_call read as %v", out.ToolCalls[0])
			}
		}
	}
}

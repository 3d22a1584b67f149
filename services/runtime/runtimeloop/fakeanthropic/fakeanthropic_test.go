package fakeanthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func req(t *testing.T, s string) Request {
	t.Helper()
	var r Request
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

const tools = `"tools": [{"name": "search", "input_schema": {"type": "object", "properties": {}}},
  {"name": "weather", "defer_loading": true, "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]`

// TestValidateRefuses: each documented rule refuses a request breaking it.
func TestValidateRefuses(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"ok", `{"model": "m", "max_tokens": 5, ` + tools + `, "messages": [{"role": "user", "content": "hi"},
		  {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]},
		  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "tool_reference", "tool_name": "weather"}]}]},
		  {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "weather", "input": {"city": "Oslo"}}]},
		  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "is_error": true, "content": "boom"}, {"type": "text", "text": "go on"}]}]}`, ""},
		{"root not object", `{"model": "m", "max_tokens": 5, "tools": [{"name": "a", "input_schema": {"anyOf": [{"type": "object"}]}}], "messages": [{"role": "user", "content": "hi"}]}`, "Input should be 'object'"},
		{"root union", `{"model": "m", "max_tokens": 5, "tools": [{"name": "a", "input_schema": {"type": "object", "oneOf": [{}]}}], "messages": [{"role": "user", "content": "hi"}]}`, "at the top level"},
		{"bad name", `{"model": "m", "max_tokens": 5, "tools": [{"name": "a/b", "input_schema": {"type": "object"}}], "messages": [{"role": "user", "content": "hi"}]}`, "should match pattern"},
		{"all deferred", `{"model": "m", "max_tokens": 5, "tools": [{"name": "a", "defer_loading": true, "input_schema": {"type": "object"}}], "messages": [{"role": "user", "content": "hi"}]}`, "at least one tool"},
		{"no max_tokens", `{"model": "m", "messages": [{"role": "user", "content": "hi"}]}`, "max_tokens"},
		{"first assistant", `{"model": "m", "max_tokens": 5, "messages": [{"role": "assistant", "content": "hi"}]}`, "first message"},
		{"unknown tool_use id", `{"model": "m", "max_tokens": 5, ` + tools + `, "messages": [{"role": "user", "content": "hi"},
		  {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]},
		  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]}]}`, "unexpected `tool_use_id`"},
		{"unpaired tool_use", `{"model": "m", "max_tokens": 5, ` + tools + `, "messages": [{"role": "user", "content": "hi"},
		  {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}, {"type": "tool_use", "id": "t2", "name": "search", "input": {}}]},
		  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]}`, "without `tool_result` blocks immediately after: t2"},
		{"unpaired at end", `{"model": "m", "max_tokens": 5, ` + tools + `, "messages": [{"role": "user", "content": "hi"},
		  {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]}]}`, "without results"},
		{"result not first", `{"model": "m", "max_tokens": 5, ` + tools + `, "messages": [{"role": "user", "content": "hi"},
		  {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]},
		  {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]}`, "must come first"},
		{"missing defer_loading target", `{"model": "m", "max_tokens": 5, ` + tools + `, "messages": [{"role": "user", "content": "hi"},
		  {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]},
		  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "tool_reference", "tool_name": "stocks"}]}]}]}`, "does not name a tool bound with defer_loading"},
		{"deferred not loaded", `{"model": "m", "max_tokens": 5, ` + tools + `, "messages": [{"role": "user", "content": "hi"},
		  {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {}}]},
		  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]}`, "not loaded by a tool_reference"},
		{"empty text", `{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]}`, "non-empty"},
		{"consecutive", `{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}`, "alternate"},
	} {
		got := Validate(req(t, tc.body))
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: Validate = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestServeRefusesWithout400Headers(t *testing.T) {
	s := New(Reply{Text: "hi"})
	defer s.Close()
	r, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/messages", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no x-api-key: HTTP %d", resp.StatusCode)
	}
}

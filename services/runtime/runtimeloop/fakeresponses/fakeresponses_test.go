package fakeresponses

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const okParams = `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`

func req(t *testing.T, tools, input string) Request {
	t.Helper()
	var r Request
	if err := json.Unmarshal([]byte(`{"model":"m","tools":`+tools+`,"input":`+input+`}`), &r); err != nil {
		t.Fatal(err)
	}
	items, err := DecodeInput(r.Input)
	if err != nil {
		t.Fatal(err)
	}
	r.Items = items
	return r
}

// TestValidate: every documented refusal, each next to the valid request it
// breaks.
func TestValidate(t *testing.T) {
	search := `{"type":"tool_search","execution":"client","description":"d","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}`
	deferred := `{"type":"function","name":"get","parameters":` + okParams + `,"defer_loading":true}`
	tools := `[` + search + `,` + deferred + `]`
	call := `{"type":"tool_search_call","call_id":"ts1","execution":"client","arguments":{"query":"get"}}`
	output := `{"type":"tool_search_output","call_id":"ts1","execution":"client","status":"completed","tools":[` + deferred + `]}`
	fcall := `{"type":"function_call","call_id":"c1","name":"get","arguments":"{\"id\":\"1\"}"}`
	fout := `{"type":"function_call_output","call_id":"c1","output":"ok"}`
	user := `{"role":"user","content":"hi"}`
	valid := `[` + user + `,` + call + `,` + output + `,` + fcall + `,` + fout + `]`
	if p := Validate(req(t, tools, valid)); p != "" {
		t.Fatalf("valid request refused: %s", p)
	}
	if p := Validate(req(t, `[]`, `"hello"`)); p != "" {
		t.Fatalf("string input refused: %s", p)
	}
	for _, c := range []struct{ name, tools, input, want string }{
		{"unknown item type", tools, `[` + user + `,{"type":"reasoning","id":"r1","summary":[]}]`, `"reasoning"`},
		{"tool_search_output without its call", tools, `[` + user + `,` + output + `]`, "does not answer an earlier tool_search_call"},
		{"tool_search_output twice", tools, `[` + user + `,` + call + `,` + output + `,` + output + `]`, "does not answer"},
		{"tool_search_call unanswered", tools, `[` + user + `,` + call + `]`, "No tool search output found"},
		{"tool_search_output server-executed", tools, `[` + user + `,` + call + `,` + strings.Replace(output, `"client"`, `"server"`, 1) + `]`, "execution"},
		{"deferred function called before it was loaded", tools, `[` + user + `,` + fcall + `,` + fout + `]`, "no earlier tool_search_output loaded it"},
		{"function not in tools", `[` + search + `]`, `[` + user + `,` + fcall + `,` + fout + `]`, "is not in tools"},
		{"function_call unanswered", tools, `[` + user + `,` + call + `,` + output + `,` + fcall + `]`, "No tool output found"},
		{"function_call_output without its call", tools, `[` + user + `,` + fout + `]`, "No tool call found"},
		{"defer_loading without tool_search", `[` + deferred + `]`, `"hi"`, "require a tool_search"},
		{"server-executed tool_search", `[{"type":"tool_search"},` + deferred + `]`, `"hi"`, "client-executed"},
		{"root union", `[{"type":"function","name":"u","strict":false,"parameters":{"anyOf":[{"type":"object"}]}}]`, `"hi"`, "type: \"object\""},
		{"root anyOf beside type object", `[{"type":"function","name":"u","strict":false,"parameters":{"type":"object","anyOf":[{"type":"object"}]}}]`, `"hi"`, "anyOf"},
		{"strict without additionalProperties false", `[{"type":"function","name":"s","parameters":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}]`, `"hi"`, "additionalProperties"},
		{"strict optional property", `[{"type":"function","name":"s","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}]`, `"hi"`, "Missing 'a'"},
		{"strict allOf", `[{"type":"function","name":"s","parameters":{"type":"object","properties":{"a":{"allOf":[{"type":"string"}]}},"required":["a"],"additionalProperties":false}}]`, `"hi"`, "'allOf' is not permitted"},
		{"loaded function not strict-valid", tools, `[` + user + `,` + call + `,` + strings.Replace(output, `"additionalProperties":false`, `"additionalProperties":true`, 1) + `]`, "additionalProperties"},
		{"bad function name", `[{"type":"function","name":"a.b","strict":false,"parameters":{"type":"object"}}]`, `"hi"`, "does not match pattern"},
		{"empty message", `[]`, `[{"role":"user","content":""}]`, "must not be empty"},
	} {
		p := Validate(req(t, c.tools, c.input))
		if !strings.Contains(p, c.want) {
			t.Errorf("%s: got %q, want a refusal containing %q", c.name, p, c.want)
		}
	}
}

// TestServe: a scripted tool_search_call over HTTP, then a 400 for a request
// that does not answer it.
func TestServe(t *testing.T) {
	s := New(Reply{ToolSearch: `{"query":"x"}`}, Reply{Text: "never"})
	defer s.Close()
	do := func(body string) (int, map[string]any) {
		r, _ := http.NewRequest(http.MethodPost, s.BaseURL()+"responses", bytes.NewReader([]byte(body)))
		r.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	code, m := do(`{"model":"m","input":"hi","tools":[{"type":"tool_search","execution":"client","parameters":{"type":"object","properties":{}}}]}`)
	out, _ := m["output"].([]any)
	if code != 200 || len(out) != 1 || out[0].(map[string]any)["type"] != "tool_search_call" || out[0].(map[string]any)["execution"] != "client" {
		t.Fatalf("first answer %d %v", code, m)
	}
	item, _ := json.Marshal(out[0])
	code, m = do(`{"model":"m","input":[{"role":"user","content":"hi"},` + string(item) + `],"tools":[{"type":"tool_search","execution":"client","parameters":{"type":"object","properties":{}}}]}`)
	if code != 400 || !strings.Contains(m["error"].(map[string]any)["message"].(string), "No tool search output found") {
		t.Fatalf("unanswered call: %d %v", code, m)
	}
	if len(s.Problems()) != 1 {
		t.Fatalf("problems %v", s.Problems())
	}
}

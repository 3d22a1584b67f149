// Package fakeresponses is a strict, scripted OpenAI Responses API server
// for tests and walk-throughs (httptest, 127.0.0.1 only), written from the
// API's public documentation: the API reference of POST /v1/responses (the
// request's input items and tools, the Response object), "Function
// calling", "Structured Outputs" (Supported schemas, for strict: true) and
// "Tool search" (https://developers.openai.com/api/docs/guides/tools-tool-search,
// §Client-executed tool search). The item shapes follow the reference's
// ResponseInputItemToolSearchCallParam, ResponseToolSearchOutputItemParam and
// ToolSearchToolParam (also as the official openai-go SDK models them).
//
// It replays one scripted reply per request as one JSON Response object and
// answers HTTP 400 with an invalid_request_error, as the API does, to a
// request that breaks its rules:
//
//   - headers: Authorization: Bearer is required;
//   - model and a non-empty input are required; stream and
//     previous_response_id are refused (the fake is stateless and
//     non-streaming: a client sends the whole conversation);
//   - tools: type function or tool_search only; a function has a name
//     matching ^[a-zA-Z0-9_-]{1,64}$, unique, and parameters with type
//     "object" and no anyOf/oneOf/allOf/not/enum at the root; strict
//     defaults to true, and a strict function's parameters must be
//     strict-valid (every object has additionalProperties: false and lists
//     every property in required; no allOf, not, oneOf, if/then/else,
//     dependentRequired, dependentSchemas, patternProperties,
//     unevaluatedProperties; at most 10 levels and 5,000 properties); a
//     function with defer_loading needs a tool_search tool; tool_search is
//     at most one and client-executed (execution: "client", the only kind
//     a fake can serve) with an object parameters schema;
//   - input items: message (role user, system, developer or assistant,
//     non-empty content), function_call, function_call_output,
//     tool_search_call, tool_search_output; any other type is refused; a
//     function_call names a function of tools, and a deferred one only after
//     a tool_search_output loaded it; a function_call_output or
//     tool_search_output answers an earlier call of its kind by call_id,
//     once; a tool_search_output is client-executed, and every function it
//     loads obeys the function rules above; every call is answered before
//     the request ends.
//
// A reply may be computed from the request (Reply.From) so a script can
// call the function the previous tool_search_output loaded.
package fakeresponses

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Call is one scripted function_call.
type Call struct {
	// Name of the function.
	Name string
	// Args is the raw argument text ("" = {}).
	Args string
}

// Reply is one scripted response.
type Reply struct {
	// Text is the assistant message ("" = none).
	Text string
	// ToolSearch, when set, is the arguments JSON of a client-executed
	// tool_search_call item (before any function call).
	ToolSearch string
	// Calls are function_call items.
	Calls []Call
	// InputTokens, OutputTokens are reported as usage.
	InputTokens, OutputTokens int64
	// Status, when set, answers with this HTTP status instead.
	Status int
	// From, when set, computes the reply from the request instead.
	From func(Request) Reply
}

// Tool is a received tool definition.
type Tool struct {
	Type         string         `json:"type"`
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	Parameters   map[string]any `json:"parameters"`
	Strict       *bool          `json:"strict"`
	DeferLoading bool           `json:"defer_loading"`
	Execution    string         `json:"execution"`
}

// Item is a received input item.
type Item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Execution string          `json:"execution"`
	Status    string          `json:"status"`
	Tools     []Tool          `json:"tools"`
}

// Request is a received request.
type Request struct {
	Model              string          `json:"model"`
	Instructions       string          `json:"instructions"`
	Input              json.RawMessage `json:"input"`
	Tools              []Tool          `json:"tools"`
	Stream             bool            `json:"stream"`
	PreviousResponseID string          `json:"previous_response_id"`
	// Items is the decoded input (a string input is one user message).
	Items []Item `json:"-"`
	// Bytes is the request body's size.
	Bytes int `json:"-"`
}

// Loaded lists the functions the request's tool_search_output items
// loaded, in order.
func (r Request) Loaded() []string {
	var out []string
	for _, it := range r.Items {
		if it.Type == "tool_search_output" {
			for _, t := range it.Tools {
				out = append(out, t.Name)
			}
		}
	}
	return out
}

// LastOutput is the output text of the last function_call_output item.
func (r Request) LastOutput() string {
	for i := len(r.Items) - 1; i >= 0; i-- {
		if r.Items[i].Type == "function_call_output" {
			var s string
			if json.Unmarshal(r.Items[i].Output, &s) == nil {
				return s
			}
			return string(r.Items[i].Output)
		}
	}
	return ""
}

// ToolNames lists the function tools of the request (deferred included).
func (r Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		if t.Type == "function" {
			out = append(out, t.Name)
		}
	}
	return out
}

// Server is the scripted server.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	script   []Reply
	next     int
	requests []Request
	problems []string
}

// New starts a server replaying replies in order.
func New(replies ...Reply) *Server {
	s := &Server{script: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// BaseURL is the API root to configure a client with ("…/v1/").
func (s *Server) BaseURL() string { return s.URL + "/v1/" }

// Add appends replies to the script.
func (s *Server) Add(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Problems lists the rule violations answered with 400.
func (s *Server) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

var funcName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// rootRefused: "Root objects must not be anyOf and must be an object"
// (Structured Outputs); function parameters are a JSON Schema object.
var rootRefused = []string{"anyOf", "oneOf", "allOf", "not", "enum"}

// strictRefused are keywords strict mode does not support (Structured
// Outputs, Supported schemas: "composition: allOf, not, dependentRequired,
// dependentSchemas, if, then, else" are not supported; oneOf, the pattern
// and unevaluated property keywords are not in the supported list).
var strictRefused = []string{"allOf", "not", "oneOf", "if", "then", "else", "dependentRequired",
	"dependentSchemas", "patternProperties", "unevaluatedProperties", "propertyNames"}

// DecodeInput reads the input field: a string (one user message) or a
// list of items (a message may omit type).
func DecodeInput(raw json.RawMessage) ([]Item, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		c, _ := json.Marshal(s)
		return []Item{{Type: "message", Role: "user", Content: c}}, nil
	}
	var items []Item
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	for i := range items {
		if items[i].Type == "" && items[i].Role != "" {
			items[i].Type = "message"
		}
	}
	return items, nil
}

// Validate checks a request against the documented rules; "" = valid.
func Validate(r Request) string {
	if r.Model == "" {
		return "model: Missing required parameter: 'model'."
	}
	if r.Stream {
		return "stream: this fake serves non-streaming responses only"
	}
	if r.PreviousResponseID != "" {
		return "previous_response_id: this fake is stateless; send the whole conversation as input"
	}
	if len(r.Items) == 0 {
		return "input: Missing required parameter: 'input'."
	}
	funcs := map[string]Tool{}
	searches := 0
	deferred := 0
	for i, t := range r.Tools {
		switch t.Type {
		case "function":
			if p := checkFunction(fmt.Sprintf("tools[%d]", i), t); p != "" {
				return p
			}
			if _, dup := funcs[t.Name]; dup {
				return fmt.Sprintf("tools: Duplicate function name %q.", t.Name)
			}
			funcs[t.Name] = t
			if t.DeferLoading {
				deferred++
			}
		case "tool_search":
			searches++
			if searches > 1 {
				return fmt.Sprintf("tools[%d]: at most one tool_search tool", i)
			}
			if t.Execution != "client" {
				return fmt.Sprintf("tools[%d].execution: this fake serves client-executed tool search only (execution: \"client\"), got %q", i, t.Execution)
			}
			if t.Parameters == nil || t.Parameters["type"] != "object" {
				return fmt.Sprintf("tools[%d].parameters: a client-executed tool_search needs an object parameters schema", i)
			}
		default:
			return fmt.Sprintf("tools[%d].type: %q is not a tool type this fake serves (function, tool_search)", i, t.Type)
		}
	}
	if deferred > 0 && searches == 0 {
		return "tools: functions with defer_loading: true require a tool_search tool in tools"
	}
	loaded := map[string]bool{}
	openCalls := map[string]string{} // function call_id -> name
	openSearch := map[string]bool{}  // tool_search call_id
	seenCalls := map[string]bool{}   // every call_id ever seen
	for i, it := range r.Items {
		at := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "message":
			switch it.Role {
			case "user", "system", "developer", "assistant":
			default:
				return fmt.Sprintf("%s.role: Invalid value %q: expected user, system, developer or assistant", at, it.Role)
			}
			if p := checkContent(at, it); p != "" {
				return p
			}
		case "function_call":
			if it.CallID == "" || seenCalls[it.CallID] {
				return fmt.Sprintf("%s.call_id: must be non-empty and unique", at)
			}
			f, ok := funcs[it.Name]
			if !ok {
				return fmt.Sprintf("%s.name: function %q is not in tools", at, it.Name)
			}
			if f.DeferLoading && !loaded[it.Name] {
				return fmt.Sprintf("%s: function %q is deferred (defer_loading) and no earlier tool_search_output loaded it", at, it.Name)
			}
			var args string
			var obj map[string]any
			if json.Unmarshal(it.Arguments, &args) != nil || json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
				return fmt.Sprintf("%s.arguments: must be a string holding a JSON object", at)
			}
			seenCalls[it.CallID] = true
			openCalls[it.CallID] = it.Name
		case "function_call_output":
			if _, ok := openCalls[it.CallID]; !ok {
				return fmt.Sprintf("%s: No tool call found for function call output with call_id %s.", at, it.CallID)
			}
			delete(openCalls, it.CallID)
			if len(it.Output) == 0 || string(it.Output) == "null" {
				return fmt.Sprintf("%s.output: Missing required parameter.", at)
			}
		case "tool_search_call":
			if it.CallID == "" || seenCalls[it.CallID] {
				return fmt.Sprintf("%s.call_id: must be non-empty and unique", at)
			}
			if it.Execution != "client" {
				return fmt.Sprintf("%s.execution: must be \"client\" (the tool_search tool is client-executed)", at)
			}
			if len(it.Arguments) == 0 {
				return fmt.Sprintf("%s.arguments: Missing required parameter.", at)
			}
			seenCalls[it.CallID] = true
			openSearch[it.CallID] = true
		case "tool_search_output":
			if !openSearch[it.CallID] {
				return fmt.Sprintf("%s: tool_search_output with call_id %q does not answer an earlier tool_search_call", at, it.CallID)
			}
			delete(openSearch, it.CallID)
			if it.Execution != "client" {
				return fmt.Sprintf("%s.execution: must be \"client\" (retain execution: \"client\")", at)
			}
			if it.Tools == nil {
				return fmt.Sprintf("%s.tools: Missing required parameter.", at)
			}
			for j, t := range it.Tools {
				if t.Type != "function" {
					return fmt.Sprintf("%s.tools[%d].type: this fake loads functions only, got %q", at, j, t.Type)
				}
				if p := checkFunction(fmt.Sprintf("%s.tools[%d]", at, j), t); p != "" {
					return p
				}
				if _, declared := funcs[t.Name]; !declared {
					funcs[t.Name] = t
				}
				loaded[t.Name] = true
			}
		default:
			return fmt.Sprintf("%s.type: Invalid value %q: this fake accepts message, function_call, function_call_output, tool_search_call, tool_search_output", at, it.Type)
		}
	}
	if len(openCalls) > 0 {
		return "No tool output found for function call " + strings.Join(keys(openCalls), ", ") + "."
	}
	if len(openSearch) > 0 {
		return "No tool search output found for tool search call " + strings.Join(boolKeys(openSearch), ", ") + "."
	}
	return ""
}

func checkContent(at string, it Item) string {
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		if s == "" {
			return at + ".content: must not be empty"
		}
		return ""
	}
	var parts []struct {
		Type     string  `json:"type"`
		Text     *string `json:"text"`
		ImageURL string  `json:"image_url"`
	}
	if json.Unmarshal(it.Content, &parts) != nil || len(parts) == 0 {
		return at + ".content: must be a non-empty string or list of content parts"
	}
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			if p.Text == nil || *p.Text == "" {
				return fmt.Sprintf("%s.content[%d].text: must not be empty", at, j)
			}
		case "input_image":
			if it.Role != "user" || !(strings.HasPrefix(p.ImageURL, "data:image/") && strings.Contains(p.ImageURL, ";base64,") || strings.HasPrefix(p.ImageURL, "https://")) {
				return fmt.Sprintf("%s.content[%d].image_url: an input_image of a user message needs a data:image/...;base64 or https URL", at, j)
			}
		case "input_file", "refusal":
		default:
			return fmt.Sprintf("%s.content[%d].type: Invalid value %q", at, j, p.Type)
		}
	}
	return ""
}

// checkFunction applies the function rules to a tool (top level or loaded).
func checkFunction(at string, t Tool) string {
	if !funcName.MatchString(t.Name) {
		return fmt.Sprintf("%s.name: Invalid '%s': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$' (at most 64).", at, t.Name)
	}
	p := t.Parameters
	if p == nil {
		return fmt.Sprintf("%s.parameters: Missing required parameter.", at)
	}
	if p["type"] != "object" {
		return fmt.Sprintf("%s.parameters: Invalid schema for function '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: %v'.", at, t.Name, p["type"])
	}
	for _, k := range rootRefused {
		if _, ok := p[k]; ok {
			return fmt.Sprintf("%s.parameters: Invalid schema for function '%s': schema must have type 'object' and not have '%s' at the top level.", at, t.Name, k)
		}
	}
	if t.Strict == nil || *t.Strict {
		st := &strictWalk{}
		if msg := st.walk(p, "", 1); msg != "" {
			return fmt.Sprintf("%s.parameters: Invalid schema for function '%s': In context=(%s), %s", at, t.Name, msg, "(strict mode)")
		}
	}
	return ""
}

type strictWalk struct{ props int }

func (w *strictWalk) walk(s map[string]any, path string, depth int) string {
	if depth > 10 {
		return fmt.Sprintf("%q: schema exceeds the 10 levels of nesting strict mode allows", path)
	}
	for _, k := range strictRefused {
		if _, ok := s[k]; ok {
			return fmt.Sprintf("%q: '%s' is not permitted", path, k)
		}
	}
	if _, ref := s["$ref"]; ref {
		return ""
	}
	isObject := s["type"] == "object"
	if ts, ok := s["type"].([]any); ok {
		for _, t := range ts {
			isObject = isObject || t == "object"
		}
	}
	if _, hasProps := s["properties"]; hasProps {
		isObject = true
	}
	if isObject {
		if ap, ok := s["additionalProperties"].(bool); !ok || ap {
			return fmt.Sprintf("%q: 'additionalProperties' is required to be supplied and to be false", path)
		}
		props, _ := s["properties"].(map[string]any)
		req := map[string]bool{}
		if rs, ok := s["required"].([]any); ok {
			for _, r := range rs {
				if n, ok := r.(string); ok {
					req[n] = true
				}
			}
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if !req[n] {
				return fmt.Sprintf("%q: 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'", path, n)
			}
			w.props++
			if w.props > 5000 {
				return "strict mode allows at most 5000 object properties in total"
			}
			sub, ok := props[n].(map[string]any)
			if !ok {
				return fmt.Sprintf("%q: property '%s' must be a schema object", path, n)
			}
			if msg := w.walk(sub, path+"/properties/"+n, depth+1); msg != "" {
				return msg
			}
		}
	}
	if it, ok := s["items"].(map[string]any); ok {
		if msg := w.walk(it, path+"/items", depth+1); msg != "" {
			return msg
		}
	}
	if bs, ok := s["anyOf"].([]any); ok {
		for i, b := range bs {
			if m, ok := b.(map[string]any); ok {
				if msg := w.walk(m, fmt.Sprintf("%s/anyOf/%d", path, i), depth+1); msg != "" {
					return msg
				}
			}
		}
	}
	for _, dk := range []string{"$defs", "definitions"} {
		if defs, ok := s[dk].(map[string]any); ok {
			names := make([]string, 0, len(defs))
			for n := range defs {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if m, ok := defs[n].(map[string]any); ok {
					if msg := w.walk(m, path+"/"+dk+"/"+n, depth); msg != "" {
						return msg
					}
				}
			}
		}
	}
	return ""
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func boolKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		writeErr(w, http.StatusNotFound, "Not found")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		writeErr(w, http.StatusUnauthorized, "You didn't provide an API key.")
		return
	}
	var body json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&body); err != nil {
		writeErr(w, http.StatusBadRequest, "We could not parse the JSON body of your request.")
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeErr(w, http.StatusBadRequest, "invalid request: "+err.Error())
		return
	}
	items, err := DecodeInput(req.Input)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "input: "+err.Error())
		return
	}
	req.Items, req.Bytes = items, len(body)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if p := Validate(req); p != "" {
		s.problems = append(s.problems, p)
		s.mu.Unlock()
		writeErr(w, http.StatusBadRequest, p)
		return
	}
	if s.next >= len(s.script) {
		s.mu.Unlock()
		writeErr(w, http.StatusBadRequest, "fakeresponses: script exhausted")
		return
	}
	rep := s.script[s.next]
	n := s.next
	s.next++
	s.mu.Unlock()
	if rep.From != nil {
		rep = rep.From(req)
	}
	if rep.Status != 0 {
		writeErr(w, rep.Status, fmt.Sprintf("fakeresponses: scripted HTTP %d", rep.Status))
		return
	}
	output := []map[string]any{}
	if rep.ToolSearch != "" {
		output = append(output, map[string]any{"type": "tool_search_call", "id": fmt.Sprintf("tsc_%d", n),
			"call_id": fmt.Sprintf("call_ts_%d", n), "execution": "client", "status": "completed",
			"arguments": json.RawMessage(rep.ToolSearch)})
	}
	for i, c := range rep.Calls {
		args := c.Args
		if args == "" {
			args = "{}"
		}
		output = append(output, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", n, i),
			"call_id": fmt.Sprintf("call_%d_%d", n, i), "name": c.Name, "arguments": args, "status": "completed"})
	}
	if rep.Text != "" {
		output = append(output, map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", n), "status": "completed",
			"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1764547200,
		"status": "completed", "model": req.Model, "output": output, "parallel_tool_calls": true, "tool_choice": "auto",
		"usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": rep.OutputTokens,
			"total_tokens":         rep.InputTokens + rep.OutputTokens,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}})
}

func writeErr(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": msg, "param": nil, "code": nil}})
	_, _ = w.Write(b)
}

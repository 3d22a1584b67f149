// Package fakeanthropic is a strict, scripted Anthropic Messages API server
// for tests (httptest, 127.0.0.1 only), written from the API's public
// documentation (Messages API reference; "Define tools", "Handle tool
// calls", "Tool search tool", "Streaming Messages"). It replays one
// scripted reply per request — as one JSON Message, or as the documented
// server-sent event sequence (message_start, content_block_start,
// content_block_delta with text_delta / input_json_delta, content_block_stop,
// message_delta with stop_reason and usage, message_stop) when the request
// asks for a stream — and answers HTTP 400 with an invalid_request_error,
// as the API does, to a request that breaks its rules:
//
//   - headers: a key (x-api-key, or the Authorization: Bearer header the
//     official Go SDK sends) and anthropic-version are required;
//   - model, max_tokens (≥ 1) and a non-empty messages list are required;
//     roles are user or assistant, the first message is a user message, and
//     roles alternate (the API merges consecutive turns; the fake refuses
//     them so an adapter's merging is tested);
//   - tools: a name matching ^[a-zA-Z0-9_-]{1,64}$, unique; input_schema
//     with type "object" and no oneOf, allOf or anyOf at the top level;
//     at least one tool that is not deferred (defer_loading);
//   - content: text blocks are non-empty; every tool_use of an assistant
//     message is answered by a tool_result in the next user message, and
//     the tool_result blocks come first in it; a tool_result names a
//     tool_use id of the message just before (unknown ids are refused); a
//     tool_use names a bound tool, and a deferred tool only after a
//     tool_reference to it was returned; a tool_reference names a tool
//     bound with defer_loading: true.
//
// A reply may be computed from the request (Reply.From) so a test can
// answer with the tool the previous tool_reference loaded.
package fakeanthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
)

// ToolUse is one scripted tool_use block.
type ToolUse struct {
	// ID of the block ("" = generated, "toolu_<n>_<i>").
	ID string
	// Name of the tool.
	Name string
	// Input is the raw input JSON (must be an object; "" = {}).
	Input string
}

// Reply is one scripted response.
type Reply struct {
	// Text is the assistant text ("" = no text block).
	Text string
	// ToolUses are tool_use blocks after the text.
	ToolUses []ToolUse
	// StopReason; "" = "tool_use" when there are tool uses, else "end_turn".
	StopReason string
	// InputTokens, OutputTokens, CacheReadTokens are reported as usage.
	InputTokens, OutputTokens, CacheReadTokens int64
	// Status, when set, answers with this HTTP status instead.
	Status int
	// From, when set, computes the reply from the request instead.
	From func(Request) Reply
}

// Block is a received content block.
type Block struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   *bool           `json:"is_error"`
	Content   json.RawMessage `json:"content"`
	ToolName  string          `json:"tool_name"`
	// Source is an image block's source.
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// ResultBlocks decodes a tool_result's content (a string or a list of blocks).
func (b Block) ResultBlocks() []Block {
	if len(b.Content) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return []Block{{Type: "text", Text: &s}}
	}
	var out []Block
	_ = json.Unmarshal(b.Content, &out)
	return out
}

// Message is a received message.
type Message struct {
	Role    string
	Content []Block
}

// UnmarshalJSON reads content given as a string or as blocks.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	var s string
	if json.Unmarshal(raw.Content, &s) == nil {
		m.Content = []Block{{Type: "text", Text: &s}}
		return nil
	}
	return json.Unmarshal(raw.Content, &m.Content)
}

// Tool is a received tool definition.
type Tool struct {
	Type         string         `json:"type"`
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	InputSchema  map[string]any `json:"input_schema"`
	DeferLoading bool           `json:"defer_loading"`
}

// Request is a received request.
type Request struct {
	Model     string          `json:"model"`
	MaxTokens int64           `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"`
	Messages  []Message       `json:"messages"`
	Tools     []Tool          `json:"tools"`
	// Bytes is the request body's size.
	Bytes int `json:"-"`
}

// SystemText returns the system prompt's text.
func (r Request) SystemText() string {
	var s string
	if json.Unmarshal(r.System, &s) == nil {
		return s
	}
	var bs []Block
	_ = json.Unmarshal(r.System, &bs)
	var parts []string
	for _, b := range bs {
		if b.Text != nil {
			parts = append(parts, *b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolNames lists the bound tools, deferred ones included.
func (r Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Name)
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

// BaseURL is the API root to configure a client with.
func (s *Server) BaseURL() string { return s.URL + "/" }

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

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Validate checks a request against the documented rules; "" = valid.
func Validate(r Request) string {
	if r.Model == "" {
		return "model: Field required"
	}
	if r.MaxTokens < 1 {
		return "max_tokens: Field required (at least 1)"
	}
	if len(r.Messages) == 0 {
		return "messages: at least one message is required"
	}
	tools := map[string]Tool{}
	nonDeferred := 0
	for i, t := range r.Tools {
		if t.Type != "" && t.Type != "custom" {
			return fmt.Sprintf("tools.%d.type: only custom tools are served by this fake", i)
		}
		if !toolName.MatchString(t.Name) {
			return fmt.Sprintf("tools.%d.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
		}
		if _, dup := tools[t.Name]; dup {
			return fmt.Sprintf("tools: Tool names must be unique (%s)", t.Name)
		}
		if t.InputSchema == nil || t.InputSchema["type"] != "object" {
			return fmt.Sprintf("tools.%d.input_schema.type: Input should be 'object'", i)
		}
		for _, k := range []string{"oneOf", "allOf", "anyOf"} {
			if _, ok := t.InputSchema[k]; ok {
				return fmt.Sprintf("tools.%d.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level", i)
			}
		}
		if !t.DeferLoading {
			nonDeferred++
		}
		tools[t.Name] = t
	}
	if len(r.Tools) > 0 && nonDeferred == 0 {
		return "tools: at least one tool must not have defer_loading set"
	}
	loaded := map[string]bool{}
	var open map[string]bool
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i == 0 && m.Role != "user" {
			return "messages.0.role: the first message must use the user role"
		}
		if i > 0 && r.Messages[i-1].Role == m.Role {
			return fmt.Sprintf("messages.%d: roles must alternate between user and assistant (fake: consecutive %s turns)", i, m.Role)
		}
		if len(m.Content) == 0 {
			return fmt.Sprintf("messages.%d.content: must not be empty", i)
		}
		switch m.Role {
		case "assistant":
			open = map[string]bool{}
			for j, b := range m.Content {
				switch b.Type {
				case "text":
					if b.Text == nil || *b.Text == "" {
						return fmt.Sprintf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
					}
				case "tool_use":
					if b.ID == "" || open[b.ID] {
						return fmt.Sprintf("messages.%d.content.%d: tool_use ids must be unique and non-empty", i, j)
					}
					t, ok := tools[b.Name]
					if !ok {
						return fmt.Sprintf("messages.%d.content.%d: tool_use names a tool that is not in tools: %s", i, j, b.Name)
					}
					if t.DeferLoading && !loaded[b.Name] {
						return fmt.Sprintf("messages.%d.content.%d: tool %s is deferred and was not loaded by a tool_reference", i, j, b.Name)
					}
					var in map[string]any
					if json.Unmarshal(b.Input, &in) != nil || in == nil {
						return fmt.Sprintf("messages.%d.content.%d.input: Input should be a valid dictionary", i, j)
					}
					open[b.ID] = true
				default:
					return fmt.Sprintf("messages.%d.content.%d.type: %q is not an assistant block this fake accepts", i, j, b.Type)
				}
			}
		case "user":
			seenOther := false
			for j, b := range m.Content {
				switch b.Type {
				case "tool_result":
					if seenOther {
						return fmt.Sprintf("messages.%d.content.%d: tool_result blocks must come first in the user message", i, j)
					}
					if !open[b.ToolUseID] {
						return fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
					}
					delete(open, b.ToolUseID)
					for k, rb := range b.ResultBlocks() {
						switch rb.Type {
						case "text":
							if rb.Text == nil || *rb.Text == "" {
								return fmt.Sprintf("messages.%d.content.%d.content.%d.text: text content blocks must be non-empty", i, j, k)
							}
						case "tool_reference":
							t, ok := tools[rb.ToolName]
							if !ok || !t.DeferLoading {
								return fmt.Sprintf("messages.%d.content.%d.content.%d: tool_reference %q does not name a tool bound with defer_loading", i, j, k, rb.ToolName)
							}
							loaded[rb.ToolName] = true
						case "image":
							if rb.Source == nil || rb.Source.Type != "base64" || !imageMediaTypes[rb.Source.MediaType] || !validBase64(rb.Source.Data) {
								return fmt.Sprintf("messages.%d.content.%d.content.%d.source: an image needs a base64 source with media_type image/jpeg, image/png, image/gif or image/webp", i, j, k)
							}
						case "document", "search_result":
						default:
							return fmt.Sprintf("messages.%d.content.%d.content.%d.type: %q is not a tool_result block", i, j, k, rb.Type)
						}
					}
				case "text":
					seenOther = true
					if b.Text == nil || *b.Text == "" {
						return fmt.Sprintf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
					}
				default:
					seenOther = true
				}
			}
			if len(open) > 0 {
				return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i-1, strings.Join(sortedIDs(open), ", "))
			}
			open = nil
		}
	}
	if len(open) > 0 {
		return fmt.Sprintf("messages: the conversation ends with tool_use blocks without results: %s", strings.Join(sortedIDs(open), ", "))
	}
	return ""
}

func sortedIDs(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		writeErr(w, http.StatusNotFound, "not_found_error", "Not found")
		return
	}
	if r.Header.Get("x-api-key") == "" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		writeErr(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		writeErr(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	var body json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&body); err != nil {
		writeErr(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON body")
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeErr(w, http.StatusBadRequest, "invalid_request_error", "invalid request: "+err.Error())
		return
	}
	req.Bytes = len(body)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if p := Validate(req); p != "" {
		s.problems = append(s.problems, p)
		s.mu.Unlock()
		writeErr(w, http.StatusBadRequest, "invalid_request_error", p)
		return
	}
	if s.next >= len(s.script) {
		s.mu.Unlock()
		writeErr(w, http.StatusBadRequest, "invalid_request_error", "fakeanthropic: script exhausted")
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
		writeErr(w, rep.Status, "api_error", fmt.Sprintf("fakeanthropic: scripted HTTP %d", rep.Status))
		return
	}
	stop := rep.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(rep.ToolUses) > 0 {
			stop = "tool_use"
		}
	}
	var content []map[string]any
	if rep.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": rep.Text})
	}
	for i, tu := range rep.ToolUses {
		in := tu.Input
		if in == "" {
			in = "{}"
		}
		id := tu.ID
		if id == "" {
			id = fmt.Sprintf("toolu_%d_%d", n, i)
		}
		content = append(content, map[string]any{"type": "tool_use", "id": id, "name": tu.Name, "input": json.RawMessage(in)})
	}
	usage := map[string]any{"input_tokens": rep.InputTokens, "output_tokens": rep.OutputTokens,
		"cache_read_input_tokens": rep.CacheReadTokens, "cache_creation_input_tokens": 0}
	msgID := fmt.Sprintf("msg_%d", n)
	if !req.Stream {
		if content == nil {
			content = []map[string]any{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(event string, data map[string]any) {
		data["type"] = event
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
	}
	send("message_start", map[string]any{"message": map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": 1, "cache_read_input_tokens": rep.CacheReadTokens, "cache_creation_input_tokens": 0}}})
	send("ping", map[string]any{})
	for i, c := range content {
		switch c["type"] {
		case "text":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, word := range splitWords(c["text"].(string)) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": word}})
			}
		case "tool_use":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			raw := string(c["input"].(json.RawMessage))
			half := len(raw) / 2
			for _, part := range []string{raw[:half], raw[half:]} {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		send("content_block_stop", map[string]any{"index": i})
	}
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.OutputTokens}})
	send("message_stop", map[string]any{})
}

func splitWords(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func writeErr(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	_, _ = w.Write(b)
}

var imageMediaTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

func validBase64(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && len(b) > 0
}

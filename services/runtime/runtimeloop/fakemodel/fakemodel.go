// Package fakemodel is a scripted OpenAI-compatible chat-completions server
// for tests (httptest, 127.0.0.1 only): it replays a list of replies, one per
// request, streaming them as server-sent events when the request asks for a
// stream (content in word-sized chunks, tool-call arguments in two halves,
// usage in a trailing chunk) and as one JSON body otherwise. It records
// every request and checks that the conversation it receives is one a
// provider would accept (every assistant tool call answered by a tool
// message, no orphan tool message, provider-safe tool names); a request that
// breaks those rules gets HTTP 400, as a real provider would answer; so
// does a bound tool whose parameters are not an object schema at the root.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
)

// Call is one scripted tool call.
type Call struct {
	// ID of the call ("" = generated).
	ID string
	// Name of the tool.
	Name string
	// Args is the raw argument text (any string, also invalid JSON).
	Args string
}

// Reply is one scripted model response.
type Reply struct {
	// Content is the assistant text.
	Content string
	// ToolCalls are the tool calls.
	ToolCalls []Call
	// FinishReason; "" = "tool_calls" when there are calls, else "stop".
	FinishReason string
	// PromptTokens and CompletionTokens are reported as usage.
	PromptTokens, CompletionTokens int64
	// Hold, when set, blocks the reply until it is closed or the client goes away.
	Hold chan struct{}
	// Status, when set, answers with this HTTP status and an error body
	// instead (e.g. 503 to exercise the client's retries).
	Status int
}

// Message is a received conversation message.
type Message struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// Text returns the message content as text.
func (m Message) Text() string {
	switch v := m.Content.(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, p := range v {
			if mp, ok := p.(map[string]any); ok {
				if s, ok := mp["text"].(string); ok {
					b.WriteString(s)
				}
			}
		}
		return b.String()
	}
	return ""
}

// ImageURLs returns the URLs of the message's image_url content parts.
func (m Message) ImageURLs() []string {
	var out []string
	parts, _ := m.Content.([]any)
	for _, p := range parts {
		if mp, ok := p.(map[string]any); ok && mp["type"] == "image_url" {
			iu, _ := mp["image_url"].(map[string]any)
			u, _ := iu["url"].(string)
			out = append(out, u)
		}
	}
	return out
}

// Request is a received request.
type Request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []Message `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// ToolNames lists the bound tool names.
func (r Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// System returns the text of the system messages.
func (r Request) System() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "developer" {
			parts = append(parts, m.Text())
		}
	}
	return strings.Join(parts, "\n")
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

// Problems lists the protocol violations seen (empty when all requests were valid).
func (s *Server) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validate checks the provider rules on a conversation.
func validate(r Request) string {
	open := map[string]bool{}
	for i, m := range r.Messages {
		switch m.Role {
		case "assistant":
			if len(open) > 0 {
				return fmt.Sprintf("messages[%d]: assistant message before every tool call was answered", i)
			}
			for _, tc := range m.ToolCalls {
				if !toolName.MatchString(tc.Function.Name) {
					return fmt.Sprintf("messages[%d]: invalid tool name %q", i, tc.Function.Name)
				}
				if tc.ID == "" {
					return fmt.Sprintf("messages[%d]: tool call without id", i)
				}
				if !json.Valid([]byte(tc.Function.Arguments)) {
					return fmt.Sprintf("messages[%d]: tool call arguments are not JSON", i)
				}
				open[tc.ID] = true
			}
		case "tool":
			if len(m.ImageURLs()) > 0 {
				return fmt.Sprintf("messages[%d]: a tool message cannot carry image parts", i)
			}
			if !open[m.ToolCallID] {
				return fmt.Sprintf("messages[%d]: tool message for unknown call %q", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		default:
			if len(open) > 0 {
				return fmt.Sprintf("messages[%d]: %s message before every tool call was answered", i, m.Role)
			}
			for _, u := range m.ImageURLs() {
				if !strings.HasPrefix(u, "data:image/") || !strings.Contains(u, ";base64,") {
					return fmt.Sprintf("messages[%d]: image_url %.40q is not a data:image/...;base64 URL", i, u)
				}
			}
		}
	}
	if len(open) > 0 {
		return "conversation ends with unanswered tool calls"
	}
	for i, t := range r.Tools {
		if !toolName.MatchString(t.Function.Name) {
			return fmt.Sprintf("invalid bound tool name %q", t.Function.Name)
		}
		// Chat Completions function parameters are "a JSON Schema object":
		// a root of another type or a root union is answered 400.
		if p := t.Function.Parameters; p != nil {
			if p["type"] != "object" {
				return fmt.Sprintf("tools[%d].function.parameters: Invalid schema for function '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: %v'.", i, t.Function.Name, p["type"])
			}
			for _, k := range []string{"anyOf", "oneOf", "allOf", "not", "enum"} {
				if _, ok := p[k]; ok {
					return fmt.Sprintf("tools[%d].function.parameters: Invalid schema for function '%s': '%s' is not permitted at the top level.", i, t.Function.Name, k)
				}
			}
		}
	}
	return ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if p := validate(req); p != "" {
		s.problems = append(s.problems, p)
		s.mu.Unlock()
		writeErr(w, http.StatusBadRequest, p)
		return
	}
	if s.next >= len(s.script) {
		s.mu.Unlock()
		writeErr(w, http.StatusBadRequest, "fakemodel: script exhausted")
		return
	}
	rep := s.script[s.next]
	n := s.next
	s.next++
	s.mu.Unlock()
	if rep.Hold != nil {
		select {
		case <-rep.Hold:
		case <-r.Context().Done():
			return
		}
	}
	if rep.Status != 0 {
		writeErr(w, rep.Status, fmt.Sprintf("fakemodel: scripted HTTP %d", rep.Status))
		return
	}
	finish := rep.FinishReason
	if finish == "" {
		finish = "stop"
		if len(rep.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	id := fmt.Sprintf("chatcmpl-%d", n)
	usage := map[string]any{"prompt_tokens": rep.PromptTokens, "completion_tokens": rep.CompletionTokens, "total_tokens": rep.PromptTokens + rep.CompletionTokens}
	if !req.Stream {
		var calls []any
		for i, c := range rep.ToolCalls {
			calls = append(calls, map[string]any{"id": callID(c, n, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args}})
		}
		msg := map[string]any{"role": "assistant", "content": rep.Content}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(delta map[string]any, finish any, u any) {
		chunk := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if delta == nil {
			chunk["choices"] = []any{}
		}
		if u != nil {
			chunk["usage"] = u
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	send(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	for _, word := range splitWords(rep.Content) {
		send(map[string]any{"content": word}, nil, nil)
	}
	for i, c := range rep.ToolCalls {
		send(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": callID(c, n, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil, nil)
		half := len(c.Args) / 2
		for _, part := range []string{c.Args[:half], c.Args[half:]} {
			if part != "" {
				send(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil, nil)
			}
		}
	}
	send(map[string]any{}, finish, nil)
	if req.StreamOptions.IncludeUsage {
		send(nil, nil, usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func callID(c Call, n, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("call_%d_%d", n, i)
}

// splitWords cuts text into chunks that each end after a space.
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

func writeErr(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
	_, _ = w.Write(b)
}

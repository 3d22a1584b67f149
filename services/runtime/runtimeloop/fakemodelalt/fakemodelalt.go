// Package fakemodelalt is a second, independently written fake of an
// OpenAI-compatible chat-completions endpoint. Unlike fakemodel (a fixed
// script), it is reactive: a Brain function looks at the conversation it
// receives and decides the next turn, so tests state rules ("after a
// tool_search result, call the promoted tool") rather than a sequence. Its
// wire format differs on purpose: streams carry content one rune per chunk,
// the tool name split over two chunks, arguments a few bytes at a time,
// "data:" lines without a space, SSE comment lines, and the usage inside the
// finishing chunk instead of a trailing one.
package fakemodelalt

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
)

// Call is a tool call the brain makes.
type Call struct {
	// Name of the tool.
	Name string
	// Args is the argument text.
	Args string
}

// Turn is the brain's answer.
type Turn struct {
	// Text is the assistant content.
	Text string
	// Calls are the tool calls.
	Calls []Call
	// Finish overrides the finish reason.
	Finish string
	// In and Out are reported token counts.
	In, Out int64
}

// Msg is one received message.
type Msg struct {
	// Role as sent.
	Role string
	// Text of the content.
	Text string
	// ToolCallID of a tool message.
	ToolCallID string
	// Calls of an assistant message (names).
	Calls []string
}

// Conversation is what the brain sees.
type Conversation struct {
	// Msgs are the messages, system included.
	Msgs []Msg
	// Tools are the bound tool names.
	Tools []string
	// Stream tells whether the client asked for a stream.
	Stream bool
}

// Last returns the last message.
func (c Conversation) Last() Msg {
	if len(c.Msgs) == 0 {
		return Msg{}
	}
	return c.Msgs[len(c.Msgs)-1]
}

// Has reports whether a tool name is bound.
func (c Conversation) Has(tool string) bool {
	for _, t := range c.Tools {
		if t == tool {
			return true
		}
	}
	return false
}

// Brain decides the next turn.
type Brain func(c Conversation) Turn

// Server is the reactive fake.
type Server struct {
	*httptest.Server
	brain Brain
	n     atomic.Int64
	mu    sync.Mutex
	seen  []Conversation
}

// Start serves brain on 127.0.0.1.
func Start(brain Brain) *Server {
	s := &Server{brain: brain}
	s.Server = httptest.NewServer(s)
	return s
}

// BaseURL is the API root.
func (s *Server) BaseURL() string { return s.URL + "/v1/" }

// Seen returns the conversations received.
func (s *Server) Seen() []Conversation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Conversation(nil), s.seen...)
}

type wireReq struct {
	Stream   bool `json:"stream"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

type wireCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireDelta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []wireCall `json:"tool_calls,omitempty"`
}

type wireUsage struct {
	Prompt     int64 `json:"prompt_tokens"`
	Completion int64 `json:"completion_tokens"`
	Total      int64 `json:"total_tokens"`
}

type wireChoice struct {
	Index   int         `json:"index"`
	Delta   *wireDelta  `json:"delta,omitempty"`
	Message *wireMsgOut `json:"message,omitempty"`
	Finish  *string     `json:"finish_reason"`
}

type wireMsgOut struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	ToolCalls []wireCall `json:"tool_calls,omitempty"`
}

type wireResp struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage,omitempty"`
}

func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	out := ""
	for _, p := range parts {
		out += p.Text
	}
	return out
}

// ServeHTTP answers POST .../chat/completions.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in wireReq
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&in) != nil {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"bad request"}}`))
		return
	}
	conv := Conversation{Stream: in.Stream}
	for _, m := range in.Messages {
		msg := Msg{Role: m.Role, Text: text(m.Content), ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.Calls = append(msg.Calls, c.Function.Name)
		}
		conv.Msgs = append(conv.Msgs, msg)
	}
	for _, t := range in.Tools {
		conv.Tools = append(conv.Tools, t.Function.Name)
	}
	s.mu.Lock()
	s.seen = append(s.seen, conv)
	s.mu.Unlock()
	turn := s.brain(conv)
	n := s.n.Add(1)
	finish := turn.Finish
	if finish == "" {
		finish = "stop"
		if len(turn.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	usage := &wireUsage{turn.In, turn.Out, turn.In + turn.Out}
	id := fmt.Sprintf("alt-%d", n)
	var calls []wireCall
	for i, c := range turn.Calls {
		wc := wireCall{Index: i, ID: fmt.Sprintf("alt_%d_%d", n, i), Type: "function"}
		wc.Function.Name, wc.Function.Arguments = c.Name, c.Args
		calls = append(calls, wc)
	}
	if !in.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(wireResp{ID: id, Object: "chat.completion", Created: 2, Model: "alt",
			Choices: []wireChoice{{Message: &wireMsgOut{Role: "assistant", Content: turn.Text, ToolCalls: calls}, Finish: &finish}}, Usage: usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	bw := bufio.NewWriter(w)
	emit := func(c wireResp) {
		b, _ := json.Marshal(c)
		fmt.Fprintf(bw, ": tick\ndata:%s\n\n", b)
		_ = bw.Flush()
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	chunk := func(d *wireDelta) wireResp {
		return wireResp{ID: id, Object: "chat.completion.chunk", Created: 2, Model: "alt", Choices: []wireChoice{{Delta: d}}}
	}
	for _, r := range turn.Text {
		s := string(r)
		emit(chunk(&wireDelta{Content: &s}))
	}
	for i, c := range calls {
		mid := len(c.Function.Name) / 2
		first := wireCall{Index: i, ID: c.ID, Type: "function"}
		first.Function.Name = c.Function.Name[:mid]
		emit(chunk(&wireDelta{Role: "assistant", ToolCalls: []wireCall{first}}))
		second := wireCall{Index: i}
		second.Function.Name = c.Function.Name[mid:]
		emit(chunk(&wireDelta{ToolCalls: []wireCall{second}}))
		args := c.Function.Arguments
		for len(args) > 0 {
			k := min(3, len(args))
			part := wireCall{Index: i}
			part.Function.Arguments = args[:k]
			args = args[k:]
			emit(chunk(&wireDelta{ToolCalls: []wireCall{part}}))
		}
	}
	last := chunk(&wireDelta{})
	last.Choices[0].Finish = &finish
	last.Usage = usage
	emit(last)
	fmt.Fprint(bw, "data:[DONE]\n\n")
	_ = bw.Flush()
}

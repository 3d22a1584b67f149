package runtimeloop

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodel"
)

// BenchmarkTurnInMemory measures the loop's own overhead for one
// search → call → answer turn (three model calls, two tool calls) against
// in-memory fakes of every interface.
func BenchmarkTurnInMemory(b *testing.B) {
	m := &funcModel{f: func(_ context.Context, n int, _ *ModelRequest) (*ModelResponse, error) {
		switch n % 3 {
		case 0:
			return calls(call("tool_search", `{"query":"weather"}`)), nil
		case 1:
			return calls(call("weather_get", `{"city":"Paris"}`)), nil
		}
		return answer("sunny"), nil
	}}
	w := newWorld()
	e, err := New(Config{}, Deps{Assembler: w, Executor: w, Authorizer: w, Store: w, Models: single(m), Threads: w})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("b%d", i)
		w.mu.Lock()
		w.thread(id)
		w.mu.Unlock()
		if r, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: id, Message: "weather?"}, nil); r.GetReason() != "" {
			b.Fatal(r)
		}
	}
}

// BenchmarkTurnOpenAIStreaming is the same turn through the openai-go
// client and the scripted SSE server on loopback.
func BenchmarkTurnOpenAIStreaming(b *testing.B) {
	s := fakemodel.New()
	defer s.Close()
	m, err := NewOpenAIModel(OpenAISpec{BaseURL: s.BaseURL(), Model: "fake", Stream: true})
	if err != nil {
		b.Fatal(err)
	}
	w := newWorld()
	e, err := New(Config{}, Deps{Assembler: w, Executor: w, Authorizer: w, Store: w, Models: single(m), Threads: w})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Add(fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "tool_search", Args: `{"query":"weather"}`}}},
			fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "weather_get", Args: `{"city":"Paris"}`}}},
			fakemodel.Reply{Content: "It is sunny in Paris today."})
		id := fmt.Sprintf("b%d", i)
		w.mu.Lock()
		w.thread(id)
		w.mu.Unlock()
		if r, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: id, Message: "weather?"}, nil); r.GetReason() != "" {
			b.Fatal(r)
		}
	}
}

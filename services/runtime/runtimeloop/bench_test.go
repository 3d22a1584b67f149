package runtimeloop

import (
	"context"
	"fmt"
	"testing"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
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

// BenchmarkParallelToolCalls: one step with three tool calls of 50 ms each
// (then an answer), with parallel_tool_calls 1 and 3: a turn takes about
// the sum (≈150 ms) serially and about the longest call (≈50 ms) in
// parallel (issue 8 "parallel calls allowed").
func BenchmarkParallelToolCalls(b *testing.B) {
	for _, par := range []int{1, 3} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			w := newWorld()
			w.tools["slow50"] = &fakeTool{run: func(context.Context, map[string]any) (string, error) {
				time.Sleep(50 * time.Millisecond)
				return "ok", nil
			}}
			m := &funcModel{f: func(_ context.Context, n int, _ *ModelRequest) (*ModelResponse, error) {
				if n%2 == 0 {
					return calls(call("slow50", `{"i":1}`), call("slow50", `{"i":2}`), call("slow50", `{"i":3}`)), nil
				}
				return answer("done"), nil
			}}
			e, err := New(Config{ParallelToolCalls: par}, Deps{Assembler: w, Executor: w, Authorizer: w, Store: w, Models: single(m), Threads: w})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprintf("p%d", i)
				w.mu.Lock()
				w.thread(id)
				w.mu.Unlock()
				if r, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: id, Message: "go"}, nil); r.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
					b.Fatal(r)
				}
			}
		})
	}
}

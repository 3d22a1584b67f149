package runtimeloop

import (
	"context"
	"strings"
	"testing"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodel"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodelalt"
)

// The flows below run against two independently written OpenAI-compatible
// fakes (a scripted one and a reactive one), each in streaming and
// non-streaming mode, through the real openai-go client.

type obsMsg struct{ role, text string }

type obsReq struct {
	tools  []string
	system string
	msgs   []obsMsg
}

type observed interface{ requests() []obsReq }

type scriptedObs struct{ s *fakemodel.Server }

func (o scriptedObs) requests() []obsReq {
	var out []obsReq
	for _, r := range o.s.Requests() {
		q := obsReq{tools: r.ToolNames(), system: r.System()}
		for _, m := range r.Messages {
			q.msgs = append(q.msgs, obsMsg{m.Role, m.Text()})
		}
		out = append(out, q)
	}
	return out
}

type altObs struct{ s *fakemodelalt.Server }

func (o altObs) requests() []obsReq {
	var out []obsReq
	for _, c := range o.s.Seen() {
		q := obsReq{tools: c.Tools}
		for _, m := range c.Msgs {
			if m.Role == "system" {
				q.system += m.Text
			}
			q.msgs = append(q.msgs, obsMsg{m.Role, m.Text})
		}
		out = append(out, q)
	}
	return out
}

type variant struct {
	name     string
	reactive bool
	stream   bool
}

var variants = []variant{{"scripted-stream", false, true}, {"scripted-json", false, false}, {"reactive-stream", true, true}, {"reactive-json", true, false}}

// forEachFake runs f once per fake × streaming mode × storing mode, each
// with a fresh server and world.
func forEachFake(t *testing.T, script []fakemodel.Reply, brain fakemodelalt.Brain, f func(t *testing.T, v variant, m Model, obs observed, w *world)) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			bothModes(t, func(t *testing.T, w *world) {
				var url string
				var obs observed
				if v.reactive {
					s := fakemodelalt.Start(brain)
					t.Cleanup(s.Close)
					url, obs = s.BaseURL(), altObs{s}
				} else {
					s := fakemodel.New(script...)
					t.Cleanup(s.Close)
					t.Cleanup(func() {
						if p := s.Problems(); len(p) > 0 {
							t.Errorf("provider-rule violations: %v", p)
						}
					})
					url, obs = s.BaseURL(), scriptedObs{s}
				}
				m, err := NewOpenAIModel(OpenAISpec{BaseURL: url, Model: "fake-1", Stream: v.stream})
				if err != nil {
					t.Fatal(err)
				}
				f(t, v, m, obs, w)
			})
		})
	}
}

func lastTool(c fakemodelalt.Conversation) (fakemodelalt.Msg, bool) {
	l := c.Last()
	return l, l.Role == "tool"
}

func finalText(t *testing.T, w *world, thread string) string {
	t.Helper()
	ms := w.msgs(thread)
	last := ms[len(ms)-1]
	if last.GetRole() != runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT || len(last.GetToolCalls()) > 0 {
		t.Fatalf("last message is not a final answer: %v", last)
	}
	return last.GetContent()
}

func TestFlowSearchPromoteCallAnswer(t *testing.T) {
	script := []fakemodel.Reply{
		{ToolCalls: []fakemodel.Call{{Name: "tool_search", Args: `{"query":"weather"}`}}, PromptTokens: 100, CompletionTokens: 10},
		{ToolCalls: []fakemodel.Call{{Name: "weather_get", Args: `{"city":"Paris"}`}}, PromptTokens: 120, CompletionTokens: 10},
		{Content: "It is sunny in Paris.", PromptTokens: 150, CompletionTokens: 8},
	}
	brain := func(c fakemodelalt.Conversation) fakemodelalt.Turn {
		l, isTool := lastTool(c)
		switch {
		case !isTool:
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "tool_search", Args: `{"query":"weather"}`}}, In: 100, Out: 10}
		case strings.HasPrefix(l.Text, "Promoted") && c.Has("weather_get"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "weather_get", Args: `{"city":"Paris"}`}}, In: 120, Out: 10}
		}
		return fakemodelalt.Turn{Text: "It is sunny in Paris.", In: 150, Out: 8}
	}
	forEachFake(t, script, brain, func(t *testing.T, v variant, m Model, obs observed, w *world) {
		e := newTestEngine(t, w, single(m), Config{})
		rec := &recorder{}
		run, err := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "What's the weather in Paris?"}, rec.sink)
		if err != nil {
			t.Fatal(err)
		}
		if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
			t.Fatalf("status %v (%s)", run.GetStatus(), run.GetReason())
		}
		if got := finalText(t, w, "t1"); got != "It is sunny in Paris." {
			t.Fatalf("final %q", got)
		}
		if w.execCount("weather_get") != 1 || w.execCount(ToolSearch) != 1 {
			t.Fatalf("execs %v", w.execs)
		}
		reqs := obs.requests()
		if len(reqs) != 3 {
			t.Fatalf("%d model requests", len(reqs))
		}
		if contains(reqs[0].tools, "weather_get") || !contains(reqs[0].tools, "tool_search") {
			t.Fatalf("first request binds %v", reqs[0].tools)
		}
		if !contains(reqs[1].tools, "weather_get") {
			t.Fatalf("promoted tool not bound in the next request: %v", reqs[1].tools)
		}
		if !strings.Contains(reqs[0].system, "<available-deferred-tools>") {
			t.Fatalf("system prompt lacks the deferred section: %q", reqs[0].system)
		}
		if n := rec.count(func(e *runtimev1.RunEvent) bool { return contains(e.GetPromoted().GetNames(), "weather_get") }); n != 1 {
			t.Fatalf("%d promoted events", n)
		}
		if run.GetUsage().GetTotalTokens() != 398 {
			t.Fatalf("usage %v", run.GetUsage())
		}
		ms := w.msgs("t1")
		if len(ms) != 6 { // user, asst+search, tool, asst+call, tool, final
			t.Fatalf("%d messages", len(ms))
		}
		assertNoDangling(t, ms)
	})
}

func TestFlowUnpromotedCallRecovers(t *testing.T) {
	script := []fakemodel.Reply{
		{ToolCalls: []fakemodel.Call{{Name: "weather_get", Args: `{"city":"Rome"}`}}},
		{ToolCalls: []fakemodel.Call{{Name: "tool_search", Args: `{"query":"weather"}`}}},
		{ToolCalls: []fakemodel.Call{{Name: "weather_get", Args: `{"city":"Rome"}`}}},
		{Content: "Sunny in Rome."},
	}
	brain := func(c fakemodelalt.Conversation) fakemodelalt.Turn {
		l, isTool := lastTool(c)
		switch {
		case !isTool:
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "weather_get", Args: `{"city":"Rome"}`}}}
		case strings.Contains(l.Text, "tool_search first"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "tool_search", Args: `{"query":"weather"}`}}}
		case strings.HasPrefix(l.Text, "Promoted"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "weather_get", Args: `{"city":"Rome"}`}}}
		}
		return fakemodelalt.Turn{Text: "Sunny in Rome."}
	}
	forEachFake(t, script, brain, func(t *testing.T, v variant, m Model, obs observed, w *world) {
		e := newTestEngine(t, w, single(m), Config{})
		rec := &recorder{}
		run, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "Weather in Rome?"}, rec.sink)
		if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED || finalText(t, w, "t1") != "Sunny in Rome." {
			t.Fatalf("run %v", run)
		}
		ms := w.msgs("t1")
		if ms[2].GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR || !strings.Contains(ms[2].GetContent(), "tool_search first") {
			t.Fatalf("first call result %v", ms[2])
		}
		if w.execCount("weather_get") != 1 {
			t.Fatalf("weather_get ran %d times, want once (after promotion)", w.execCount("weather_get"))
		}
		var kinds []runtimev1.ErrorKind
		for _, ev := range rec.events() {
			if f := ev.GetToolCallFinished(); f != nil {
				kinds = append(kinds, f.GetErrorKind())
			}
		}
		if len(kinds) != 3 || kinds[0] != runtimev1.ErrorKind_ERROR_KIND_POLICY || kinds[2] != runtimev1.ErrorKind_ERROR_KIND_UNSPECIFIED {
			t.Fatalf("finished kinds %v", kinds)
		}
		assertNoDangling(t, ms)
	})
}

const emptyFallbackPrefix = "I could not produce a final answer"

func TestFlowEmptyAnswerAfterTools(t *testing.T) {
	script := []fakemodel.Reply{
		{ToolCalls: []fakemodel.Call{{Name: "echo", Args: `{"text":"hi"}`}}},
		{Content: ""},
		{Content: ""},
	}
	brain := func(c fakemodelalt.Conversation) fakemodelalt.Turn {
		if _, isTool := lastTool(c); !isTool && !strings.HasPrefix(c.Last().Text, "[EMPTY RESPONSE]") {
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "echo", Args: `{"text":"hi"}`}}}
		}
		return fakemodelalt.Turn{}
	}
	forEachFake(t, script, brain, func(t *testing.T, v variant, m Model, obs observed, w *world) {
		e := newTestEngine(t, w, single(m), Config{})
		run, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "say hi"}, nil)
		if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED || run.GetReason() != ReasonEmpty {
			t.Fatalf("run %v", run)
		}
		if got := finalText(t, w, "t1"); !strings.HasPrefix(got, emptyFallbackPrefix) {
			t.Fatalf("final %q", got)
		}
		reqs := obs.requests()
		if len(reqs) != 3 {
			t.Fatalf("%d requests, want 3 (one retry)", len(reqs))
		}
		last := reqs[2].msgs[len(reqs[2].msgs)-1]
		if !strings.HasPrefix(last.text, "[EMPTY RESPONSE]") {
			t.Fatalf("retry request lacks the hidden nudge: %v", last)
		}
		for _, m := range w.msgs("t1") {
			if strings.Contains(m.GetContent(), "[EMPTY RESPONSE]") {
				t.Fatal("hidden nudge was persisted")
			}
		}
	})
}

func TestFlowContentFilterDropsToolCalls(t *testing.T) {
	script := []fakemodel.Reply{{Content: "Partial", ToolCalls: []fakemodel.Call{{Name: "echo", Args: `{"text":"x"}`}}, FinishReason: "content_filter"}}
	brain := func(fakemodelalt.Conversation) fakemodelalt.Turn {
		return fakemodelalt.Turn{Text: "Partial", Calls: []fakemodelalt.Call{{Name: "echo", Args: `{"text":"x"}`}}, Finish: "content_filter"}
	}
	forEachFake(t, script, brain, func(t *testing.T, v variant, m Model, obs observed, w *world) {
		e := newTestEngine(t, w, single(m), Config{})
		run, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "do it"}, nil)
		if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED || run.GetReason() != ReasonSafety {
			t.Fatalf("run %v", run)
		}
		if w.execCount("echo") != 0 {
			t.Fatal("a tool call of a safety-terminated response ran")
		}
		got := finalText(t, w, "t1")
		if !strings.HasPrefix(got, "Partial") || !strings.Contains(got, "SAFETY FILTER") || !strings.Contains(got, "1 tool call(s)") {
			t.Fatalf("final %q", got)
		}
	})
}

func TestFlowClarificationAndResume(t *testing.T) {
	script := []fakemodel.Reply{
		{ToolCalls: []fakemodel.Call{{Name: "ask_clarification", Args: `{"question":"Which city?","options":["Paris","Rome"]}`}}},
		{Content: "Sunny in Paris."},
	}
	brain := func(c fakemodelalt.Conversation) fakemodelalt.Turn {
		if l := c.Last(); l.Role == "user" && strings.Contains(l.Text, "Paris") {
			return fakemodelalt.Turn{Text: "Sunny in Paris."}
		}
		return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "ask_clarification", Args: `{"question":"Which city?","options":["Paris","Rome"]}`}}}
	}
	forEachFake(t, script, brain, func(t *testing.T, v variant, m Model, obs observed, w *world) {
		e := newTestEngine(t, w, single(m), Config{})
		rec := &recorder{}
		run, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "weather?"}, rec.sink)
		if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT {
			t.Fatalf("run %v", run)
		}
		if q := run.GetPendingQuestion(); !strings.Contains(q, "Which city?") || !strings.Contains(q, "1. Paris") {
			t.Fatalf("pending question %q", q)
		}
		if rec.count(func(e *runtimev1.RunEvent) bool { return e.GetClarification() != "" }) != 1 {
			t.Fatal("no clarification event")
		}
		assertNoDangling(t, w.msgs("t1"))
		if _, err := e.ResumeRun(context.Background(), ResumeRequest{ThreadID: "t1", RunID: "nope", Answer: "x"}, nil); err == nil {
			t.Fatal("resume of an unknown run succeeded")
		}
		rec2 := &recorder{}
		run2, err := e.ResumeRun(context.Background(), ResumeRequest{ThreadID: "t1", RunID: run.GetRunId(), Answer: "Paris"}, rec2.sink)
		if err != nil {
			t.Fatal(err)
		}
		if run2.GetRunId() != run.GetRunId() || run2.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED || finalText(t, w, "t1") != "Sunny in Paris." {
			t.Fatalf("resumed run %v", run2)
		}
		if evs := rec2.events(); evs[0].GetSeq() <= rec.events()[len(rec.events())-1].GetSeq() {
			t.Fatalf("resume seq %d does not continue the run's sequence", evs[0].GetSeq())
		}
		if _, err := e.ResumeRun(context.Background(), ResumeRequest{ThreadID: "t1", RunID: run.GetRunId(), Answer: "again"}, nil); err != ErrRunNotWaiting {
			t.Fatalf("second resume: %v", err)
		}
	})
}

func TestFlowLoopDetected(t *testing.T) {
	var script []fakemodel.Reply
	for range 6 {
		script = append(script, fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "echo", Args: `{"text":"same"}`}}})
	}
	brain := func(fakemodelalt.Conversation) fakemodelalt.Turn {
		return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "echo", Args: `{"text":"same"}`}}}
	}
	forEachFake(t, script, brain, func(t *testing.T, v variant, m Model, obs observed, w *world) {
		e := newTestEngine(t, w, single(m), Config{})
		run, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "loop"}, nil)
		if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED || !strings.HasPrefix(run.GetReason(), ReasonLoop) {
			t.Fatalf("run %v", run)
		}
		if n := w.execCount("echo"); n != 4 {
			t.Fatalf("echo ran %d times, want 4 (hard stop at the 5th identical call)", n)
		}
		reqs := obs.requests()
		if len(reqs) != 5 {
			t.Fatalf("%d requests", len(reqs))
		}
		warned := func(r obsReq) bool {
			for _, m := range r.msgs {
				if strings.HasPrefix(m.text, "[LOOP DETECTED]") {
					return true
				}
			}
			return false
		}
		if warned(reqs[2]) || !warned(reqs[3]) {
			t.Fatalf("warning must first appear in the 4th request (after 3 identical calls)")
		}
		if got := finalText(t, w, "t1"); !strings.Contains(got, "[FORCED STOP]") {
			t.Fatalf("final %q", got)
		}
		assertNoDangling(t, w.msgs("t1"))
	})
}

func TestFlowStreamingDeltas(t *testing.T) {
	const text = "The quick brown fox jumps over the lazy dog."
	script := []fakemodel.Reply{{Content: text}}
	brain := func(fakemodelalt.Conversation) fakemodelalt.Turn { return fakemodelalt.Turn{Text: text} }
	forEachFake(t, script, brain, func(t *testing.T, v variant, m Model, obs observed, w *world) {
		e := newTestEngine(t, w, single(m), Config{})
		rec := &recorder{}
		run, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "hi"}, rec.sink)
		if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
			t.Fatalf("run %v", run)
		}
		d := rec.deltas()
		if strings.Join(d, "") != text {
			t.Fatalf("deltas %q", d)
		}
		if v.stream && len(d) < 5 {
			t.Fatalf("streaming produced %d deltas", len(d))
		}
		if !v.stream && len(d) != 1 {
			t.Fatalf("non-streaming produced %d deltas", len(d))
		}
		evs := rec.events()
		for i, ev := range evs {
			if ev.GetSeq() != int64(i+1) || ev.GetRunId() != run.GetRunId() {
				t.Fatalf("event %d: seq %d run %q", i, ev.GetSeq(), ev.GetRunId())
			}
		}
		if evs[len(evs)-1].GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED || evs[len(evs)-2].GetFinalMessage().GetContent() != text {
			t.Fatalf("last events %v %v", evs[len(evs)-2], evs[len(evs)-1])
		}
	})
}

func TestFlowSubagentTask(t *testing.T) {
	task := `{"description":"weather","prompt":"Find the weather in Oslo","subagent_type":"general-purpose"}`
	script := []fakemodel.Reply{
		{ToolCalls: []fakemodel.Call{{Name: "task", Args: task}}},
		{ToolCalls: []fakemodel.Call{{Name: "tool_search", Args: `{"query":"weather"}`}}},
		{ToolCalls: []fakemodel.Call{{Name: "weather_get", Args: `{"city":"Oslo"}`}}},
		{Content: "Child result: sunny in Oslo"},
		{Content: "The subagent found: sunny in Oslo."},
	}
	brain := func(c fakemodelalt.Conversation) fakemodelalt.Turn {
		l, isTool := lastTool(c)
		child := strings.Contains(c.Msgs[0].Text, "You are a subagent")
		switch {
		case !child && !isTool:
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "task", Args: task}}}
		case !child:
			return fakemodelalt.Turn{Text: "The subagent found: sunny in Oslo."}
		case !isTool:
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "tool_search", Args: `{"query":"weather"}`}}}
		case strings.HasPrefix(l.Text, "Promoted"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "weather_get", Args: `{"city":"Oslo"}`}}}
		}
		return fakemodelalt.Turn{Text: "Child result: sunny in Oslo"}
	}
	forEachFake(t, script, brain, func(t *testing.T, v variant, m Model, obs observed, w *world) {
		e := newTestEngine(t, w, single(m), Config{})
		rec := &recorder{}
		run, _ := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "Weather in Oslo?", Agent: Agent{Name: "lead", SubagentsEnabled: true}}, rec.sink)
		if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED || finalText(t, w, "t1") != "The subagent found: sunny in Oslo." {
			t.Fatalf("run %v", run)
		}
		if len(w.children) != 1 || w.children[0].ParentThreadID != "t1" || w.children[0].SubagentType != "general-purpose" {
			t.Fatalf("children %v", w.children)
		}
		if p := w.threads["t1"].promoted; len(p) != 0 {
			t.Fatalf("the child's promotions touched the parent: %v", p)
		}
		if p := w.threads["child-1"].promoted; !contains(p, "weather_get") {
			t.Fatalf("child promotions %v", p)
		}
		reqs := obs.requests()
		if !contains(reqs[0].tools, "task") {
			t.Fatalf("lead request lacks task: %v", reqs[0].tools)
		}
		for _, r := range reqs[1:4] {
			if contains(r.tools, "task") || contains(r.tools, "ask_clarification") || contains(r.tools, "present_files") {
				t.Fatalf("child request binds a denied tool: %v", r.tools)
			}
		}
		ms := w.msgs("t1")
		res := ms[2]
		if res.GetName() != "task" || res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !strings.Contains(res.GetContent(), "Child result: sunny in Oslo") || !strings.Contains(res.GetContent(), "Task completed") {
			t.Fatalf("task result %v", res)
		}
		var fin *runtimev1.ToolResult
		for _, ev := range rec.events() {
			if f := ev.GetToolCallFinished(); f != nil && f.GetName() == "task" {
				fin = f
			}
		}
		if fin.GetStructuredContent().GetFields()["subagent_status"].GetStringValue() != "completed" || fin.GetStructuredContent().GetFields()["usage"].GetStructValue() == nil {
			t.Fatalf("task meta %v", fin.GetStructuredContent())
		}
		cr, _ := w.ListRuns(context.Background(), "child-1")
		if len(cr) != 1 || cr[0].GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
			t.Fatalf("child runs %v", cr)
		}
	})
}

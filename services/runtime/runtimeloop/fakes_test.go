package runtimeloop

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// world is an in-memory fake of the runtime around the loop: threads with
// messages, runs and promotions; assembly with deferral (deferred tools
// are bound only once tool_search promoted them); execution with the
// deferred filter; model authorization; child threads.
type world struct {
	mu        sync.Mutex
	tools     map[string]*fakeTool
	threads   map[string]*wthread
	allowed   map[string]bool // nil = every model allowed
	authzErr  error
	execs     map[string]int
	children  []ChildSpec
	assembles int
	nextID    int
	// persist makes Execute store each result's tool message itself, as
	// the runtime's ExecuteToolCall does (Deps.ExecutorStoresResults).
	persist bool
}

type fakeTool struct {
	deferred bool
	run      func(ctx context.Context, args map[string]any) (string, error)
}

type wthread struct {
	promoted []string
	msgs     []*runtimev1.Message
	runs     map[string]*runtimev1.Run
	order    []string
	usage    runtimev1.TokenUsage
}

// bothModes runs f with an Executor that leaves storing to the loop and
// with one that stores its own results.
func bothModes(t *testing.T, f func(t *testing.T, w *world)) {
	for _, persist := range []bool{false, true} {
		t.Run(map[bool]string{false: "loop-stores", true: "executor-stores"}[persist], func(t *testing.T) {
			w := newWorld()
			w.persist = persist
			f(t, w)
		})
	}
}

func newWorld() *world {
	w := &world{tools: map[string]*fakeTool{}, threads: map[string]*wthread{}, execs: map[string]int{}}
	w.tools["echo"] = &fakeTool{run: func(_ context.Context, a map[string]any) (string, error) { return fmt.Sprint("echo: ", a["text"]), nil }}
	w.tools["weather_get"] = &fakeTool{deferred: true, run: func(_ context.Context, a map[string]any) (string, error) {
		return fmt.Sprintf("sunny in %v", a["city"]), nil
	}}
	w.tools["stocks_quote"] = &fakeTool{deferred: true, run: func(context.Context, map[string]any) (string, error) { return "42", nil }}
	w.tools["slow"] = &fakeTool{run: func(ctx context.Context, _ map[string]any) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	w.thread("t1")
	return w
}

func (w *world) thread(id string) *wthread {
	th := w.threads[id]
	if th == nil {
		th = &wthread{runs: map[string]*runtimev1.Run{}}
		w.threads[id] = th
	}
	return th
}

func schema(name string) *runtimev1.ToolSchema {
	oa, _ := structpb.NewStruct(map[string]any{"type": "function", "function": map[string]any{
		"name": name, "description": "the " + name + " tool",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
	}})
	return &runtimev1.ToolSchema{Name: name, Openai: oa, Source: "mcp"}
}

// Assemble implements Assembler.
func (w *world) Assemble(_ context.Context, threadID, user string, profile runtimev1.ToolProfile) (*runtimev1.AssembleToolsResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.assembles++
	th := w.threads[threadID]
	if th == nil {
		return nil, fmt.Errorf("thread %q not found", threadID)
	}
	if strings.HasPrefix(user, "/no-such-skill") {
		return &runtimev1.AssembleToolsResponse{SkipModel: true, DirectAnswer: "Skill 'no-such-skill' does not exist."}, nil
	}
	resp := &runtimev1.AssembleToolsResponse{}
	for _, b := range []string{"ask_clarification", "present_files"} {
		resp.Tools = append(resp.Tools, schema(b))
	}
	names := make([]string, 0, len(w.tools))
	for n := range w.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	var deferred []string
	for _, n := range names {
		if !w.tools[n].deferred || contains(th.promoted, n) {
			resp.Tools = append(resp.Tools, schema(n))
		} else {
			deferred = append(deferred, n)
		}
	}
	for _, n := range names {
		if w.tools[n].deferred {
			resp.Deferred = append(resp.Deferred, n)
		}
	}
	if len(resp.Deferred) > 0 {
		resp.Tools = append(resp.Tools, schema(ToolSearch))
		resp.PromptSections = append(resp.PromptSections, &runtimev1.PromptSection{Name: "deferred_tools",
			Text: "<available-deferred-tools>\n" + strings.Join(deferred, "\n") + "\n</available-deferred-tools>"})
	}
	return resp, nil
}

// Execute implements Executor.
func (w *world) Execute(ctx context.Context, threadID, runID string, profile runtimev1.ToolProfile, c *runtimev1.ToolCall, notify func(*typev1.Notification)) (*runtimev1.ToolResult, error) {
	w.mu.Lock()
	th := w.threads[threadID]
	if th == nil {
		w.mu.Unlock()
		return nil, fmt.Errorf("thread %q not found", threadID)
	}
	args := c.GetArguments().AsMap()
	if c.GetName() == ToolSearch {
		w.execs[ToolSearch]++
		q := fmt.Sprint(args["query"])
		var hits []string
		for n, tl := range w.tools {
			if tl.deferred && strings.Contains(n, q) {
				hits = append(hits, n)
				if !contains(th.promoted, n) {
					th.promoted = append(th.promoted, n)
				}
			}
		}
		sort.Strings(hits)
		w.mu.Unlock()
		r := textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS, 0, "", "Promoted: "+strings.Join(hits, ", "))
		r.Promoted = &runtimev1.Promoted{CatalogHash: "h1", Names: hits}
		return w.stored(threadID, runID, r), nil
	}
	tl := w.tools[c.GetName()]
	if tl == nil {
		w.mu.Unlock()
		return w.stored(threadID, runID, textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_POLICY, "tool.unknown",
			fmt.Sprintf("Error: Tool '%s' not found.", c.GetName()))), nil
	}
	if tl.deferred && !contains(th.promoted, c.GetName()) {
		w.mu.Unlock()
		return w.stored(threadID, runID, textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_POLICY, "deferred.not_promoted",
			fmt.Sprintf("Error: Tool '%s' is deferred: call tool_search first to load it.", c.GetName()))), nil
	}
	w.execs[c.GetName()]++
	w.mu.Unlock()
	if notify != nil {
		p, _ := structpb.NewStruct(map[string]any{"progress": 1})
		notify(&typev1.Notification{Method: "notifications/progress", Params: p})
	}
	out, err := tl.run(ctx, args)
	if err != nil {
		return nil, err
	}
	return w.stored(threadID, runID, textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS, 0, "", out)), nil
}

// stored appends the result's tool message when the world persists results.
func (w *world) stored(threadID, runID string, r *runtimev1.ToolResult) *runtimev1.ToolResult {
	if w.persist {
		_ = w.AppendMessages(context.Background(), threadID, &runtimev1.Message{Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL,
			Content: resultText(r), ToolCallId: r.GetToolCallId(), Name: r.GetName(), Status: r.GetStatus(), RunId: runID})
	}
	return r
}

// AuthorizeModel implements ModelAuthorizer.
func (w *world) AuthorizeModel(_ context.Context, m string) (bool, string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.authzErr != nil {
		return false, "", w.authzErr
	}
	if w.allowed == nil || w.allowed[m] {
		return true, "", nil
	}
	return false, "authz.denied", nil
}

// FilterModels implements ModelAuthorizer.
func (w *world) FilterModels(_ context.Context, c []string) ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, m := range c {
		if w.allowed == nil || w.allowed[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

// Messages implements Store.
func (w *world) Messages(_ context.Context, id string) ([]*runtimev1.Message, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	th := w.threads[id]
	if th == nil {
		return nil, ErrNotFound
	}
	out := make([]*runtimev1.Message, len(th.msgs))
	for i, m := range th.msgs {
		out[i] = proto.Clone(m).(*runtimev1.Message)
	}
	return out, nil
}

// AppendMessages implements Store.
func (w *world) AppendMessages(_ context.Context, id string, msgs ...*runtimev1.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	th := w.threads[id]
	if th == nil {
		return ErrNotFound
	}
	for _, m := range msgs {
		th.msgs = append(th.msgs, proto.Clone(m).(*runtimev1.Message))
	}
	return nil
}

// PutRun implements Store.
func (w *world) PutRun(_ context.Context, r *runtimev1.Run) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	th := w.thread(r.GetThreadId())
	if _, ok := th.runs[r.GetRunId()]; !ok {
		th.order = append(th.order, r.GetRunId())
	}
	th.runs[r.GetRunId()] = proto.Clone(r).(*runtimev1.Run)
	return nil
}

// GetRun implements Store.
func (w *world) GetRun(_ context.Context, tid, rid string) (*runtimev1.Run, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	th := w.threads[tid]
	if th == nil || th.runs[rid] == nil {
		return nil, ErrNotFound
	}
	return proto.Clone(th.runs[rid]).(*runtimev1.Run), nil
}

// ListRuns implements Store.
func (w *world) ListRuns(_ context.Context, tid string) ([]*runtimev1.Run, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	th := w.threads[tid]
	if th == nil {
		return nil, nil
	}
	var out []*runtimev1.Run
	for i := len(th.order) - 1; i >= 0; i-- {
		out = append(out, proto.Clone(th.runs[th.order[i]]).(*runtimev1.Run))
	}
	return out, nil
}

// AddUsage implements Store.
func (w *world) AddUsage(_ context.Context, tid string, u *runtimev1.TokenUsage) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	th := w.threads[tid]
	th.usage.TotalTokens += u.GetTotalTokens()
	return nil
}

// CreateChildThread implements Threads.
func (w *world) CreateChildThread(_ context.Context, spec ChildSpec) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextID++
	id := fmt.Sprintf("child-%d", w.nextID)
	w.thread(id)
	w.children = append(w.children, spec)
	return id, nil
}

func (w *world) msgs(id string) []*runtimev1.Message {
	m, _ := w.Messages(context.Background(), id)
	return m
}

func (w *world) execCount(n string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.execs[n]
}

// assertNoDangling checks that every stored assistant tool call has a
// result right after it.
func assertNoDangling(t *testing.T, msgs []*runtimev1.Message) {
	t.Helper()
	for i, m := range msgs {
		if m.GetRole() != runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT {
			continue
		}
		got := map[string]bool{}
		for j := i + 1; j < len(msgs) && msgs[j].GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_TOOL; j++ {
			got[msgs[j].GetToolCallId()] = true
		}
		for _, c := range m.GetToolCalls() {
			if !got[c.GetId()] {
				t.Fatalf("dangling tool call %s (%s) in message %d", c.GetId(), c.GetName(), i)
			}
		}
	}
}

// recorder collects events.
type recorder struct {
	mu  sync.Mutex
	evs []*runtimev1.RunEvent
}

func (r *recorder) sink(ev *runtimev1.RunEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, proto.Clone(ev).(*runtimev1.RunEvent))
}

func (r *recorder) events() []*runtimev1.RunEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*runtimev1.RunEvent(nil), r.evs...)
}

func (r *recorder) deltas() []string {
	var out []string
	for _, e := range r.events() {
		if d, ok := e.GetEvent().(*runtimev1.RunEvent_TextDelta); ok {
			out = append(out, d.TextDelta)
		}
	}
	return out
}

func (r *recorder) count(f func(*runtimev1.RunEvent) bool) int {
	n := 0
	for _, e := range r.events() {
		if f(e) {
			n++
		}
	}
	return n
}

// funcModel is a Model answering from a Go function (unit tests without HTTP).
type funcModel struct {
	mu   sync.Mutex
	reqs []*ModelRequest
	f    func(ctx context.Context, n int, req *ModelRequest) (*ModelResponse, error)
}

func (m *funcModel) Complete(ctx context.Context, req *ModelRequest, onDelta func(string)) (*ModelResponse, error) {
	m.mu.Lock()
	n := len(m.reqs)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	r, err := m.f(ctx, n, req)
	if err == nil && r.Content != "" && onDelta != nil {
		onDelta(r.Content)
	}
	return r, err
}

func (m *funcModel) requests() []*ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*ModelRequest(nil), m.reqs...)
}

func call(name, args string) *runtimev1.ToolCall { return ParseToolCall("", name, args) }

func newTestEngine(t *testing.T, w *world, models Models, cfg Config) *Engine {
	t.Helper()
	n := 0
	var mu sync.Mutex
	e, err := New(cfg, Deps{Assembler: w, Executor: w, Authorizer: w, Store: w, Models: models, Threads: w, ExecutorStoresResults: w.persist,
		NewID: func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprintf("id%04d", n) }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func single(m Model) Models {
	return &StaticModels{Order: []string{"m1"}, ByName: map[string]Model{"m1": m}}
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package runtimeloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// Deps are the Engine's collaborators. Threads may be nil (the task tool
// then answers that subagents are unavailable).
type Deps struct {
	// Assembler is AssembleTools.
	Assembler Assembler
	// Executor is ExecuteToolCall.
	Executor Executor
	// Authorizer decides model:use.
	Authorizer ModelAuthorizer
	// Store persists messages and runs.
	Store Store
	// Models resolves model names.
	Models Models
	// Threads creates child threads for subagents (optional).
	Threads Threads
	// ExecutorStoresResults says that Executor.Execute persists the tool
	// message of every result it returns (the runtime's ExecuteToolCall
	// commits the result message with the state update). The loop then
	// stores each assistant step before running its calls, runs the
	// executor's calls one at a time so results land in call order (task
	// calls still run concurrently), and stores only the results it made
	// itself (clarification, task, refusals, cancellations). When false
	// (the runtime's mode: its loop adapter executes without storing the
	// tool message) the loop stores the assistant step, runs its calls
	// concurrently (at most Config.ParallelToolCalls at once, docs/architecture.md §3.3
	// "parallel calls allowed") and then stores all their results in call
	// order in one atomic append.
	ExecutorStoresResults bool
	// Images returns the images view_image recorded (optional; images.go).
	Images ImageSource
	// Observer receives metrics (optional).
	Observer Observer
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewID returns fresh ids for runs and messages (default UUIDv4).
	NewID func() string
}

// Engine runs agent-loop turns. It keeps the registry of active runs of
// this process (for CancelRun and the one-active-run-per-thread rule).
type Engine struct {
	cfg Config
	d   Deps

	mu       sync.Mutex
	active   map[string]*activeRun // by run id
	byThread map[string]string     // thread id → active run id
	seqs     map[string]int64      // last event seq of runs waiting for input
	closed   bool                  // Shutdown was called
}

type activeRun struct {
	threadID string
	cancel   context.CancelCauseFunc
	done     chan struct{}
}

// New builds an Engine; cfg is defaulted and validated.
func New(cfg Config, d Deps) (*Engine, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Assembler == nil || d.Executor == nil || d.Authorizer == nil || d.Store == nil || d.Models == nil {
		return nil, errors.New("runtimeloop: Assembler, Executor, Authorizer, Store and Models are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.NewID == nil {
		d.NewID = uuid.NewString
	}
	return &Engine{cfg: cfg, d: d, active: map[string]*activeRun{}, byThread: map[string]string{}, seqs: map[string]int64{}}, nil
}

// ModelNames lists the configured model names.
func (e *Engine) ModelNames() []string { return e.d.Models.Names() }

// Config returns the effective configuration.
func (e *Engine) Config() Config { return e.cfg }

// TurnRequest starts a turn.
type TurnRequest struct {
	// ThreadID is the thread (already authorized by the caller).
	ThreadID string
	// Agent is the thread's agent.
	Agent Agent
	// Message is the user's message.
	Message string
	// Model overrides the agent's model (still authorized with model:use).
	Model string
	// Limits override the configured limits field by field (zero = default).
	Limits Limits
}

// ResumeRequest answers a pending clarification.
type ResumeRequest struct {
	// ThreadID is the thread.
	ThreadID string
	// RunID is the run waiting for input.
	RunID string
	// Answer is the user's answer.
	Answer string
	// Agent is the thread's agent.
	Agent Agent
	// Limits as in TurnRequest.
	Limits Limits
}

// RunTurn runs one turn to its end and returns the run in its final state
// (completed, failed, cancelled or waiting_for_input). Events go to sink.
// Errors are returned only when no run could be started (ErrRunActive, a
// store failure); every later failure is recorded in the run.
func (e *Engine) RunTurn(ctx context.Context, req TurnRequest, sink Sink) (*runtimev1.Run, error) {
	runID := e.d.NewID()
	ctx, ar, err := e.register(ctx, req.ThreadID, runID)
	if err != nil {
		return nil, err
	}
	defer e.unregister(runID, ar)
	e.supersedeWaiting(ctx, req.ThreadID)
	if err := e.repairTail(ctx, req.ThreadID); err != nil {
		return nil, fmt.Errorf("runtimeloop: repair thread: %w", err)
	}
	now := e.d.Now()
	run := &runtimev1.Run{
		RunId: runID, ThreadId: req.ThreadID, Status: runtimev1.RunStatus_RUN_STATUS_RUNNING,
		StartTime: timestamppb.New(now), Usage: &runtimev1.TokenUsage{},
	}
	if err := e.d.Store.PutRun(ctx, run); err != nil {
		return nil, fmt.Errorf("runtimeloop: create run: %w", err)
	}
	t := e.newTurn(req.ThreadID, run, req.Agent, req.Limits, sink, 0)
	t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Status{Status: runtimev1.RunStatus_RUN_STATUS_RUNNING}})
	t.userText = req.Message
	user := &runtimev1.Message{Id: e.d.NewID(), Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: req.Message, RunId: runID, CreateTime: timestamppb.New(now)}
	if err := e.d.Store.AppendMessages(ctx, req.ThreadID, user); err != nil {
		t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_FAILED, e.storeFailure(ctx, t.threadID, err))
		return t.run, nil
	}
	t.drive(ctx, req.Model)
	return t.run, nil
}

// ResumeRun answers the pending clarification of a waiting run and
// continues the turn (docs/deerflow.md §6.2 Clarification). The answer is
// appended as a user message. Errors: ErrNotFound, ErrRunNotWaiting, ErrRunActive.
func (e *Engine) ResumeRun(ctx context.Context, req ResumeRequest, sink Sink) (*runtimev1.Run, error) {
	run, err := e.d.Store.GetRun(ctx, req.ThreadID, req.RunID)
	if err != nil {
		return nil, err
	}
	if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT {
		return nil, ErrRunNotWaiting
	}
	ctx, ar, err := e.register(ctx, req.ThreadID, req.RunID)
	if err != nil {
		return nil, err
	}
	defer e.unregister(req.RunID, ar)
	// Re-read under registration: a concurrent resume or cancel may have won.
	if run, err = e.d.Store.GetRun(ctx, req.ThreadID, req.RunID); err != nil {
		return nil, err
	}
	if run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT {
		return nil, ErrRunNotWaiting
	}
	if err := e.repairTail(ctx, req.ThreadID); err != nil {
		return nil, fmt.Errorf("runtimeloop: repair thread: %w", err)
	}
	run.Status, run.PendingQuestion, run.EndTime, run.Reason = runtimev1.RunStatus_RUN_STATUS_RUNNING, "", nil, ""
	if run.Usage == nil {
		run.Usage = &runtimev1.TokenUsage{}
	}
	if err := e.d.Store.PutRun(ctx, run); err != nil {
		return nil, fmt.Errorf("runtimeloop: resume run: %w", err)
	}
	seq := e.resumeSeq(ctx, req.ThreadID, req.RunID)
	t := e.newTurn(req.ThreadID, run, req.Agent, req.Limits, sink, seq)
	t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Status{Status: runtimev1.RunStatus_RUN_STATUS_RUNNING}})
	t.userText = req.Answer
	user := &runtimev1.Message{Id: e.d.NewID(), Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: req.Answer, RunId: req.RunID, CreateTime: timestamppb.New(e.d.Now())}
	if err := e.d.Store.AppendMessages(ctx, req.ThreadID, user); err != nil {
		t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_FAILED, e.storeFailure(ctx, t.threadID, err))
		return t.run, nil
	}
	t.drive(ctx, run.GetModel())
	return t.run, nil
}

// CancelRun stops a run. An active run is cancelled (the loop and any
// in-flight tool call stop; the call gets a "cancelled" error result so no
// call dangles) and CancelRun waits up to wait for it to record its end. A
// run waiting for input is marked cancelled directly. A finished run is
// returned unchanged.
func (e *Engine) CancelRun(ctx context.Context, threadID, runID string, wait time.Duration) (*runtimev1.Run, error) {
	e.mu.Lock()
	ar := e.active[runID]
	e.mu.Unlock()
	if ar != nil && ar.threadID == threadID {
		ar.cancel(ErrCancelled)
		select {
		case <-ar.done:
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return e.d.Store.GetRun(ctx, threadID, runID)
	}
	run, err := e.d.Store.GetRun(ctx, threadID, runID)
	if err != nil {
		return nil, err
	}
	if run.GetStatus() == runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT {
		run.Status, run.Reason, run.PendingQuestion = runtimev1.RunStatus_RUN_STATUS_CANCELLED, "cancelled: CancelRun while waiting for input", ""
		run.EndTime = timestamppb.New(e.d.Now())
		if err := e.d.Store.PutRun(ctx, run); err != nil {
			return nil, err
		}
		e.mu.Lock()
		delete(e.seqs, runID)
		e.mu.Unlock()
	}
	return run, nil
}

// CancelActive cancels run runID of thread threadID with cause when it is
// active in this process, without waiting, and reports whether it was. The
// runtime uses it for cancellations requested on another replica (cause
// ErrCancelled) and for runs whose lease a peer's sweep ended (ErrShutdown);
// unlike CancelRun it never touches a run that is not active here.
func (e *Engine) CancelActive(threadID, runID string, cause error) bool {
	e.mu.Lock()
	ar := e.active[runID]
	e.mu.Unlock()
	if ar == nil || ar.threadID != threadID {
		return false
	}
	ar.cancel(cause)
	return true
}

// Shutdown stops every active run of this process (their status becomes
// interrupted, the reason a shutdown, and in-flight calls get a result) and
// waits up to wait for them to record it. Later turns are refused with
// ErrShutdown.
func (e *Engine) Shutdown(wait time.Duration) {
	e.mu.Lock()
	e.closed = true
	var done []chan struct{}
	for _, ar := range e.active {
		ar.cancel(ErrShutdown)
		done = append(done, ar.done)
	}
	e.mu.Unlock()
	deadline := time.After(wait)
	for _, d := range done {
		select {
		case <-d:
		case <-deadline:
			return
		}
	}
}

// Active reports the id of the run active in a thread, if any.
func (e *Engine) Active(threadID string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id, ok := e.byThread[threadID]
	return id, ok
}

func (e *Engine) register(ctx context.Context, threadID, runID string) (context.Context, *activeRun, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, ErrShutdown
	}
	if _, busy := e.byThread[threadID]; busy {
		return nil, nil, ErrRunActive
	}
	cctx, cancel := context.WithCancelCause(ctx)
	ar := &activeRun{threadID: threadID, cancel: cancel, done: make(chan struct{})}
	e.active[runID] = ar
	e.byThread[threadID] = runID
	return cctx, ar, nil
}

func (e *Engine) unregister(runID string, ar *activeRun) {
	e.mu.Lock()
	delete(e.active, runID)
	if e.byThread[ar.threadID] == runID {
		delete(e.byThread, ar.threadID)
	}
	e.mu.Unlock()
	ar.cancel(nil)
	close(ar.done)
}

// repairTail stores a result for every call of the thread's last
// assistant step that has none — a step a stopped process left half done
// (docs/deerflow.md §6.2 DanglingToolCall, made durable): the missing
// results are appended right after that step's other results, before the
// new user message, so the stored conversation stays well formed.
func (e *Engine) repairTail(ctx context.Context, threadID string) error {
	msgs, err := e.d.Store.Messages(ctx, threadID)
	if err != nil {
		return err
	}
	i := len(msgs) - 1
	for i >= 0 && msgs[i].GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_TOOL {
		i--
	}
	if i < 0 || msgs[i].GetRole() != runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT || len(msgs[i].GetToolCalls()) == 0 {
		return nil
	}
	have := map[string]bool{}
	for _, m := range msgs[i+1:] {
		have[m.GetToolCallId()] = true
	}
	var add []*runtimev1.Message
	now := timestamppb.New(e.d.Now())
	for _, c := range msgs[i].GetToolCalls() {
		if c.GetId() == "" || have[c.GetId()] {
			continue
		}
		add = append(add, &runtimev1.Message{Id: e.d.NewID(), Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, ToolCallId: c.GetId(), Name: c.GetName(),
			Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, Content: danglingText, RunId: msgs[i].GetRunId(), CreateTime: now})
	}
	if len(add) == 0 {
		return nil
	}
	e.d.Logger.Warn("stored results for tool calls left without one", "thread", threadID, "calls", len(add))
	return e.d.Store.AppendMessages(ctx, threadID, add...)
}

// supersedeWaiting cancels runs of the thread still waiting for input: a
// new user message replaces the unanswered clarification.
func (e *Engine) supersedeWaiting(ctx context.Context, threadID string) {
	runs, err := e.d.Store.ListRuns(ctx, threadID)
	if err != nil {
		return
	}
	for _, r := range runs {
		if r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT {
			r.Status, r.Reason, r.PendingQuestion = runtimev1.RunStatus_RUN_STATUS_CANCELLED, "superseded: a new turn started in the thread", ""
			r.EndTime = timestamppb.New(e.d.Now())
			_ = e.d.Store.PutRun(ctx, r)
			e.mu.Lock()
			delete(e.seqs, r.GetRunId())
			e.mu.Unlock()
		}
	}
}

// turn is the state of one drive of the loop.
type turn struct {
	e        *Engine
	threadID string
	run      *runtimev1.Run
	agent    Agent
	limits   Limits
	sink     Sink
	emitMu   sync.Mutex
	seq      int64
	userText string
	pending  []string
	det      *loopDetector

	badNames map[string]string // call id → the model's malformed tool name

	// Subagent state: child turns have a name filter and their own prompt.
	isSubagent bool
	subType    *SubagentType
	tasksUsed  int
	model      Model
	modelName  string
	// modelFailure says why no model could be chosen (reported after the
	// first assembly, which may answer without a model).
	modelFailure string
	// profile is the tool profile of the model's provider.
	profile runtimev1.ToolProfile
}

func (e *Engine) newTurn(threadID string, run *runtimev1.Run, a Agent, l Limits, sink Sink, seq int64) *turn {
	return &turn{
		e: e, threadID: threadID, run: run, agent: a, limits: l.merge(e.cfg.Limits), sink: sink, seq: seq,
		det: newLoopDetector(e.cfg.LoopDetection), badNames: map[string]string{},
	}
}

func (t *turn) emit(ev *runtimev1.RunEvent) {
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	t.seq++
	ev.RunId, ev.Seq = t.run.GetRunId(), t.seq
	if t.sink != nil {
		t.sink(ev)
	}
}

var errDeadline = errors.New("runtimeloop: turn deadline reached")

// Stop reasons recorded in Run.reason (docs/deerflow.md §6.2, §8).
const (
	// ReasonSafety: the provider's safety filter ended the response; its tool calls were dropped.
	ReasonSafety = "safety_capped"
	// ReasonLength: the final answer was cut by the provider's length limit (content kept).
	ReasonLength = "model_length_capped"
	// ReasonLoop: the loop detector stopped repeated tool calls.
	ReasonLoop = "loop_capped"
	// ReasonToken: the turn's token budget was used up.
	ReasonToken = "token_capped"
	// ReasonSubagentLimit: task calls were dropped because the run's subagent budget was spent.
	ReasonSubagentLimit = "subagent_limit_capped"
	// ReasonEmpty: the model answered empty after tools twice; a visible fallback was stored.
	ReasonEmpty = "empty_response"
	// ReasonTurnLimit: the turn reached its maximum number of model calls (run failed).
	ReasonTurnLimit = "turn_capped"
	// ReasonDirectAnswer: assembly answered without the model (e.g. an unknown slash skill).
	ReasonDirectAnswer = "direct_answer"
)

// drive runs the loop until the turn ends; t.run holds the outcome.
func (t *turn) drive(parent context.Context, requestedModel string) {
	ctx, cancel := context.WithTimeoutCause(parent, t.limits.Deadline, errDeadline)
	defer cancel()
	e := t.e
	calls, retriedEmpty, usedTools, first := 0, false, false, true
	for {
		if t.stopped(ctx) {
			return
		}
		if calls >= t.limits.MaxModelCalls {
			t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_FAILED, fmt.Sprintf("%s: the turn reached its limit of %d model calls", ReasonTurnLimit, t.limits.MaxModelCalls))
			return
		}
		if t.model == nil && t.modelFailure == "" {
			// The model is chosen before the first assembly: its provider
			// decides the profile the tools are bound in.
			want := requestedModel
			if t.subType != nil && t.subType.Model != "" && want == "" {
				want = t.subType.Model
			}
			name, m, reason := e.chooseModel(ctx, want, t.agent.Model)
			if m == nil {
				t.modelFailure = reason
			} else {
				t.model, t.modelName, t.run.Model = m, name, name
			}
		}
		var profile runtimev1.ToolProfile
		if t.model != nil {
			profile = ProfileOf(t.model)
		}
		t.profile = profile
		asm, err := e.d.Assembler.Assemble(ctx, t.threadID, t.userText, profile)
		if err != nil {
			if t.stopped(ctx) {
				return
			}
			t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_FAILED, "assembly: "+err.Error())
			return
		}
		if first && asm.GetSkipModel() {
			msg := &runtimev1.Message{Id: e.d.NewID(), Role: runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Content: asm.GetDirectAnswer(), RunId: t.run.GetRunId(), CreateTime: timestamppb.New(e.d.Now())}
			if !t.append(ctx, msg) {
				return
			}
			t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_FinalMessage{FinalMessage: msg}})
			t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_COMPLETED, ReasonDirectAnswer)
			return
		}
		if t.model == nil {
			t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_FAILED, t.modelFailure)
			return
		}
		first = false
		tools := t.bindable(asm)
		history, err := e.d.Store.Messages(ctx, t.threadID)
		if err != nil {
			if t.stopped(ctx) {
				return
			}
			t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_FAILED, e.storeFailure(ctx, t.threadID, err))
			return
		}
		req := t.request(asm, history, tools)
		t.attachImages(ctx, req)
		start := time.Now()
		resp, err := t.model.Complete(ctx, req, func(d string) {
			t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_TextDelta{TextDelta: d}})
		})
		calls++
		if o := e.d.Observer; o != nil {
			var u *runtimev1.TokenUsage
			if resp != nil {
				u = resp.Usage
			}
			o.ModelCall(t.modelName, time.Since(start), u, err)
		}
		if err != nil {
			if t.stopped(ctx) {
				return
			}
			t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_FAILED, "model: "+boundErr(err))
			return
		}
		t.addUsage(ctx, resp.Usage)

		// after_model guards, reverse list order (docs/deerflow.md §6.1).
		content, toolCalls, stop := resp.Content, t.normalizeCalls(resp.ToolCalls), ""
		if safetyFinish(resp.FinishReason) {
			n := len(toolCalls)
			toolCalls = nil
			content = appendText(content, fmt.Sprintf("[STOPPED BY SAFETY FILTER] The model provider ended this response with finish reason %q; %d tool call(s) in it were not run. Rephrase the request if you believe this is a mistake.", resp.FinishReason, n))
			stop = ReasonSafety
		}
		if stop == "" && resp.FinishReason == "length" && len(toolCalls) == 0 {
			stop = ReasonLength // content is never rewritten
		}
		if len(toolCalls) == 0 && strings.TrimSpace(content) == "" && usedTools && stop == "" {
			if !retriedEmpty {
				retriedEmpty = true
				t.pending = append(t.pending, "[EMPTY RESPONSE] Your last reply was empty. Using the tool results above, write your final answer to the user now.")
				continue
			}
			content, stop = "I could not produce a final answer: the model returned an empty response after using tools, twice. Please try again or rephrase the request.", ReasonEmpty
		}
		if b := t.limits.TokenBudget; b > 0 {
			used := t.run.GetUsage().GetTotalTokens()
			switch {
			case used >= b:
				if len(toolCalls) > 0 {
					content = appendText(content, fmt.Sprintf("[TOKEN BUDGET REACHED] This turn used %d of its %d tokens; %d tool call(s) were not run.", used, b, len(toolCalls)))
					toolCalls = nil
				}
				if stop == "" {
					stop = ReasonToken
				}
			case float64(used) >= e.cfg.TokenBudgetWarn*float64(b):
				t.queue(fmt.Sprintf("[TOKEN BUDGET WARNING] This turn has used %d of its %d-token budget. Wrap up and give your final answer soon.", used, b))
			}
		}
		if len(toolCalls) > 0 {
			switch v, why := t.det.observe(toolCalls); v {
			case loopHard:
				content = appendText(content, fmt.Sprintf("[FORCED STOP] Repeated tool calls were detected (%s); the calls were not run. This is the answer with what was gathered so far.", why))
				toolCalls, stop = nil, ReasonLoop+": "+why
			case loopWarn:
				t.queue(fmt.Sprintf("[LOOP DETECTED] %s. Change your approach: use the results you already have, try a different tool or different arguments, or give your final answer.", capitalize(why)))
			}
		}
		if len(toolCalls) > 0 {
			var note string
			toolCalls, note = t.limitTasks(toolCalls)
			if note != "" {
				content = appendText(content, note)
				if len(toolCalls) == 0 && stop == "" {
					stop = ReasonSubagentLimit
				}
			}
		}
		msg := &runtimev1.Message{Id: e.d.NewID(), Role: runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Content: content, ToolCalls: toolCalls, RunId: t.run.GetRunId(), CreateTime: timestamppb.New(e.d.Now())}
		if len(toolCalls) == 0 {
			if !t.append(ctx, msg) {
				return
			}
			t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_FinalMessage{FinalMessage: msg}})
			t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_COMPLETED, stop)
			return
		}
		var question string
		if e.d.ExecutorStoresResults {
			if !t.append(ctx, msg) {
				return
			}
			var ok bool
			if question, ok = t.executeInOrder(ctx, toolCalls); !ok {
				return
			}
		} else {
			// The assistant step is stored before its calls run, so a
			// process stopped mid-call leaves calls that the next turn
			// repairs as interrupted (their side effects may have happened);
			// the results follow in call order, in one atomic append.
			if !t.append(ctx, msg) {
				return
			}
			var results []*runtimev1.Message
			results, question = t.executeAll(ctx, toolCalls)
			if !t.append(ctx, results...) {
				return
			}
		}
		usedTools = true
		if t.stopped(ctx) {
			return
		}
		if question != "" {
			t.run.PendingQuestion = question
			t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Clarification{Clarification: question}})
			t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT, "clarification: waiting for the user's answer")
			return
		}
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (t *turn) queue(s string) {
	if len(t.pending) < 4 { // ≤ 4 pending per run (docs/deerflow.md §6.2 LoopDetection)
		t.pending = append(t.pending, s)
	}
}

// stopped finishes the run when ctx ended (cancel, deadline, client gone)
// and reports whether it did.
func (t *turn) stopped(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errDeadline):
		t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_FAILED, fmt.Sprintf("deadline: the turn reached its wall-clock limit of %s", t.limits.Deadline))
	case errors.Is(cause, ErrShutdown):
		t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_INTERRUPTED, "shutdown: the runtime stopped during the run")
	case errors.Is(cause, ErrCancelled):
		t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_CANCELLED, "cancelled: CancelRun stopped the run")
	default:
		t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_CANCELLED, "caller_gone: the caller went away ("+cause.Error()+")")
	}
	return true
}

// append persists messages (detached from cancellation so a step is never
// half-written); on failure the run fails.
func (t *turn) append(ctx context.Context, msgs ...*runtimev1.Message) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := t.e.d.Store.AppendMessages(wctx, t.threadID, msgs...); err != nil {
		t.finish(ctx, runtimev1.RunStatus_RUN_STATUS_FAILED, t.e.storeFailure(ctx, t.threadID, err))
		return false
	}
	return true
}

func (t *turn) finish(ctx context.Context, st runtimev1.RunStatus, reason string) {
	t.run.Status, t.run.Reason = st, reason
	if st != runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT {
		t.run.EndTime = timestamppb.New(t.e.d.Now())
		t.run.PendingQuestion = ""
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	waiting := st == runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT && !t.isSubagent
	var last int64
	if waiting {
		// The status event below is the run's last before the resume: its
		// number is recorded before the run is stored waiting, so a
		// ResumeRun on any replica, which may follow the event at once,
		// continues after it (docs/decisions/0089-run-event-seq.md).
		t.emitMu.Lock()
		last = t.seq + 1
		t.emitMu.Unlock()
		t.e.saveSeq(wctx, t.threadID, t.run.GetRunId(), last)
	}
	if err := t.e.d.Store.PutRun(wctx, t.run); err != nil {
		t.e.d.Logger.Error("run state not saved", "run", t.run.GetRunId(), "thread", t.threadID, "err", err)
	}
	if st == runtimev1.RunStatus_RUN_STATUS_FAILED {
		t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Error{Error: reason}})
	}
	if o := t.e.d.Observer; o != nil {
		o.RunEnded(st, reason, t.isSubagent)
	}
	t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Status{Status: st}})
	if waiting {
		t.emitMu.Lock()
		seq := t.seq
		t.emitMu.Unlock()
		if seq != last { // another event came in between
			t.e.saveSeq(wctx, t.threadID, t.run.GetRunId(), seq)
		}
		t.e.mu.Lock()
		t.e.seqs[t.run.GetRunId()] = seq
		t.e.mu.Unlock()
	}
}

// saveSeq records the last event number of a run waiting for input when
// the store keeps it (EventSeqs); a failure is logged: a resume on this
// replica still continues from memory.
func (e *Engine) saveSeq(ctx context.Context, threadID, runID string, seq int64) {
	es, ok := e.d.Store.(EventSeqs)
	if !ok {
		return
	}
	if err := es.SetEventSeq(ctx, threadID, runID, seq); err != nil {
		e.d.Logger.Warn("run event sequence not saved; a resume on another replica restarts it", "run", runID, "thread", threadID, "err", err)
	}
}

// resumeSeq is the last event number of a run being resumed: this
// process's own (the run waited here) or the store's (it waited on
// another replica), the larger.
func (e *Engine) resumeSeq(ctx context.Context, threadID, runID string) int64 {
	e.mu.Lock()
	seq := e.seqs[runID]
	delete(e.seqs, runID)
	e.mu.Unlock()
	if es, ok := e.d.Store.(EventSeqs); ok {
		stored, err := es.EventSeq(ctx, threadID, runID)
		if err != nil {
			e.d.Logger.Warn("run event sequence not read; continuing from this replica's", "run", runID, "thread", threadID, "err", err)
		}
		seq = max(seq, stored)
	}
	return seq
}

func (t *turn) addUsage(ctx context.Context, u *runtimev1.TokenUsage) {
	if u == nil || (u.GetTotalTokens() == 0 && u.GetInputTokens() == 0 && u.GetOutputTokens() == 0) {
		return
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.InputTokens + u.OutputTokens
	}
	ru := t.run.Usage
	if ru == nil {
		ru = &runtimev1.TokenUsage{}
		t.run.Usage = ru
	}
	ru.InputTokens += u.GetInputTokens()
	ru.OutputTokens += u.GetOutputTokens()
	ru.TotalTokens += u.GetTotalTokens()
	if err := t.e.d.Store.AddUsage(context.WithoutCancel(ctx), t.threadID, u); err != nil {
		t.e.d.Logger.Warn("thread usage not saved", "thread", t.threadID, "err", err)
	}
	t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Usage{Usage: proto.Clone(ru).(*runtimev1.TokenUsage)}})
}

// chooseModel resolves and authorizes the model (docs/deerflow.md §3.6):
// the requested name, else the agent's, else the configured default, else
// the first configured model; denied → the first other model the principal
// may use; none → no model (fail closed, also when authz errs).
func (e *Engine) chooseModel(ctx context.Context, requested, agentModel string) (string, Model, string) {
	names := e.d.Models.Names()
	want := requested
	if want == "" {
		want = agentModel
	}
	if want == "" {
		want = e.cfg.DefaultModel
	}
	if want == "" && len(names) > 0 {
		want = names[0]
	}
	if want == "" {
		return "", nil, "model: no model is configured (runtime.loop.models)"
	}
	if _, ok := e.d.Models.Model(want); !ok {
		return "", nil, fmt.Sprintf("model: %q is not a configured model", want)
	}
	ok, why, err := e.d.Authorizer.AuthorizeModel(ctx, want)
	if err != nil {
		return "", nil, "model: authorization unavailable (fail closed): " + boundErr(err)
	}
	if ok {
		m, _ := e.d.Models.Model(want)
		return want, m, ""
	}
	allowed, err := e.d.Authorizer.FilterModels(ctx, names)
	if err != nil {
		return "", nil, "model: authorization unavailable (fail closed): " + boundErr(err)
	}
	for _, n := range allowed {
		if n == want {
			continue
		}
		m, exists := e.d.Models.Model(n)
		if !exists {
			continue
		}
		if ok2, _, err := e.d.Authorizer.AuthorizeModel(ctx, n); err == nil && ok2 {
			e.d.Logger.Warn("model denied, falling back", "denied", want, "model", n, "reason", why)
			return n, m, ""
		}
	}
	return "", nil, fmt.Sprintf("model: no models authorized (%q denied: %s)", want, why)
}

// storeFailure logs a store error with its cause and returns the run reason
// clients see: the code "store" and a sentence without driver text
// (docs/decisions/0030-error-model.md).
func (e *Engine) storeFailure(ctx context.Context, threadID string, err error) string {
	e.d.Logger.ErrorContext(ctx, "agent loop: thread store failed", "thread", threadID, "err", err)
	return "store: the thread store failed; retry the turn"
}

func boundErr(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = s[:497] + "..."
	}
	return s
}

// normalizeCalls gives every call an id and a provider-safe name, so the
// stored assistant message never poisons the thread; the original bad name
// is kept for the error result.
func (t *turn) normalizeCalls(in []*runtimev1.ToolCall) []*runtimev1.ToolCall {
	seen := map[string]bool{}
	for i, c := range in {
		if c.GetId() == "" || seen[c.GetId()] {
			c.Id = fmt.Sprintf("call_%s_%d", shortID(t.e.d.NewID()), i)
		}
		seen[c.GetId()] = true
		if !validToolName.MatchString(c.GetName()) {
			t.badNames[c.GetId()] = c.GetName()
			c.Name = invalidToolName
		}
	}
	return in
}

// request builds the model request: one coalesced system message (agent or
// subagent prompt, then the assembly's prompt sections), the repaired
// history with the last user message sanitised, then hidden pending
// messages (consumed).
func (t *turn) request(asm *runtimev1.AssembleToolsResponse, history []*runtimev1.Message, tools []*runtimev1.ToolSchema) *ModelRequest {
	var sys []string
	if t.subType != nil {
		sys = append(sys, t.subType.SystemPrompt)
	} else if t.agent.SystemPrompt != "" {
		sys = append(sys, t.agent.SystemPrompt)
	}
	for _, s := range asm.GetPromptSections() {
		if strings.TrimSpace(s.GetText()) != "" {
			sys = append(sys, s.GetText())
		}
	}
	msgs := repairHistory(history)
	if !t.e.cfg.DisableInputSanitization {
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_USER {
				c := proto.Clone(msgs[i]).(*runtimev1.Message)
				c.Content = SanitizeUserInput(c.Content)
				msgs[i] = c
				break
			}
		}
	}
	for _, p := range t.pending {
		msgs = append(msgs, &runtimev1.Message{Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: p})
	}
	t.pending = nil
	return &ModelRequest{System: strings.Join(sys, "\n\n"), Messages: msgs, Tools: tools, Deferred: asm.GetDeferred()}
}

// bindable returns the tools to bind: the assembly's tools, plus task for
// a lead agent with subagents enabled; for a subagent, the assembly's tools
// narrowed by the subagent's allow/deny lists (tool_search exempt).
func (t *turn) bindable(asm *runtimev1.AssembleToolsResponse) []*runtimev1.ToolSchema {
	var out []*runtimev1.ToolSchema
	for _, s := range asm.GetTools() {
		if s.GetName() == ToolTask || (t.isSubagent && !t.subagentAllows(s.GetName())) || !t.visionAllows(s.GetName()) {
			continue // task: the loop binds its own schema, listing the configured subagent types
		}
		out = append(out, s)
	}
	if !t.isSubagent && t.agent.SubagentsEnabled && t.e.d.Threads != nil {
		out = append(out, t.e.taskSchema())
	}
	return out
}

// subagentAllows applies a subagent type's allowlist then denylist
// (docs/deerflow.md §1.4); task and ask_clarification are never allowed,
// tool_search always is.
func (t *turn) subagentAllows(name string) bool {
	if name == ToolSearch {
		return true
	}
	if name == ToolTask || name == ToolAskClarification {
		return false
	}
	st := t.subType
	if st == nil {
		return true
	}
	if st.Tools != nil && !contains(st.Tools, name) {
		return false
	}
	deny := st.DisallowedTools
	if deny == nil {
		deny = []string{ToolTask}
	}
	return !contains(deny, name)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// executeAll runs the calls (in parallel, bounded) and returns their tool
// messages in call order, plus the clarification question when the model
// asked one (docs/deerflow.md §6.2 Clarification: the question becomes
// the call's result and the turn ends).
func (t *turn) executeAll(ctx context.Context, calls []*runtimev1.ToolCall) ([]*runtimev1.Message, string) {
	results := make([]*runtimev1.ToolResult, len(calls))
	question := ""
	for _, c := range calls {
		t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_ToolCallStarted{ToolCallStarted: c}})
	}
	sem := make(chan struct{}, t.e.cfg.ParallelToolCalls)
	var wg sync.WaitGroup
	for i, c := range calls {
		if c.GetName() == ToolAskClarification && !t.isSubagent {
			q := clarificationText(c)
			if question == "" {
				question = q
			}
			results[i] = textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS, 0, "", q)
			continue
		}
		wg.Add(1)
		go func(i int, c *runtimev1.ToolCall) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
			}
			results[i], _ = t.executeOne(ctx, c)
		}(i, c)
	}
	wg.Wait()
	now := timestamppb.New(t.e.d.Now())
	msgs := make([]*runtimev1.Message, len(calls))
	for i, c := range calls {
		r := results[i]
		r.ToolCallId, r.Name = c.GetId(), c.GetName()
		t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_ToolCallFinished{ToolCallFinished: r}})
		if len(r.GetPromoted().GetNames()) > 0 {
			t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Promoted{Promoted: r.GetPromoted()}})
		}
		msgs[i] = &runtimev1.Message{
			Id: t.e.d.NewID(), Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, Content: resultText(r),
			ToolCallId: c.GetId(), Name: c.GetName(), Status: r.GetStatus(), RunId: t.run.GetRunId(), CreateTime: now,
			ProviderOutput: r.GetProviderOutput(),
		}
	}
	return msgs, question
}

func (t *turn) invalidName(c *runtimev1.ToolCall) bool {
	_, bad := t.badNames[c.GetId()]
	return bad || !validToolName.MatchString(c.GetName())
}

func (t *turn) isTask(c *runtimev1.ToolCall) bool {
	return c.GetName() == ToolTask && !t.isSubagent && t.agent.SubagentsEnabled && t.e.d.Threads != nil
}

// executeOne runs one call: local refusals first (bad name, subagent
// filter, clarification in a subagent), task through a child loop, the
// rest through the Executor. The result is never nil; fromExecutor tells
// whether the Executor produced it.
func (t *turn) executeOne(ctx context.Context, c *runtimev1.ToolCall) (_ *runtimev1.ToolResult, fromExecutor bool) {
	if err := ctx.Err(); err != nil {
		return cancelledResult(c, ctx), false
	}
	if t.invalidName(c) {
		bad, ok := t.badNames[c.GetId()]
		if !ok {
			bad = c.GetName()
		}
		return textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_POLICY, "tool.invalid_name",
			fmt.Sprintf("Error: the tool call has no valid tool name (got %q). Call one of the tools you were given, by its exact name.", bad)), false
	}
	if t.isSubagent && !t.subagentAllows(c.GetName()) {
		return textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_POLICY, "subagent.tool_denied",
			fmt.Sprintf("Error: Tool '%s' is not available to this subagent. Use the tools you were given.", c.GetName())), false
	}
	if !t.visionAllows(c.GetName()) {
		return textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_POLICY, "view_image.no_vision",
			"Error: view_image needs a model that supports vision; this turn's model does not."), false
	}
	if t.isTask(c) {
		return t.runTask(ctx, c), false
	}
	r, err := t.e.d.Executor.Execute(ctx, t.threadID, t.run.GetRunId(), t.profile, c, func(n *typev1.Notification) {
		t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Notification{Notification: n}})
	})
	if err != nil || r == nil {
		if ctx.Err() != nil {
			return cancelledResult(c, ctx), false
		}
		if err == nil {
			err = errors.New("no result")
		}
		return textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_RUNTIME, "",
			fmt.Sprintf("Error: Tool '%s' failed with %s. Continue with the information you have or try another tool.", c.GetName(), boundErr(err))), false
	}
	return r, true
}

// executeInOrder is executeAll for an Executor that stores its results:
// the calls are walked in order — task calls started concurrently up
// front, executor calls one at a time — and the loop stores the results it
// made itself as it reaches them, so the thread holds every result in
// call order. It returns the clarification question, and false when the
// run ended on a store failure.
func (t *turn) executeInOrder(ctx context.Context, calls []*runtimev1.ToolCall) (string, bool) {
	for _, c := range calls {
		t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_ToolCallStarted{ToolCallStarted: c}})
	}
	type slot struct {
		r    *runtimev1.ToolResult
		done chan struct{}
	}
	early := make([]*slot, len(calls))
	for i, c := range calls {
		if t.isTask(c) {
			sl := &slot{done: make(chan struct{})}
			early[i] = sl
			go func() { defer close(sl.done); sl.r, _ = t.executeOne(ctx, c) }()
		}
	}
	question := ""
	ok := true
	for i, c := range calls {
		var r *runtimev1.ToolResult
		stored := false
		switch {
		case early[i] != nil:
			<-early[i].done
			r = early[i].r
		case c.GetName() == ToolAskClarification && !t.isSubagent:
			q := clarificationText(c)
			if question == "" {
				question = q
			}
			r = textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS, 0, "", q)
		default:
			r, stored = t.executeOne(ctx, c)
		}
		r.ToolCallId, r.Name = c.GetId(), c.GetName()
		t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_ToolCallFinished{ToolCallFinished: r}})
		if len(r.GetPromoted().GetNames()) > 0 {
			t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Promoted{Promoted: r.GetPromoted()}})
		}
		if !stored && ok {
			ok = t.append(ctx, &runtimev1.Message{
				Id: t.e.d.NewID(), Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, Content: resultText(r),
				ToolCallId: c.GetId(), Name: c.GetName(), Status: r.GetStatus(), RunId: t.run.GetRunId(), CreateTime: timestamppb.New(t.e.d.Now()),
				ProviderOutput: r.GetProviderOutput(),
			})
		}
	}
	return question, ok
}

func cancelledResult(c *runtimev1.ToolCall, ctx context.Context) *runtimev1.ToolResult {
	why := "the run was cancelled"
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errDeadline):
		why = "the turn reached its deadline"
	case errors.Is(cause, ErrShutdown):
		why = "the runtime is shutting down"
	}
	return textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_RUNTIME, "run.cancelled",
		fmt.Sprintf("Error: Tool '%s' was stopped: %s.", c.GetName(), why))
}

func textResult(c *runtimev1.ToolCall, st runtimev1.ToolCallStatus, kind runtimev1.ErrorKind, reason, text string) *runtimev1.ToolResult {
	return &runtimev1.ToolResult{
		ToolCallId: c.GetId(), Name: c.GetName(), Status: st, ErrorKind: kind, ReasonCode: reason,
		Content: []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: text}},
	}
}

// resultText is the text the model sees for a result: text blocks joined
// by newlines; other blocks are named.
func resultText(r *runtimev1.ToolResult) string {
	var parts []string
	for _, b := range r.GetContent() {
		switch {
		case b.GetText() != "":
			parts = append(parts, b.GetText())
		case b.GetUri() != "":
			parts = append(parts, fmt.Sprintf("[%s %s]", strings.ToLower(strings.TrimPrefix(b.GetType().String(), "CONTENT_BLOCK_TYPE_")), b.GetUri()))
		case b.GetType() != typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT:
			parts = append(parts, fmt.Sprintf("[%s content, %s]", strings.ToLower(strings.TrimPrefix(b.GetType().String(), "CONTENT_BLOCK_TYPE_")), b.GetMimeType()))
		}
	}
	if len(parts) == 0 && r.GetStructuredContent() != nil {
		b, _ := r.GetStructuredContent().MarshalJSON()
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

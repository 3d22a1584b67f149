// Package runtimeloop is the runtime's agent loop (docs/architecture.md §3.3):
// one turn = AssembleTools → authorized model choice → chat completion
// (streamed deltas) → model-side guards → tool calls through ExecuteToolCall
// → repeat until a final answer, a clarification, a cancel or a limit.
//
// The engine depends only on the narrow interfaces declared here (Assembler,
// Executor, ModelAuthorizer, Store, Threads, Models); the runtime service
// adapts them to its own RPC logic and store. The model-side middlewares of
// docs/deerflow.md §6.1 are applied in the reference order:
//
//   - before a model call: dangling tool calls repaired, malformed names and
//     arguments sanitised, input sanitisation of framework tags on the last
//     user message, one coalesced system message, pending hidden warnings
//     (loop detection, token budget, terminal-response retry);
//   - after a model call, in the reference's reverse order: safety finish
//     reason → length finish reason → terminal response → token budget →
//     loop detection → subagent limit;
//   - at tool time: ask_clarification and task are intercepted by the loop
//     (docs/deerflow.md §6.2 Clarification, §1.4); every other call goes to
//     the Executor (the runtime's ExecuteToolCall chain, docs/architecture.md §3.2).
//
// Run outcomes. A run ends completed when the turn produced a final
// assistant message — also a forced one, with Run.reason naming the stop:
// safety_capped, model_length_capped, loop_capped, token_capped,
// subagent_limit_capped, empty_response, direct_answer. It ends failed when
// no answer could be produced (turn_capped, deadline, model, assembly,
// store, no authorized model), cancelled on CancelRun or when the caller
// goes away, interrupted on Engine.Shutdown (and, for runs left running by
// a stopped process, by the runtime's start-up sweep), and
// waiting_for_input on a clarification (ResumeRun continues the same run).
// The reason's code is the text before the first ':'.
//
// No call ever dangles: every stored assistant tool call gets a result —
// the tool's, a refusal, a "stopped" result on cancel/deadline/shutdown, or,
// for a step a crashed process left half done, a synthesised
// "interrupted" result stored before the next turn's user message.
//
// Subagents. A task call runs a child turn on a child thread (Threads)
// with the subagent type's prompt, the parent's agent narrowed by the
// type's allow/deny lists (task and ask_clarification never; tool_search
// always) and the intersected skills allowlist; its deferral and
// promotions are the child thread's own. At most Subagents.MaxConcurrent
// task calls of one response run (concurrently), at most MaxTotal per run.
package runtimeloop

import (
	"context"
	"errors"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// Names of the tools the loop handles itself.
const (
	// ToolAskClarification ends the turn with a question (docs/deerflow.md §6.2 Clarification).
	ToolAskClarification = "ask_clarification"
	// ToolTask delegates to a subagent (docs/deerflow.md §1.4).
	ToolTask = "task"
	// ToolSearch is the deferred-tool search tool; subagent allow/deny
	// lists never apply to it (docs/deerflow.md §1.4).
	ToolSearch = "tool_search"
)

// Errors returned by the Engine. The runtime maps them to status codes.
var (
	// ErrRunActive: a run is already running in the thread.
	ErrRunActive = errors.New("runtimeloop: a run is already active in this thread")
	// ErrRunNotWaiting: ResumeRun on a run that is not waiting for input.
	ErrRunNotWaiting = errors.New("runtimeloop: the run is not waiting for input")
	// ErrNotFound: no such run.
	ErrNotFound = errors.New("runtimeloop: run not found")
	// ErrCancelled is the cancellation cause of CancelRun.
	ErrCancelled = errors.New("runtimeloop: run cancelled")
	// ErrShutdown is the cancellation cause of Engine.Shutdown.
	ErrShutdown = errors.New("runtimeloop: the runtime is shutting down")
)

// Assembler returns the tools, prompt sections and deferred names of the
// next model call of a thread (the runtime's AssembleTools, docs/architecture.md §3.1).
type Assembler interface {
	// Assemble runs assembly for threadID with the latest user text, the
	// tools bound in profile's form (the chosen model's provider).
	Assemble(ctx context.Context, threadID, userMessage string, profile runtimev1.ToolProfile) (*runtimev1.AssembleToolsResponse, error)
}

// Executor runs one tool call through the tool-call chain (the runtime's
// ExecuteToolCall, docs/architecture.md §3.2). Tool failures are results; an error
// means the call could not be run at all (the loop turns it into a RUNTIME
// error result so the model can carry on, docs/deerflow.md §7).
type Executor interface {
	// Execute runs call in threadID for runID; profile is the form the
	// model saw the tools in (the call's name and arguments are mapped back
	// from it); notify receives progress and log notifications (may be
	// called from the executing goroutine).
	Execute(ctx context.Context, threadID, runID string, profile runtimev1.ToolProfile, call *runtimev1.ToolCall, notify func(*typev1.Notification)) (*runtimev1.ToolResult, error)
}

// ModelAuthorizer decides model:use for the principal of the context
// (docs/deerflow.md §3.6).
type ModelAuthorizer interface {
	// AuthorizeModel reports whether the model may be used and, when not, why.
	AuthorizeModel(ctx context.Context, model string) (allowed bool, reason string, err error)
	// FilterModels returns the candidates the principal may use, in candidate order.
	FilterModels(ctx context.Context, candidates []string) ([]string, error)
}

// Store persists a thread's messages and runs. AppendMessages must be
// atomic: all messages or none (the loop writes an assistant message and
// its tool results in one call, so a crash never leaves a half-written step).
type Store interface {
	// Messages returns the thread's messages, oldest first.
	Messages(ctx context.Context, threadID string) ([]*runtimev1.Message, error)
	// AppendMessages appends messages atomically (ids and times filled by the store when empty).
	AppendMessages(ctx context.Context, threadID string, msgs ...*runtimev1.Message) error
	// PutRun creates or replaces a run.
	PutRun(ctx context.Context, r *runtimev1.Run) error
	// GetRun returns a run or an error wrapping ErrNotFound.
	GetRun(ctx context.Context, threadID, runID string) (*runtimev1.Run, error)
	// ListRuns lists a thread's runs, newest first.
	ListRuns(ctx context.Context, threadID string) ([]*runtimev1.Run, error)
	// AddUsage adds token usage to the thread's total.
	AddUsage(ctx context.Context, threadID string, u *runtimev1.TokenUsage) error
}

// EventSeqs is implemented by a Store that records the number of a run's
// last event (RunEvent.seq) when it waits for input, so that a ResumeRun
// on another replica continues the numbering instead of restarting at 1
// (docs/decisions/0089-run-event-seq.md). Optional: without it the number
// is kept in this process only.
type EventSeqs interface {
	// SetEventSeq records seq for the run.
	SetEventSeq(ctx context.Context, threadID, runID string, seq int64) error
	// EventSeq returns the recorded number (0 when none).
	EventSeq(ctx context.Context, threadID, runID string) (int64, error)
}

// ChildSpec describes the child thread of a subagent task.
type ChildSpec struct {
	// ParentThreadID is the delegating thread.
	ParentThreadID string
	// ParentRunID is the delegating run.
	ParentRunID string
	// SubagentType is the subagent type name.
	SubagentType string
	// Skills is the subagent's skills allowlist after intersection with the
	// parent's (nil = all, empty = none; docs/deerflow.md §1.4).
	Skills *typev1.StringList
}

// Threads creates child threads for subagents.
type Threads interface {
	// CreateChildThread creates a thread of the same owner and agent as the
	// parent with its own promotion state, narrowed by spec, and returns its id.
	CreateChildThread(ctx context.Context, spec ChildSpec) (string, error)
}

// Sink receives the events of a run in order. It is called from the loop's
// goroutine only; it should not block for long.
type Sink func(*runtimev1.RunEvent)

// Agent is what the loop needs of a thread's agent profile.
type Agent struct {
	// Name of the agent ("default" for the built-in one).
	Name string
	// Model is the agent's model name; empty = the configured default.
	Model string
	// SystemPrompt is the agent's prompt, placed before the assembly sections.
	SystemPrompt string
	// SubagentsEnabled binds the task tool.
	SubagentsEnabled bool
	// Skills is the agent's skills allowlist (nil = all), intersected with a
	// subagent type's list for child threads.
	Skills *typev1.StringList
}

// Observer receives measurements (metrics); its methods must be cheap and
// safe for concurrent use.
type Observer interface {
	// ModelCall reports one model call: its duration, usage (may be nil)
	// and error.
	ModelCall(model string, d time.Duration, u *runtimev1.TokenUsage, err error)
	// RunEnded reports the final (or waiting) status of a run; subagent
	// tells child runs apart.
	RunEnded(status runtimev1.RunStatus, reason string, subagent bool)
}

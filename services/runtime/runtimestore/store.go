// Package runtimestore is the runtime's store seam: the Store interface over
// threads, messages, thread events, runs and custom agents, the promotion
// reducer of docs/deerflow.md §2.5, and an in-memory implementation used
// by tests. The sqlite implementation is runtimesqlite; runtimetest holds the
// conformance suite every implementation passes (docs/architecture.md §6).
package runtimestore

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// ErrNotFound is returned when a thread, run or agent does not exist.
var ErrNotFound = errors.New("runtimestore: not found")

// Thread is a stored thread: its public view plus state the API does not show.
type Thread struct {
	// Proto is the public view (owner, agent, promoted, active skills,
	// artifacts, todos, usage, metadata, read_files, timestamps).
	Proto *runtimev1.Thread
	// ReadMarks maps a virtual file path to the SHA-256 hex digest of the
	// content the thread last read through read_file (read-before-write,
	// docs/deerflow.md §6.2). Proto.ReadFiles mirrors its keys, sorted.
	ReadMarks map[string]string
	// Child is set on a thread the agent loop created for a subagent task
	// (docs/deerflow.md §1.4) and nil on every other thread. Only the
	// runtime writes it (never from a request field), so it is trusted:
	// CallContext.is_subagent is derived from it. It is fixed at
	// CreateThread; UpdateThread keeps the stored value.
	Child *Child
}

// Child marks a subagent's thread.
type Child struct {
	// ParentThreadID is the delegating thread.
	ParentThreadID string
	// ParentRunID is the delegating run.
	ParentRunID string
	// SubagentType is the subagent type name (runtime.loop.subagents.types).
	SubagentType string
	// Agent is the thread's agent override: the parent's agent narrowed for
	// the subagent (skills allowlist intersected, subagents disabled). It is
	// used instead of the agent named by Proto.Agent and is never stored as
	// an agent of its own, so it does not appear in ListAgents. nil = the
	// named agent.
	Agent *runtimev1.Agent
}

// Clone returns a deep copy.
func (t *Thread) Clone() *Thread {
	if t == nil {
		return nil
	}
	c := &Thread{Proto: cloneThread(t.Proto), ReadMarks: make(map[string]string, len(t.ReadMarks))}
	for k, v := range t.ReadMarks {
		c.ReadMarks[k] = v
	}
	if t.Child != nil {
		ch := *t.Child
		if ch.Agent != nil {
			ch.Agent = proto.Clone(ch.Agent).(*runtimev1.Agent)
		}
		c.Child = &ch
	}
	return c
}

// Event is one entry of a thread's event log (e.g. an authz fail-open
// decision, docs/architecture.md §2.2).
type Event struct {
	// Seq is the store-assigned sequence number, increasing.
	Seq int64
	// ThreadID is the thread.
	ThreadID string
	// Kind is a stable code, e.g. "authz.fail_open".
	Kind string
	// Detail is human text.
	Detail string
	// Time is when it was recorded.
	Time time.Time
}

// Page selects a page of a listing.
type Page struct {
	// Limit is the maximum number of rows (>= 1).
	Limit int
	// Token is the opaque continuation from the previous page ("" = first).
	Token string
}

// Update is the mutation UpdateThread applies inside one write transaction:
// it may change t in place and returns the messages to append in the same
// transaction. Returning an error rolls everything back.
type Update func(t *Thread) (appendMsgs []*runtimev1.Message, err error)

// Store persists the runtime's state. Implementations are safe for
// concurrent use; UpdateThread is atomic (read-modify-write in one write
// transaction), so concurrent promotions never lose an update.
type Store interface {
	// CreateThread stores a new thread (Proto.ThreadId set by the caller).
	CreateThread(ctx context.Context, t *Thread) error
	// GetThread returns a thread or ErrNotFound.
	GetThread(ctx context.Context, id string) (*Thread, error)
	// ListThreads lists the threads of one owner, newest first. Subagent
	// threads (Child != nil) are not listed: they are plumbing of the agent
	// loop, reachable by id (the task result's child_thread_id).
	ListThreads(ctx context.Context, tenant, subject string, p Page) (threads []*Thread, next string, err error)
	// UpdateThread applies fn atomically and bumps update_time; it returns
	// the thread after the change, or ErrNotFound. Under WithCallResult it
	// also stores the call's result in its claim, in the same transaction.
	UpdateThread(ctx context.Context, id string, fn Update) (*Thread, error)
	// ChildThreads returns the ids of the subagent threads whose
	// Child.ParentThreadID is parentID (any order; none = empty).
	ChildThreads(ctx context.Context, parentID string) ([]string, error)
	// DeleteThread deletes a thread with its messages, events and runs;
	// ErrNotFound when absent.
	DeleteThread(ctx context.Context, id string) error
	// AppendMessages appends messages to a thread (ids and create_time set
	// by the caller when empty: the store fills them).
	AppendMessages(ctx context.Context, threadID string, msgs ...*runtimev1.Message) error
	// ListMessages pages a thread's messages, oldest first.
	ListMessages(ctx context.Context, threadID string, p Page) (msgs []*runtimev1.Message, next string, err error)
	// AppendEvent records a thread event.
	AppendEvent(ctx context.Context, e Event) error
	// ListEvents returns a thread's events, oldest first.
	ListEvents(ctx context.Context, threadID string) ([]Event, error)
	// PutRun creates or replaces a run (keyed by run_id). It keeps the
	// run's lease and cancel flag (StartRun sets them).
	PutRun(ctx context.Context, r *runtimev1.Run) error
	// GetRun returns a run of a thread or ErrNotFound.
	GetRun(ctx context.Context, threadID, runID string) (*runtimev1.Run, error)
	// ListRuns lists a thread's runs, newest first.
	ListRuns(ctx context.Context, threadID string) ([]*runtimev1.Run, error)
	// InterruptUnfinished marks every RUNNING run as INTERRUPTED with reason
	// and end time. Called at start: a run still running then belongs to a
	// process that stopped (docs/architecture.md §3.3). Returns how many runs changed.
	InterruptUnfinished(ctx context.Context, reason string, now time.Time) (int, error)
	// RunLeases: run ownership, lease renewal, cross-replica cancel and
	// the sweep of expired leases (leases.go).
	RunLeases
	// ToolCalls: the claims and results that make ExecuteToolCall
	// idempotent (toolcalls.go).
	ToolCalls
	// PutAgent creates or replaces an agent (update_time set by the caller).
	PutAgent(ctx context.Context, a *runtimev1.Agent) error
	// GetAgent returns an agent or ErrNotFound.
	GetAgent(ctx context.Context, name string) (*runtimev1.Agent, error)
	// ListAgents lists agents by name.
	ListAgents(ctx context.Context) ([]*runtimev1.Agent, error)
	// DeleteAgent deletes an agent; ErrNotFound when absent.
	DeleteAgent(ctx context.Context, name string) error
	// PurgeThreadsBefore deletes threads whose update_time is before t
	// (retention) and returns their ids so their workspaces can be removed.
	PurgeThreadsBefore(ctx context.Context, t time.Time) ([]string, error)
	// PurgeRunsBefore deletes the finished runs (every status but RUNNING
	// and WAITING_FOR_INPUT) that started before t (retention) and returns
	// how many it deleted.
	PurgeRunsBefore(ctx context.Context, t time.Time) (int, error)
	// PurgeMessagesBefore deletes old messages (retention) by whole turns,
	// so no tool result is left without its call: in each thread it
	// deletes every message before the USER message that opens the turn
	// holding the thread's first message created at or after t — all of
	// the thread's messages when none is that recent. It returns how many
	// it deleted.
	PurgeMessagesBefore(ctx context.Context, t time.Time) (int, error)
	// Close releases the store.
	Close() error
}

// IdleThreadScanner is implemented by stores that can list threads of
// every owner idle since before a time (retention of MCP front-door
// threads, runtime.retention.frontdoor_threads). Memory, runtimesqlite and
// runtimepg implement it.
type IdleThreadScanner interface {
	// IdleThreads returns at most limit threads (any owner, subagent
	// threads included) whose update_time is before t, in id order,
	// starting after the id after ("" = from the first).
	IdleThreads(ctx context.Context, t time.Time, after string, limit int) ([]*Thread, error)
}

type noTouchKey struct{}

// NoTouch marks ctx so that UpdateThread keeps the thread's update_time:
// maintenance writes (retention removing expired artifacts) must not make
// an idle thread look active.
func NoTouch(ctx context.Context) context.Context { return context.WithValue(ctx, noTouchKey{}, true) }

// Touches reports whether UpdateThread under ctx bumps update_time (true
// unless ctx comes from NoTouch). For Store implementations.
func Touches(ctx context.Context) bool { v, _ := ctx.Value(noTouchKey{}).(bool); return !v }

// CutTurns returns how many of msgs (one thread's, oldest first) the
// PurgeMessagesBefore rule deletes for cutoff t. For Store implementations.
func CutTurns(msgs []*runtimev1.Message, t time.Time) int {
	k := -1
	for i, m := range msgs {
		if !m.GetCreateTime().AsTime().Before(t) {
			k = i
			break
		}
	}
	if k < 0 {
		return len(msgs)
	}
	for b := k; b >= 0; b-- {
		if msgs[b].GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_USER {
			return b
		}
	}
	return 0
}

// ErrExists is returned by CreateThread for a duplicate id.
var ErrExists = errors.New("runtimestore: already exists")

func errorsExists(id string) error { return errors.Join(ErrExists, errors.New("thread "+id)) }

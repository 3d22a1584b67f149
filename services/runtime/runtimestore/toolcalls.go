package runtimestore

import (
	"context"
	"time"
)

// Idempotent tool calls (docs/decisions/0082-idempotent-tool-calls.md):
// ExecuteToolCall claims (thread_id, tool_call_id) before running the
// chain; the claim's row holds the result once the call's state update
// commits (in the same transaction), so a retried call — on any replica —
// returns the stored result instead of running the tool twice.

// CallState is the state of a claimed tool call.
type CallState int32

const (
	// CallRunning: a request is executing the call.
	CallRunning CallState = 1
	// CallDone: the result is stored.
	CallDone CallState = 2
)

// ToolCall is a claimed (thread_id, tool_call_id).
type ToolCall struct {
	// State is CallRunning or CallDone.
	State CallState
	// Fingerprint identifies the call (tool name and arguments): a retry
	// must carry the same one.
	Fingerprint string
	// Lease is the executing replica and until when its claim holds
	// (CallRunning).
	Lease Lease
	// Result is the stored result (CallDone; a marshalled
	// runtimev1.ToolResult).
	Result []byte
}

// ToolCalls is the part of Store that makes ExecuteToolCall idempotent.
type ToolCalls interface {
	// ClaimToolCall inserts a running claim of (threadID, callID) under l
	// unless one exists: claimed is true when this call inserted it;
	// otherwise existing is the stored claim. ErrNotFound for a missing
	// thread.
	ClaimToolCall(ctx context.Context, threadID, callID, fingerprint string, l Lease) (claimed bool, existing ToolCall, err error)
	// GetToolCall returns a claim or ErrNotFound.
	GetToolCall(ctx context.Context, threadID, callID string) (ToolCall, error)
	// SettleToolCall stores result for a claim still running whose lease
	// ended before now (its executor stopped before recording a result)
	// and returns the claim as stored afterwards.
	SettleToolCall(ctx context.Context, threadID, callID string, result []byte, now time.Time) (ToolCall, error)
	// ReleaseToolCall deletes the running claim of owner (the request
	// failed before a result could be recorded; a retry runs the call).
	ReleaseToolCall(ctx context.Context, threadID, callID, owner string) error
	// PurgeToolCallsBefore deletes claims created before t (the
	// idempotency window) and returns how many.
	PurgeToolCallsBefore(ctx context.Context, t time.Time) (int, error)
}

type resultKey struct{}

// CallResult is the result UpdateThread records with the state update.
type CallResult struct {
	// CallID is the claimed tool_call_id.
	CallID string
	// Result is the marshalled runtimev1.ToolResult.
	Result []byte
}

// WithCallResult marks ctx so that UpdateThread stores r as the result of
// the thread's claim r.CallID in the same transaction as the update.
func WithCallResult(ctx context.Context, r CallResult) context.Context {
	return context.WithValue(ctx, resultKey{}, r)
}

// CallResultOf returns the result UpdateThread under ctx must record, if
// any. For Store implementations.
func CallResultOf(ctx context.Context) (CallResult, bool) {
	r, ok := ctx.Value(resultKey{}).(CallResult)
	return r, ok
}

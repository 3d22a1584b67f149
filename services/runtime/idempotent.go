package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Idempotent ExecuteToolCall per (thread_id, tool_call_id)
// (docs/decisions/0082-idempotent-tool-calls.md): the public RPCs claim the
// pair before the chain runs; the result is stored with the call's state
// update; a retry — on any replica — gets the stored result. A retry while
// the first request still executes waits for its result (up to the claim's
// lease and the retry's own deadline) and otherwise gets ABORTED, which is
// retryable. A claim whose executor stopped before recording a result is
// settled with an error result saying the effect is unknown, never run
// again.

// callWindow is how long a (thread_id, tool_call_id) stays claimed: a
// retry within it returns the stored result.
const callWindow = 24 * time.Hour

// callPoll is how often a duplicate polls for the first request's result.
const callPoll = 50 * time.Millisecond

// fingerprint identifies a call: its tool name and arguments.
func fingerprint(c *runtimev1.ToolCall) string {
	h := sha256.New()
	h.Write([]byte(c.GetName()))
	h.Write([]byte{0})
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c.GetArguments())
	h.Write(b)
	h.Write([]byte{0})
	h.Write([]byte(c.GetRawArguments()))
	return hex.EncodeToString(h.Sum(nil))
}

// callLease is the claim's lease: the call is bounded by
// runtime.tool_call_timeout, so a claim older than that plus a margin has
// no executor left.
func (s *Server) callLease() runtimestore.Lease {
	return runtimestore.Lease{Owner: s.replica, Until: s.now().Add(s.cfg.ToolCallTimeout + 30*time.Second)}
}

// claimCall claims (threadID, call id). It returns the stored result of an
// earlier request with the same id and the same call, or (nil, claimed)
// when this request runs the call: claimed says whether its result is
// recorded for retries. An id already used for a different call (another
// tool or other arguments — clients that number calls per turn) runs as a
// call of its own without a claim: the first call's result stays the one a
// retry of it gets.
func (s *Server) claimCall(ctx context.Context, threadID string, call *runtimev1.ToolCall) (*runtimev1.ToolResult, bool, error) {
	fp := fingerprint(call)
	claimed, ex, err := s.store.ClaimToolCall(ctx, threadID, call.GetId(), fp, s.callLease())
	if errors.Is(err, runtimestore.ErrNotFound) {
		return nil, false, threadNotFound(threadID)
	}
	if err != nil {
		return nil, false, storeErr(err)
	}
	if claimed {
		return nil, true, nil
	}
	if ex.Fingerprint != fp {
		return nil, false, nil
	}
	for {
		switch {
		case ex.State == runtimestore.CallDone:
			r := &runtimev1.ToolResult{}
			if err := proto.Unmarshal(ex.Result, r); err != nil {
				return nil, false, storeErr(err)
			}
			return r, false, nil
		case ex.Lease.Until.Before(s.now()):
			b, _ := proto.Marshal(unknownOutcome(call))
			if ex, err = s.store.SettleToolCall(ctx, threadID, call.GetId(), b, s.now()); err != nil {
				return nil, false, storeErr(err)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil, false, grpcx.Status(codes.Aborted, errorDomain, runtimev1.ErrorReason_ERROR_REASON_UNSPECIFIED.String(), nil,
				"tool_call.id: the call is still executing (an earlier request with this id started it); retry to get its result").Err()
		case <-time.After(callPoll):
		}
		if ex, err = s.store.GetToolCall(ctx, threadID, call.GetId()); err != nil {
			if errors.Is(err, runtimestore.ErrNotFound) {
				// The first request failed before a result and released
				// the claim: take it.
				return s.claimCall(ctx, threadID, call)
			}
			return nil, false, storeErr(err)
		}
	}
}

// unknownOutcome is the result stored for a call whose executor stopped
// before recording one.
func unknownOutcome(call *runtimev1.ToolCall) *runtimev1.ToolResult {
	return &runtimev1.ToolResult{ToolCallId: call.GetId(), Name: call.GetName(), Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR,
		ErrorKind: runtimev1.ErrorKind_ERROR_KIND_RUNTIME, ReasonCode: "call.outcome_unknown",
		Content: []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT,
			Text: "The runtime replica executing this call stopped before recording its result; whether the tool ran is unknown. Check its effect before calling it again with a new tool_call_id."}}}
}

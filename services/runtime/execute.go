package runtime

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// messageMode says whether execute stores the result's tool message.
type messageMode int

const (
	// storeMessage commits the tool message with the state update
	// (ExecuteToolCall, ExecuteToolCallStream).
	storeMessage messageMode = iota
	// returnOnly commits the state update only; the caller stores the
	// message (the agent loop, so parallel results land in call order).
	returnOnly
)

// ExecuteToolCall runs one tool call through the tool-call chain
// (docs/architecture.md §3.2; services/runtime/runtimechain).
func (s *Server) ExecuteToolCall(ctx context.Context, req *runtimev1.ExecuteToolCallRequest) (*runtimev1.ExecuteToolCallResponse, error) {
	res, err := s.execute(ctx, req.GetThreadId(), req.GetRunId(), req.GetProfile(), req.GetToolCall(), nil, storeMessage)
	if err != nil {
		return nil, err
	}
	return &runtimev1.ExecuteToolCallResponse{Result: res}, nil
}

// ExecuteToolCallStream is ExecuteToolCall relaying MCP progress and log
// notifications before the result.
func (s *Server) ExecuteToolCallStream(req *runtimev1.ExecuteToolCallStreamRequest, stream grpc.ServerStreamingServer[runtimev1.ExecuteToolCallStreamResponse]) error {
	notify := func(n *typev1.Notification) {
		_ = stream.Send(&runtimev1.ExecuteToolCallStreamResponse{Event: &runtimev1.ExecuteToolCallStreamResponse_Notification{Notification: n}})
	}
	res, err := s.execute(stream.Context(), req.GetThreadId(), req.GetRunId(), req.GetProfile(), req.GetToolCall(), notify, storeMessage)
	if err != nil {
		return err
	}
	return stream.Send(&runtimev1.ExecuteToolCallStreamResponse{Event: &runtimev1.ExecuteToolCallStreamResponse_Result{Result: res}})
}

// execute runs a call of one of the caller's threads through the chain
// (s.chain, runtimechain.Standard), then commits its state update in one
// transaction, with the result's tool message when msg is storeMessage
// (the public RPCs) and without it when msg is returnOnly (the agent
// loop, which stores the results of a step itself, in call order). Tool
// failures are results; only a missing thread or a store failure is an RPC
// error. ExecuteToolCall, ExecuteToolCallStream (and so the MCP front
// door) and the agent loop all come through here.
func (s *Server) execute(ctx context.Context, threadID, runID string, profile runtimev1.ToolProfile, call *runtimev1.ToolCall, notify func(*typev1.Notification), msg messageMode) (*runtimev1.ToolResult, error) {
	th, err := s.actThread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	if err := s.checkRun(ctx, threadID, runID); err != nil {
		return nil, err
	}
	// The public RPCs are idempotent per (thread_id, tool_call_id)
	// (idempotent.go); the agent loop's call ids come from the model and
	// its run stores results itself.
	idem := msg == storeMessage && call.GetId() != ""
	if idem {
		r, claimed, err := s.claimCall(ctx, threadID, call)
		if err != nil || r != nil {
			return r, err
		}
		idem = claimed
	}
	c := runtimechain.NewCall(th, runID, call, notify)
	c.Profile = profile
	o := s.chain.Run(ctx, c)
	res := o.Result(c)
	wctx := context.WithoutCancel(ctx)
	if idem && res.ErrorKind == runtimev1.ErrorKind_ERROR_KIND_POLICY {
		// A refusal (deferred, denied, read-before-write, input budget)
		// ran no tool: a retry is decided afresh — after a tool_search
		// the same call runs (docs/decisions/0082-idempotent-tool-calls.md).
		_ = s.store.ReleaseToolCall(wctx, threadID, call.GetId(), s.replica)
		idem = false
	}
	if idem {
		b, err := proto.Marshal(res)
		if err != nil {
			return nil, storeErr(err)
		}
		wctx = runtimestore.WithCallResult(wctx, runtimestore.CallResult{CallID: call.GetId(), Result: b})
	}
	s.metrics.toolCalls.WithLabelValues(c.Source(), strings.TrimPrefix(res.Status.String(), "TOOL_CALL_STATUS_"), strings.TrimPrefix(res.ErrorKind.String(), "ERROR_KIND_")).Inc()
	tm := &runtimev1.Message{Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, Content: runtimechain.TextOf(res.Content), ToolCallId: c.CallID,
		Name: c.Name, Status: res.Status, RunId: c.RunID, ProviderOutput: res.ProviderOutput}
	_, err = s.store.UpdateThread(wctx, c.ThreadID(), func(t *runtimestore.Thread) ([]*runtimev1.Message, error) {
		o.Apply(t)
		if msg != storeMessage {
			return nil, nil
		}
		return []*runtimev1.Message{tm}, nil
	})
	if err != nil && idem {
		// No result recorded: a retry runs the call again.
		_ = s.store.ReleaseToolCall(context.WithoutCancel(ctx), threadID, call.GetId(), s.replica)
	}
	if errors.Is(err, runtimestore.ErrNotFound) {
		return nil, threadNotFound(c.ThreadID())
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return res, nil
}

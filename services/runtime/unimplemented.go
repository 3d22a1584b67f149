package runtime

// Code in this file was written by hand from a skeleton: every RPC not yet
// implemented answers UNIMPLEMENTED with a message naming the missing
// capability. Replace a stub by implementing the method on *Server in its own file.

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

func unimplemented(capability string) error {
	return status.Errorf(codes.Unimplemented, "%s is not implemented yet", capability)
}

// CreateThread is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) CreateThread(_ context.Context, _ *runtimev1.CreateThreadRequest) (*runtimev1.CreateThreadResponse, error) {
	return nil, unimplemented("RuntimeService.CreateThread: threads, tool assembly and the tool-call chain (issue #7)")
}

// ListThreads is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) ListThreads(_ context.Context, _ *runtimev1.ListThreadsRequest) (*runtimev1.ListThreadsResponse, error) {
	return nil, unimplemented("RuntimeService.ListThreads: threads, tool assembly and the tool-call chain (issue #7)")
}

// GetThread is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) GetThread(_ context.Context, _ *runtimev1.GetThreadRequest) (*runtimev1.GetThreadResponse, error) {
	return nil, unimplemented("RuntimeService.GetThread: threads, tool assembly and the tool-call chain (issue #7)")
}

// DeleteThread is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) DeleteThread(_ context.Context, _ *runtimev1.DeleteThreadRequest) (*runtimev1.DeleteThreadResponse, error) {
	return nil, unimplemented("RuntimeService.DeleteThread: threads, tool assembly and the tool-call chain (issue #7)")
}

// ListMessages is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) ListMessages(_ context.Context, _ *runtimev1.ListMessagesRequest) (*runtimev1.ListMessagesResponse, error) {
	return nil, unimplemented("RuntimeService.ListMessages: threads, tool assembly and the tool-call chain (issue #7)")
}

// AssembleTools is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) AssembleTools(_ context.Context, _ *runtimev1.AssembleToolsRequest) (*runtimev1.AssembleToolsResponse, error) {
	return nil, unimplemented("RuntimeService.AssembleTools: threads, tool assembly and the tool-call chain (issue #7)")
}

// ExecuteToolCall is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) ExecuteToolCall(_ context.Context, _ *runtimev1.ExecuteToolCallRequest) (*runtimev1.ExecuteToolCallResponse, error) {
	return nil, unimplemented("RuntimeService.ExecuteToolCall: threads, tool assembly and the tool-call chain (issue #7)")
}

// ExecuteToolCallStream is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) ExecuteToolCallStream(_ *runtimev1.ExecuteToolCallStreamRequest, _ grpc.ServerStreamingServer[runtimev1.ExecuteToolCallStreamResponse]) error {
	return unimplemented("RuntimeService.ExecuteToolCallStream: threads, tool assembly and the tool-call chain (issue #7)")
}

// RunTurn is not implemented yet: the agent loop (issue #8).
func (s *Server) RunTurn(_ *runtimev1.RunTurnRequest, _ grpc.ServerStreamingServer[runtimev1.RunTurnResponse]) error {
	return unimplemented("RuntimeService.RunTurn: the agent loop (issue #8)")
}

// ListRuns is not implemented yet: runs of the agent loop (issue #8).
func (s *Server) ListRuns(_ context.Context, _ *runtimev1.ListRunsRequest) (*runtimev1.ListRunsResponse, error) {
	return nil, unimplemented("RuntimeService.ListRuns: runs of the agent loop (issue #8)")
}

// CancelRun is not implemented yet: run cancellation (issue #8).
func (s *Server) CancelRun(_ context.Context, _ *runtimev1.CancelRunRequest) (*runtimev1.CancelRunResponse, error) {
	return nil, unimplemented("RuntimeService.CancelRun: run cancellation (issue #8)")
}

// ResumeRun is not implemented yet: clarification resume (issue #8).
func (s *Server) ResumeRun(_ *runtimev1.ResumeRunRequest, _ grpc.ServerStreamingServer[runtimev1.ResumeRunResponse]) error {
	return unimplemented("RuntimeService.ResumeRun: clarification resume (issue #8)")
}

// ListAgents is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) ListAgents(_ context.Context, _ *runtimev1.ListAgentsRequest) (*runtimev1.ListAgentsResponse, error) {
	return nil, unimplemented("RuntimeService.ListAgents: threads, tool assembly and the tool-call chain (issue #7)")
}

// GetAgent is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) GetAgent(_ context.Context, _ *runtimev1.GetAgentRequest) (*runtimev1.GetAgentResponse, error) {
	return nil, unimplemented("RuntimeService.GetAgent: threads, tool assembly and the tool-call chain (issue #7)")
}

// UpsertAgent is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) UpsertAgent(_ context.Context, _ *runtimev1.UpsertAgentRequest) (*runtimev1.UpsertAgentResponse, error) {
	return nil, unimplemented("RuntimeService.UpsertAgent: threads, tool assembly and the tool-call chain (issue #7)")
}

// DeleteAgent is not implemented yet: threads, tool assembly and the tool-call chain (issue #7).
func (s *Server) DeleteAgent(_ context.Context, _ *runtimev1.DeleteAgentRequest) (*runtimev1.DeleteAgentResponse, error) {
	return nil, unimplemented("RuntimeService.DeleteAgent: threads, tool assembly and the tool-call chain (issue #7)")
}

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

package runtime

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Validate checks a request before its handler runs (called by the shared
// validation interceptor). It returns INVALID_ARGUMENT naming the field, or nil.
func (s *Server) Validate(_ string, req any) error {
	if r, ok := req.(interface{ GetThreadId() string }); ok && r.GetThreadId() == "" {
		return status.Error(codes.InvalidArgument, "thread_id: must not be empty")
	}
	return nil
}

package runtime

// Code in this file was written by hand from a skeleton: every RPC not yet
// implemented answers UNIMPLEMENTED with a message naming the missing
// capability. Replace a stub by implementing the method on *Server in its own file.

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func unimplemented(capability string) error {
	return status.Errorf(codes.Unimplemented, "%s is not implemented yet", capability)
}

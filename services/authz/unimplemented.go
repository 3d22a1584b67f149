package authz

// Code in this file was written by hand from a skeleton: every RPC not yet
// implemented answers UNIMPLEMENTED with a message naming the missing
// capability. Replace a stub by implementing the method on *Server in its own file.

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
)

func unimplemented(capability string) error {
	return status.Errorf(codes.Unimplemented, "%s is not implemented yet", capability)
}

// FilterResources is not implemented yet: Principal-based authorization with Casbin (issue #5).
func (s *Server) FilterResources(_ context.Context, _ *authzv1.FilterResourcesRequest) (*authzv1.FilterResourcesResponse, error) {
	return nil, unimplemented("AuthzService.FilterResources: Principal-based authorization with Casbin (issue #5)")
}

// Authorize is not implemented yet: Principal-based authorization with Casbin (issue #5).
func (s *Server) Authorize(_ context.Context, _ *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, error) {
	return nil, unimplemented("AuthzService.Authorize: Principal-based authorization with Casbin (issue #5)")
}

// WatchPolicy is not implemented yet: Principal-based authorization with Casbin (issue #5).
func (s *Server) WatchPolicy(_ *authzv1.WatchPolicyRequest, _ grpc.ServerStreamingServer[authzv1.WatchPolicyResponse]) error {
	return unimplemented("AuthzService.WatchPolicy: Principal-based authorization with Casbin (issue #5)")
}

// ListPolicies is not implemented yet: Principal-based authorization with Casbin (issue #5).
func (s *Server) ListPolicies(_ context.Context, _ *authzv1.ListPoliciesRequest) (*authzv1.ListPoliciesResponse, error) {
	return nil, unimplemented("AuthzService.ListPolicies: Principal-based authorization with Casbin (issue #5)")
}

// AddPolicies is not implemented yet: Principal-based authorization with Casbin (issue #5).
func (s *Server) AddPolicies(_ context.Context, _ *authzv1.AddPoliciesRequest) (*authzv1.AddPoliciesResponse, error) {
	return nil, unimplemented("AuthzService.AddPolicies: Principal-based authorization with Casbin (issue #5)")
}

// RemovePolicies is not implemented yet: Principal-based authorization with Casbin (issue #5).
func (s *Server) RemovePolicies(_ context.Context, _ *authzv1.RemovePoliciesRequest) (*authzv1.RemovePoliciesResponse, error) {
	return nil, unimplemented("AuthzService.RemovePolicies: Principal-based authorization with Casbin (issue #5)")
}

// ListDecisions is not implemented yet: Principal-based authorization with Casbin (issue #5).
func (s *Server) ListDecisions(_ context.Context, _ *authzv1.ListDecisionsRequest) (*authzv1.ListDecisionsResponse, error) {
	return nil, unimplemented("AuthzService.ListDecisions: Principal-based authorization with Casbin (issue #5)")
}

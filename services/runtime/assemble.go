package runtime

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
)

// AssembleTools runs the assembly pipeline (docs/architecture.md §3.1;
// runtimeassembly.Builder.Assemble) for the next model call of one of the
// caller's threads.
func (s *Server) AssembleTools(ctx context.Context, req *runtimev1.AssembleToolsRequest) (*runtimev1.AssembleToolsResponse, error) {
	th, err := s.actThread(ctx, req.GetThreadId())
	if err != nil {
		return nil, err
	}
	resp, err := s.assembly.Assemble(ctx, th, req.GetUserMessage(), req.GetProfile())
	if err != nil {
		return nil, useCaseErr(err)
	}
	// The names of tools a principal may never see are not its to read:
	// report.denied is filled for admins only (docs/architecture.md §5).
	if !slices.Contains(principalOf(ctx).GetRoles(), auth.AdminRole) && resp.GetReport() != nil {
		resp.Report.Denied = nil
	}
	// A caller holding the current deferred list is not sent it again
	// (docs/decisions/0145-assemble-without-the-deferred-list.md).
	if v := req.GetDeferredView(); v != "" && v == resp.GetDeferredView() {
		resp.Deferred, resp.DeferredOmitted = nil, true
	}
	// Likewise the tools bound with defer_loading, by the content id of
	// their definitions (docs/decisions/0149-assembly-shared-per-catalog-generation.md).
	if v := req.GetDeferredToolsView(); v != "" && v == resp.GetDeferredToolsView() {
		resp.Tools = slices.DeleteFunc(resp.Tools, runtimeassembly.DeferLoading)
		resp.DeferredToolsOmitted = true
	}
	return resp, nil
}

// useCaseErr maps an error of a runtime use case (runtimeassembly) to the
// RPC error: a fail-closed assembly is FAILED_PRECONDITION with reason
// ASSEMBLY_FAILED; status errors pass; anything else is a store failure.
func useCaseErr(err error) error {
	var fe *runtimeassembly.FailedError
	if errors.As(err, &fe) {
		return statusErr(codes.FailedPrecondition, runtimev1.ErrorReason_ERROR_REASON_ASSEMBLY_FAILED, "%s", fe.Msg)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return storeErr(err)
}

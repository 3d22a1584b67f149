package runtimeassembly

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// batchAuthz answers FilterResources like authz does (at most 10,000
// candidates, services/authz/validate.go), denying names ending in "_x";
// versions, when set, gives the policy version of each successive call.
type batchAuthz struct {
	authzv1.AuthzServiceClient
	calls    int
	attrs    int // resource attributes received
	versions []int64
	err      error
}

func (a *batchAuthz) FilterResources(_ context.Context, r *authzv1.FilterResourcesRequest, _ ...grpc.CallOption) (*authzv1.FilterResourcesResponse, error) {
	a.calls++
	if a.err != nil {
		return nil, a.err
	}
	if len(r.GetCandidates()) > 10_000 {
		return nil, status.Errorf(codes.InvalidArgument, "candidates: at most 10000 candidates, got %d", len(r.GetCandidates()))
	}
	in := map[string]bool{}
	for _, c := range r.GetCandidates() {
		in[c] = true
	}
	for n := range r.GetResourceAttributes() {
		if !in[n] {
			return nil, status.Errorf(codes.InvalidArgument, "resource_attributes[%s]: not a candidate of this call", n)
		}
	}
	a.attrs += len(r.GetResourceAttributes())
	v := int64(7)
	if len(a.versions) > 0 {
		v, a.versions = a.versions[0], a.versions[1:]
	}
	resp := &authzv1.FilterResourcesResponse{PolicyVersion: v}
	for _, c := range r.GetCandidates() {
		if strings.HasSuffix(c, "_x") {
			resp.Denied = append(resp.Denied, &authzv1.DeniedResource{Name: c})
			continue
		}
		resp.Allowed = append(resp.Allowed, c)
	}
	return resp, nil
}

func candidates(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tool_%d", i)
		if i%1000 == 999 {
			out[i] += "_x"
		}
	}
	return out
}

func TestFilterBatchesBeyondTheCap(t *testing.T) {
	az := &batchAuthz{}
	b := NewBuilder(Settings{}, Deps{Authz: az})
	names := candidates(23_456)
	attrs := map[string]*authzv1.ResourceAttributes{}
	for _, n := range names[:12_000] {
		attrs[n] = &authzv1.ResourceAttributes{}
	}
	allowed, denied, version, failOpen, err := b.filter(context.Background(), &typev1.Principal{Subject: "alice"}, nil, authzv1.ResourceType_RESOURCE_TYPE_TOOL, names, attrs)
	if err != nil {
		t.Fatal(err)
	}
	if want := (23_456 + FilterBatch - 1) / FilterBatch; az.calls != want {
		t.Errorf("%d FilterResources calls, want %d", az.calls, want)
	}
	if len(allowed) != 23_456-23 || len(denied) != 23 || version != 7 || failOpen {
		t.Errorf("allowed %d, denied %d, version %d, failOpen %v; want %d, 23, 7, false", len(allowed), len(denied), version, failOpen, 23_456-23)
	}
	if az.attrs != 12_000 {
		t.Errorf("%d resource attributes sent, want each of the 12,000 once, with its batch", az.attrs)
	}
	if allowed["tool_999_x"] || !allowed["tool_23455"] {
		t.Errorf("wrong decisions: tool_999_x %v, tool_23455 %v", allowed["tool_999_x"], allowed["tool_23455"])
	}
}

func TestFilterRefiltersWhenThePolicyMovesBetweenBatches(t *testing.T) {
	// The first pass sees versions 7 then 8: the whole list is filtered
	// again, and the second pass (8, 8) is consistent.
	az := &batchAuthz{versions: []int64{7, 8, 8, 8}}
	b := NewBuilder(Settings{}, Deps{Authz: az})
	_, _, version, _, err := b.filter(context.Background(), &typev1.Principal{Subject: "alice"}, nil, authzv1.ResourceType_RESOURCE_TYPE_TOOL, candidates(FilterBatch+1), nil)
	if err != nil || version != 8 || az.calls != 4 {
		t.Fatalf("version %d, calls %d, err %v; want 8, 4, nil", version, az.calls, err)
	}
	// A policy that keeps moving is ABORTED (the assembly is retried).
	az = &batchAuthz{versions: []int64{1, 2, 3, 4}}
	b = NewBuilder(Settings{}, Deps{Authz: az})
	_, _, _, _, err = b.filter(context.Background(), &typev1.Principal{Subject: "alice"}, nil, authzv1.ResourceType_RESOURCE_TYPE_TOOL, candidates(FilterBatch+1), nil)
	if status.Code(err) != codes.Aborted {
		t.Fatalf("err %v, want ABORTED", err)
	}
}

func TestAuthzFailedNamesTheCause(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{status.Error(codes.Unavailable, "connection refused"), "authz unreachable while filtering tools (fail closed): "},
		{status.Error(codes.DeadlineExceeded, "slow"), "authz unreachable while filtering tools"},
		{status.Error(codes.InvalidArgument, "candidates: too many"), "authz refused filtering tools (InvalidArgument, fail closed): "},
		{status.Error(codes.PermissionDenied, "no"), "authz refused filtering tools (PermissionDenied"},
	} {
		err := authzFailed("tools", c.err)
		var fe *FailedError
		if !errors.As(err, &fe) || !strings.Contains(fe.Msg, c.want) {
			t.Errorf("%v: got %v, want a FailedError containing %q", c.err, err, c.want)
		}
	}
	if err := authzFailed("tools", status.Error(codes.Aborted, "moved")); status.Code(err) != codes.Aborted {
		t.Errorf("ABORTED became %v", err)
	}
	// Fail closed: an unreachable authz never yields candidates.
	b := NewBuilder(Settings{}, Deps{Authz: &batchAuthz{err: status.Error(codes.Unavailable, "down")}})
	if allowed, _, _, _, err := b.filter(context.Background(), &typev1.Principal{Subject: "alice"}, nil, authzv1.ResourceType_RESOURCE_TYPE_TOOL, candidates(3), nil); err == nil || allowed != nil {
		t.Fatalf("allowed %v, err %v; want nil and an error", allowed, err)
	}
}

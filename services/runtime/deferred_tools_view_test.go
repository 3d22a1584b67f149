package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
)

// TestDeferredToolsViewEndToEnd
// (docs/decisions/0149-assembly-shared-per-catalog-generation.md), one
// process with the real catalog: under native deferral (anthropic_messages)
// AssembleTools names the tools it binds with defer_loading by the content
// id of their definitions, recomputable from the response; a caller
// echoing the current id gets every other tool but not those; any other id,
// and an id made stale by a policy change, gets them all.
func TestDeferredToolsViewEndToEnd(t *testing.T) {
	s := newSuite(t, nil)
	alice := s.rt(aliceToken)
	ctx := context.Background()
	th := newThread(t, alice, nil)
	profile := runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES
	get := func(view string) (*runtimev1.AssembleToolsResponse, error) {
		return alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, Profile: profile, DeferredToolsView: view})
	}
	r1 := eventually(t, func() (*runtimev1.AssembleToolsResponse, bool) {
		r, err := get("")
		return r, err == nil && slices.Contains(r.GetDeferred(), "everything_get-sum") && slices.Contains(r.GetDeferred(), "memory_read_graph")
	})
	deferred := slices.DeleteFunc(slices.Clone(r1.GetTools()), func(ts *runtimev1.ToolSchema) bool { return !runtimeassembly.DeferLoading(ts) })
	if len(deferred) < 2 || len(deferred) == len(r1.GetTools()) {
		t.Fatalf("%d of %d tools with defer_loading: want the deferred ones only", len(deferred), len(r1.GetTools()))
	}
	h := sha256.New()
	for _, ts := range deferred {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ts)
		if err != nil {
			t.Fatal(err)
		}
		f := sha256.Sum256(b)
		h.Write([]byte(ts.GetName() + "\x00" + hex.EncodeToString(f[:]) + "\x00"))
	}
	if r1.GetDeferredToolsView() != hex.EncodeToString(h.Sum(nil)) || r1.GetDeferredToolsOmitted() {
		t.Fatalf("deferred_tools_view %q omitted %v, want the content id of the %d defer_loading tools", r1.GetDeferredToolsView(), r1.GetDeferredToolsOmitted(), len(deferred))
	}
	held, err := get(r1.GetDeferredToolsView())
	if err != nil || !held.GetDeferredToolsOmitted() || held.GetDeferredToolsView() != r1.GetDeferredToolsView() || len(held.GetTools()) != len(r1.GetTools())-len(deferred) {
		t.Fatalf("holding the view: %d tools (of %d), omitted %v, err %v", len(held.GetTools()), len(r1.GetTools()), held.GetDeferredToolsOmitted(), err)
	}
	for _, ts := range held.GetTools() {
		if runtimeassembly.DeferLoading(ts) {
			t.Fatalf("%s with defer_loading sent to a caller holding the view", ts.GetName())
		}
	}
	if !slices.Equal(held.GetDeferred(), r1.GetDeferred()) {
		t.Fatal("deferred_tools_view must not leave the deferred names out")
	}
	if other, err := get(strings.Repeat("0", 64)); err != nil || other.GetDeferredToolsOmitted() || len(other.GetTools()) != len(r1.GetTools()) {
		t.Fatalf("another view must get every tool: %v", err)
	}
	if _, err := get(strings.Repeat("a", 129)); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "deferred_tools_view") {
		t.Fatalf("long deferred_tools_view: %v", err)
	}
	// The v0.1.0 profile binds nothing with defer_loading: no id.
	if v1, err := alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th}); err != nil || v1.GetDeferredToolsView() != "" {
		t.Fatalf("v0.1.0 profile: view %q, err %v", v1.GetDeferredToolsView(), err)
	}
	// A policy change hides one: a new id, and the old one gets them all.
	s.az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_TOOL, "everything_get-sum")
	r2 := eventually(t, func() (*runtimev1.AssembleToolsResponse, bool) {
		r, err := get("")
		return r, err == nil && !slices.Contains(r.GetDeferred(), "everything_get-sum")
	})
	if r2.GetDeferredToolsView() == r1.GetDeferredToolsView() || r2.GetDeferredToolsView() == "" {
		t.Fatal("a narrower set of defer_loading tools kept its content id")
	}
	stale, err := get(r1.GetDeferredToolsView())
	if err != nil || stale.GetDeferredToolsOmitted() || len(stale.GetTools()) != len(r2.GetTools()) {
		t.Fatalf("a stale view must get every tool: %v", err)
	}
}

package runtimetools

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
)

// The placement key follows the catalog's scope key: one key per user for
// per_user (whatever the thread), per thread for per_thread, per tenant for
// per_tenant, the server alone for stateful, none for shared.
func TestPlacementKeyFollowsScope(t *testing.T) {
	alice := auth.WithIdentity(context.Background(), auth.Identity{Principal: &typev1.Principal{Subject: "alice", Tenant: "acme"}})
	bob := auth.WithIdentity(context.Background(), auth.Identity{Principal: &typev1.Principal{Subject: "bob", Tenant: "acme"}})
	tool := func(scope catalogv1.SessionScope, stateful bool) *runtimeassembly.Tool {
		return &runtimeassembly.Tool{Name: "fs_read", Server: "fs", Source: runtimeassembly.SourceMCP, Scope: scope, Stateful: stateful}
	}
	cases := []struct {
		name        string
		tool        *runtimeassembly.Tool
		sameThreads bool // two threads of alice share the key
		sameUsers   bool // alice and bob share the key
		empty       bool
	}{
		{"shared", tool(catalogv1.SessionScope_SESSION_SCOPE_SHARED, false), true, true, true},
		{"unspecified", tool(catalogv1.SessionScope_SESSION_SCOPE_UNSPECIFIED, false), true, true, true},
		{"per_user", tool(catalogv1.SessionScope_SESSION_SCOPE_PER_USER, false), true, false, false},
		{"per_thread", tool(catalogv1.SessionScope_SESSION_SCOPE_PER_THREAD, false), false, false, false},
		{"per_tenant", tool(catalogv1.SessionScope_SESSION_SCOPE_PER_TENANT, false), true, true, false},
		{"stateful", tool(catalogv1.SessionScope_SESSION_SCOPE_PER_USER, true), true, true, false},
	}
	for _, c := range cases {
		a1, a2, b1 := placementKey(alice, c.tool, "t1"), placementKey(alice, c.tool, "t2"), placementKey(bob, c.tool, "t1")
		if (a1 == "") != c.empty {
			t.Errorf("%s: key %q, want empty=%v", c.name, a1, c.empty)
		}
		if (a1 == a2) != c.sameThreads || (a1 == b1) != c.sameUsers {
			t.Errorf("%s: keys alice/t1 %q, alice/t2 %q, bob/t1 %q", c.name, a1, a2, b1)
		}
	}
	if placementKey(alice, nil, "t") != "" || placementKey(alice, &runtimeassembly.Tool{Name: "x"}, "t") != "" {
		t.Error("a tool without a server got a placement key")
	}
}

// A key that moves to another replica with a new session is reported with
// the previous replica and the note; a key that stays is not; a move back
// to the owner says so.
func TestPlacementReport(t *testing.T) {
	var p placements
	created := metadata.Pairs("toolplane-session", "created")
	r := p.report("k", "a:1", "a:1", created, true)
	if r.GetReplica() != "a:1" || !r.GetSessionCreated() || r.GetPreviousReplica() != "" || r.GetNote() != "" {
		t.Fatalf("first call: %v", r)
	}
	if r := p.report("k", "a:1", "a:1", nil, true); r.GetSessionCreated() || r.GetPreviousReplica() != "" || r.GetNote() != "" {
		t.Fatalf("second call on the same replica: %v", r)
	}
	r = p.report("k", "b:1", "a:1", created, true)
	if r.GetReplica() != "b:1" || r.GetOwner() != "a:1" || r.GetPreviousReplica() != "a:1" ||
		r.GetNote() != "session re-created on replica b:1; the previous replica a:1 was unavailable" {
		t.Fatalf("moved call: %v", r)
	}
	r = p.report("k", "a:1", "a:1", created, true)
	if r.GetPreviousReplica() != "b:1" || !strings.Contains(r.GetNote(), "available again") {
		t.Fatalf("call back on the owner: %v", r)
	}
	if r := p.report("", "a:1", "a:1", created, true); r != nil {
		t.Fatalf("a call without a key got a placement: %v", r)
	}
}

// A user credential sees replica labels, never addresses; labels are
// stable and differ per address.
func TestPlacementReportHidesAddressesFromUsers(t *testing.T) {
	var p placements
	created := metadata.Pairs("toolplane-session", "created")
	p.report("k", "10.0.0.1:7420", "10.0.0.1:7420", created, false)
	r := p.report("k", "10.0.0.2:7420", "10.0.0.1:7420", created, false)
	a, b := ReplicaLabel("10.0.0.1:7420"), ReplicaLabel("10.0.0.2:7420")
	if a == b || !strings.HasPrefix(a, "catalog-") || len(a) != len("catalog-")+8 || ReplicaLabel("10.0.0.1:7420") != a {
		t.Fatalf("labels %q %q", a, b)
	}
	if r.GetReplica() != b || r.GetOwner() != a || r.GetPreviousReplica() != a || strings.Contains(r.GetNote(), "10.0.0") ||
		r.GetNote() != "session re-created on replica "+b+"; the previous replica "+a+" was unavailable" {
		t.Fatalf("user's placement: %v", r)
	}
	user := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindUser, Principal: &typev1.Principal{Subject: "u", Roles: []string{"user"}}})
	svc := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindService, Principal: &typev1.Principal{Subject: "svc", Roles: []string{"service"}}})
	if revealsAddresses(user) || !revealsAddresses(svc) || revealsAddresses(context.Background()) {
		t.Fatal("revealsAddresses: a user sees addresses, a service does not, or an anonymous context does")
	}
}

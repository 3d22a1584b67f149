package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

// update_agent's ownership check at call time: a shared agent, another
// user's agent, the same subject in another tenant and a missing agent are
// all ErrNotOwner; nothing is written.
func TestOwnedAgentsRefuseNonOwners(t *testing.T) {
	ctx := context.Background()
	st := runtimestore.NewMemory()
	o := &ownedAgents{store: st, now: time.Now, reserved: func(n string) bool { return n == "default" }}
	alice := &typev1.Principal{Subject: "alice", Tenant: "acme"}
	if err := st.PutAgent(ctx, &runtimev1.Agent{Name: "shared", SystemPrompt: "orig"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.CreateOwned(ctx, alice, &runtimev1.Agent{Name: "mine", SystemPrompt: "orig"}); err != nil {
		t.Fatal(err)
	}
	soul := "pwned"
	for _, c := range []struct {
		p    *typev1.Principal
		name string
	}{
		{alice, "shared"},
		{&typev1.Principal{Subject: "bob", Tenant: "acme"}, "mine"},
		{&typev1.Principal{Subject: "alice", Tenant: "other"}, "mine"},
		{&typev1.Principal{Subject: "alice"}, "mine"}, // tenant "" = default
		{alice, "missing"},
	} {
		if _, err := o.UpdateOwned(ctx, c.p, c.name, runtimetools.AgentChange{Soul: &soul}); !errors.Is(err, runtimetools.ErrNotOwner) {
			t.Fatalf("%v on %s: %v", c.p, c.name, err)
		}
	}
	for _, n := range []string{"shared", "mine"} {
		a, _ := st.GetAgent(ctx, n)
		if a.GetSystemPrompt() != "orig" {
			t.Fatalf("%s changed: %v", n, a)
		}
	}
	// The owner may; a reserved or taken name, an invalid agent and more
	// than maxOwnedAgents are refused.
	if _, err := o.UpdateOwned(ctx, alice, "mine", runtimetools.AgentChange{Soul: &soul}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"default", "mine", "shared"} {
		if _, err := o.CreateOwned(ctx, alice, &runtimev1.Agent{Name: n}); !errors.Is(err, runtimetools.ErrAgentExists) {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	var inv *runtimetools.AgentInvalidError
	if _, err := o.CreateOwned(ctx, alice, &runtimev1.Agent{Name: "x", Skills: &typev1.StringList{Values: []string{""}}}); !errors.As(err, &inv) || inv.Field != "skills[0]" {
		t.Fatalf("invalid: %v", err)
	}
	for i := 1; i < maxOwnedAgents; i++ {
		if _, err := o.CreateOwned(ctx, alice, &runtimev1.Agent{Name: fmt.Sprintf("a%d", i)}); err != nil {
			t.Fatal(i, err)
		}
	}
	if _, err := o.CreateOwned(ctx, alice, &runtimev1.Agent{Name: "one-too-many"}); !errors.As(err, &inv) {
		t.Fatalf("cap: %v", err)
	}
}

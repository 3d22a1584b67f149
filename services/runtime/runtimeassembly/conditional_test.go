package runtimeassembly

import (
	"fmt"
	"testing"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// The conditions of the conditional built-ins (docs/deerflow.md §1.6):
// list_uploaded_files for lead threads only, skill_manage with evolution,
// update_agent only for an agent the principal owns (never shared, never in
// a subagent), setup_agent only in the bootstrap agent's lead threads.
func TestConditionalBuiltins(t *testing.T) {
	b := &Builder{cfg: Settings{BootstrapAgent: "bootstrap"}}
	lead := &runtimestore.Thread{Proto: &runtimev1.Thread{}}
	sub := &runtimestore.Thread{Proto: &runtimev1.Thread{}, Child: &runtimestore.Child{}}
	alice := &typev1.Principal{Subject: "alice"}
	owned := &runtimev1.Agent{Name: "mine", Owner: &runtimev1.AgentOwner{Subject: "alice", Tenant: "default"}}
	names := func(ts []*Tool) string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		th        *runtimestore.Thread
		evolution bool
		agent     *runtimev1.Agent
		p         *typev1.Principal
		early     string
		late      string
	}{
		{lead, false, &runtimev1.Agent{Name: "default"}, alice, "[list_uploaded_files]", "[]"},
		{lead, true, &runtimev1.Agent{Name: "team"}, alice, "[list_uploaded_files skill_manage]", "[]"},
		{sub, true, owned, alice, "[skill_manage]", "[]"},
		{lead, false, owned, alice, "[list_uploaded_files]", "[update_agent]"},
		{lead, false, owned, &typev1.Principal{Subject: "bob"}, "[list_uploaded_files]", "[]"},
		{lead, false, owned, &typev1.Principal{Subject: "alice", Tenant: "other"}, "[list_uploaded_files]", "[]"},
		{lead, false, &runtimev1.Agent{Name: "bootstrap"}, alice, "[list_uploaded_files]", "[setup_agent]"},
		{sub, false, &runtimev1.Agent{Name: "bootstrap"}, alice, "[]", "[]"},
	} {
		if got := fmt.Sprint(b.conditionalBuiltins(c.th, c.evolution)); got != c.early {
			t.Errorf("%s (sub %v, evolution %v): %s, want %s", c.agent.GetName(), c.th.Child != nil, c.evolution, got, c.early)
		}
		if got := names(b.lateBuiltins(c.th, c.agent, c.p)); got != c.late {
			t.Errorf("%s for %v: %s, want %s", c.agent.GetName(), c.p, got, c.late)
		}
	}
	if (&Builder{}).lateBuiltins(lead, &runtimev1.Agent{Name: ""}, alice) != nil {
		t.Error("no bootstrap agent configured: setup_agent bound")
	}
}

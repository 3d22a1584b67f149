package authz

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

// exampleTool is one row of examples/tool-effects.csv.
type exampleTool struct {
	server, tool, effect, reason string
	hints                        map[string]any
}

func (e exampleTool) exposed() string { return e.server + "_" + e.tool }

// loadToolEffects reads examples/tool-effects.csv (hand-reviewed effect
// labels of every tool of the ten example servers).
func loadToolEffects(t *testing.T) []exampleTool {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "examples", "tool-effects.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment = '#'
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"server", "tool", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", "effect", "reason"}
	if strings.Join(rows[0], ",") != strings.Join(want, ",") {
		t.Fatalf("tool-effects.csv header %v, want %v", rows[0], want)
	}
	var out []exampleTool
	seen := map[string]bool{}
	for i, row := range rows[1:] {
		e := exampleTool{server: row[0], tool: row[1], effect: row[6], reason: row[7], hints: map[string]any{}}
		for j, h := range want[2:6] {
			switch row[2+j] {
			case "true":
				e.hints[h] = true
			case "false":
				e.hints[h] = false
			case "":
			default:
				t.Fatalf("row %d: %s = %q", i+2, h, row[2+j])
			}
		}
		if e.effect != "read-only" && e.effect != "state-changing" || e.reason == "" {
			t.Fatalf("row %d: effect %q reason %q: want read-only|state-changing and a reason", i+2, e.effect, e.reason)
		}
		if seen[e.exposed()] {
			t.Fatalf("row %d: %s twice", i+2, e.exposed())
		}
		seen[e.exposed()] = true
		out = append(out, e)
	}
	return out
}

// TestExampleViewerPolicy measures examples/policy.csv over every example
// tool: the runtime's service credential asks, as it does at assembly
// (FilterResources, list) and at call time (Authorize), with the tool's
// server and the annotations its server reports. The viewer may list or
// call no state-changing tool; every tool's label and decision are logged.
// The viewer is also checked with the annotations stripped (an unannotated
// server) and with every tool claiming readOnlyHint from a user credential.
func TestExampleViewerPolicy(t *testing.T) {
	tools := loadToolEffects(t)
	if len(tools) != 152 {
		t.Fatalf("tool-effects.csv has %d tools, examples/README.md lists 152", len(tools))
	}
	pf, err := filepath.Abs(filepath.Join("..", "..", "examples", "policy.csv"))
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, func(c *Config) { c.PolicyFile = pf })
	ctx := ctxT(t)
	eddie := &typev1.Principal{Subject: "eddie", Tenant: "default", Roles: []string{"editor"}}
	attrs := func(e exampleTool) *authzv1.ResourceAttributes {
		return &authzv1.ResourceAttributes{Server: e.server, Annotations: mustStruct(t, e.hints)}
	}
	names := make([]string, len(tools))
	ra := map[string]*authzv1.ResourceAttributes{}
	for i, e := range tools {
		names[i] = e.exposed()
		ra[e.exposed()] = attrs(e)
	}
	listed := map[string]bool{}
	fr, err := h.svc.FilterResources(ctx, &authzv1.FilterResourcesRequest{Principal: vera, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Candidates: names, ResourceAttributes: ra})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fr.GetAllowed() {
		listed[n] = true
	}
	var report strings.Builder
	fmt.Fprintf(&report, "\n| server | tool | effect | viewer list | viewer call | deciding reason |\n|---|---|---|---|---|---|\n")
	var nRO, nROallowed, nSC int
	for _, e := range tools {
		r := toolCall(vera, e.exposed())
		r.ResourceAttributes = attrs(e)
		r.Input = mustStruct(t, map[string]any{})
		d := h.authorize(h.svc, r)
		verdict := map[bool]string{true: "allow", false: "deny"}
		code := d.GetReasons()[0].GetCode()
		fmt.Fprintf(&report, "| %s | %s | %s | %s | %s | %s |\n", e.server, e.tool, e.effect, verdict[listed[e.exposed()]], verdict[d.GetAllow()], code)
		switch e.effect {
		case "state-changing":
			nSC++
			if d.GetAllow() || listed[e.exposed()] {
				t.Errorf("viewer may use state-changing %s (%s): list=%v call=%v %v", e.exposed(), e.reason, listed[e.exposed()], d.GetAllow(), d.GetReasons())
			}
		case "read-only":
			nRO++
			if d.GetAllow() {
				nROallowed++
			}
			if d.GetAllow() != listed[e.exposed()] {
				t.Errorf("%s: listed %v but call %v", e.exposed(), listed[e.exposed()], d.GetAllow())
			}
		}
		// Stripped annotations (a server that stops annotating): never more.
		r.ResourceAttributes = &authzv1.ResourceAttributes{Server: e.server}
		if d2 := h.authorize(h.svc, r); d2.GetAllow() && !d.GetAllow() {
			t.Errorf("%s: allowed without annotations but denied with them", e.exposed())
		}
		// The same claim from the viewer's own credential is ignored.
		if e.effect == "state-changing" {
			r.Principal, r.ResourceAttributes = nil, &authzv1.ResourceAttributes{Server: e.server, Annotations: mustStruct(t, map[string]any{"readOnlyHint": true})}
			if d3 := h.authorize(h.vera, r); d3.GetAllow() {
				t.Errorf("%s: a user credential's readOnlyHint claim was honoured", e.exposed())
			}
		}
		// The editor may use everything.
		r2 := toolCall(eddie, e.exposed())
		r2.ResourceAttributes = attrs(e)
		if d4 := h.authorize(h.svc, r2); !d4.GetAllow() {
			t.Errorf("editor denied %s: %v", e.exposed(), d4.GetReasons())
		}
	}
	t.Logf("viewer over %d example tools: %d state-changing, all denied; %d read-only, %d allowed%s", len(tools), nSC, nRO, nROallowed, report.String())
	if nROallowed == 0 {
		t.Fatal("the viewer may use no read-only tool: the policy is not exercised")
	}
	// The viewer's own credential asking FilterResources with forged
	// read-only claims for every tool gets the unannotated answer.
	forged := map[string]*authzv1.ResourceAttributes{}
	for _, e := range tools {
		forged[e.exposed()] = &authzv1.ResourceAttributes{Server: e.server, Annotations: mustStruct(t, map[string]any{"readOnlyHint": true})}
	}
	fr, err = h.vera.FilterResources(ctx, &authzv1.FilterResourcesRequest{ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Candidates: names, ResourceAttributes: forged})
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.GetAllowed()) != 0 {
		t.Fatalf("forged annotations from the viewer's credential listed %v", fr.GetAllowed())
	}
	if c := fr.GetDenied()[0].GetReasons()[0].GetCode(); c != authzcasbin.CodeConditionFailed && c != authzcasbin.CodeNoPolicy {
		t.Fatalf("forged listing reason %s", c)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

// TestPolicyLinesEveryResourceType: `toolplane policies add` sends resource
// and prompt lines (and every type the policy language has, so a "*" line
// never carries RESOURCE_TYPE_UNSPECIFIED), a line prints back as given, and
// the help and the --resource error of `decisions list` name every type.
func TestPolicyLinesEveryResourceType(t *testing.T) {
	for _, c := range []struct {
		line string
		want authzv1.ResourceType
	}{
		{"p, viewer, acme, resource, toolplane+mcp://everything/*, use, deny", authzv1.ResourceType_RESOURCE_TYPE_RESOURCE},
		{"p, viewer, acme, prompt, everything_*, use, allow", authzv1.ResourceType_RESOURCE_TYPE_PROMPT},
		{"p, ops, acme, tool, k8s_*, call, allow", authzv1.ResourceType_RESOURCE_TYPE_TOOL},
	} {
		ps, _, err := parseCLILines([]string{c.line})
		if err != nil || len(ps) != 1 {
			t.Fatalf("%s: %v %v", c.line, ps, err)
		}
		if ps[0].GetResourceType() != c.want {
			t.Errorf("%s: resource type %v, want %v", c.line, ps[0].GetResourceType(), c.want)
		}
		if got := policyLine(ps[0]); got != c.line {
			t.Errorf("round trip: %q, want %q", got, c.line)
		}
	}
	ps, _, err := parseCLILines([]string{"p, ops, acme, *, x, *, allow"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[authzv1.ResourceType]bool{}
	for _, p := range ps {
		if p.GetResourceType() == authzv1.ResourceType_RESOURCE_TYPE_UNSPECIFIED || p.GetAction() == authzv1.Action_ACTION_UNSPECIFIED {
			t.Errorf("'*' expanded into an unsendable line: %v", p)
		}
		seen[p.GetResourceType()] = true
	}
	if len(seen) != len(authzcasbin.ResourceTypes) {
		t.Errorf("'*' expanded into %d resource types, want %d", len(seen), len(authzcasbin.ResourceTypes))
	}

	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}
	help, _ := run("policies", "--help")
	_, derr := run("decisions", "list", "--resource", "bogus")
	dhelp, _ := run("decisions", "list", "--help")
	for _, rt := range authzcasbin.ResourceTypes {
		if !strings.Contains(help, rt) {
			t.Errorf("policies --help does not name %q:\n%s", rt, help)
		}
		if derr == nil || !strings.Contains(derr.Error(), rt) {
			t.Errorf("decisions --resource error does not name %q: %v", rt, derr)
		}
		if !strings.Contains(dhelp, rt) {
			t.Errorf("decisions list --help does not name %q", rt)
		}
	}
}

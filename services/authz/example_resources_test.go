package authz

import (
	"path/filepath"
	"testing"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// The example policy on MCP resources and prompts re-exported by the front
// door (docs/decisions/0161-front-door-resources-and-prompts.md): the editor
// reads every resource, the viewer only server-everything's static
// documents; both get prompts.
func TestExamplePolicyResourcesAndPrompts(t *testing.T) {
	pf, err := filepath.Abs(filepath.Join("..", "..", "examples", "policy.csv"))
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, func(c *Config) { c.PolicyFile = pf })
	ctx := ctxT(t)
	eddie := &typev1.Principal{Subject: "eddie", Tenant: "default", Roles: []string{"editor"}}
	viewer := &typev1.Principal{Subject: "vera", Tenant: "default", Roles: []string{"viewer"}}
	static := "toolplane+mcp://everything/demo://resource/static/document/architecture.md"
	dynamic := "toolplane+mcp://everything/demo://resource/dynamic/text/{resourceId}"
	file := "toolplane+mcp://filesystem/file:///srv/demo/notes.txt"
	cands := []string{static, dynamic, file}
	for _, c := range []struct {
		who  *typev1.Principal
		want []string
	}{{eddie, cands}, {viewer, []string{static}}} {
		fr, err := h.svc.FilterResources(ctx, &authzv1.FilterResourcesRequest{Principal: c.who,
			ResourceType: authzv1.ResourceType_RESOURCE_TYPE_RESOURCE, Candidates: cands})
		if err != nil {
			t.Fatal(err)
		}
		if got := fr.GetAllowed(); len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Errorf("%s lists %v, want %v", c.who.GetSubject(), got, c.want)
		}
		for _, u := range cands {
			d := h.authorize(h.svc, &authzv1.AuthorizeRequest{Principal: c.who, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_RESOURCE,
				Action: authzv1.Action_ACTION_CALL, Target: u})
			want := false
			for _, w := range c.want {
				want = want || w == u
			}
			if d.GetAllow() != want {
				t.Errorf("%s read %s: %v, want %v (%v)", c.who.GetSubject(), u, d.GetAllow(), want, d.GetReasons())
			}
		}
		d := h.authorize(h.svc, &authzv1.AuthorizeRequest{Principal: c.who, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_PROMPT,
			Action: authzv1.Action_ACTION_CALL, Target: "everything_simple-prompt"})
		if !d.GetAllow() {
			t.Errorf("%s get prompt: %v", c.who.GetSubject(), d.GetReasons())
		}
	}
}

package catalogoauth

import (
	"reflect"
	"testing"
)

// TestParseChallenges: several challenges in one value, quoted strings
// with escapes and commas, unquoted values, token68, case-insensitive names.
func TestParseChallenges(t *testing.T) {
	cs := ParseChallenges(`Basic realm="a, b", Bearer error="insufficient_scope", scope="files:read files:write", ` +
		`resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", error_description="say \"hi\"", Negotiate abc==`)
	if len(cs) != 3 || cs[0].Scheme != "basic" || cs[0].Params["realm"] != "a, b" || cs[1].Scheme != "bearer" || cs[2].Scheme != "negotiate" {
		t.Fatalf("%+v", cs)
	}
	b := cs[1]
	if b.Error() != "insufficient_scope" || !reflect.DeepEqual(b.Scope(), []string{"files:read", "files:write"}) ||
		b.ResourceMetadata() != "https://h/.well-known/oauth-protected-resource/mcp" || b.Params["error_description"] != `say "hi"` {
		t.Fatalf("%+v", b)
	}
	c, ok := BearerChallenge([]string{`Basic realm=x`, `BEARER Resource_Metadata=https://h/m, scope=a`})
	if !ok || c.ResourceMetadata() != "https://h/m" || c.Params["scope"] != "a" {
		t.Fatalf("%+v %v", c, ok)
	}
	if _, ok := BearerChallenge([]string{"", "Basic"}); ok {
		t.Fatal("found a bearer challenge in none")
	}
	if got := ParseChallenges(`Bearer`); len(got) != 1 || len(got[0].Params) != 0 {
		t.Fatalf("bare scheme: %+v", got)
	}
}

// TestResourceBinds: the declared resource must be the server or an
// ancestor path on the same origin.
func TestResourceBinds(t *testing.T) {
	for _, c := range []struct {
		declared, addressed string
		want                bool
	}{
		{"https://h/mcp", "https://h/mcp", true},
		{"https://h", "https://h/mcp", true},
		{"https://H/mcp/", "https://h/mcp", true},
		{"https://h/m", "https://h/mcp", false},
		{"https://evil.example.com/mcp", "https://h/mcp", false},
		{"http://h/mcp", "https://h/mcp", false},
	} {
		if got := resourceBinds(c.declared, c.addressed); got != c.want {
			t.Errorf("resourceBinds(%s, %s) = %v", c.declared, c.addressed, got)
		}
	}
}

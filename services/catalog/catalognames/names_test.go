package catalognames

import (
	"strings"
	"testing"
)

func TestAssign(t *testing.T) {
	long := strings.Repeat("x", 70)
	in := []Original{
		{Server: "fs", Tool: "read", Prefixed: true},
		{Server: "fs_read", Tool: "x", Prefixed: false},    // plain "x"
		{Server: "other", Tool: "x", Prefixed: false},      // collides with "x"
		{Server: "srv", Tool: long, Prefixed: true},        // too long
		{Server: "s", Tool: "a.b", Prefixed: true},         // sanitised
		{Server: "s", Tool: "a b", Prefixed: true},         // differs only by a removed char
		{Server: "s", Tool: "a_b", Prefixed: true},         // already valid, keeps plain name
		{Server: "my.server", Tool: "get", Prefixed: true}, // server name with a dot
		{Server: "s", Tool: "日本", Prefixed: false},
	}
	out := Assign(in)
	seen := map[string]bool{}
	for i, a := range out {
		if !Valid.MatchString(a.Name) {
			t.Errorf("%d: invalid name %q", i, a.Name)
		}
		if seen[a.Name] {
			t.Errorf("%d: duplicate %q", i, a.Name)
		}
		seen[a.Name] = true
	}
	if out[0].Name != "fs_read" || out[0].Suffixed {
		t.Errorf("plain: %+v", out[0])
	}
	if out[1].Name != "x" || out[1].Collided {
		t.Errorf("first keeps plain: %+v", out[1])
	}
	if !out[2].Collided || out[2].Name != "x_"+Suffix("other", "x", 8) {
		t.Errorf("later gets suffix: %+v", out[2])
	}
	if len(out[3].Name) != 64 || !strings.HasSuffix(out[3].Name, Suffix("srv", long, 8)) {
		t.Errorf("long: %q", out[3].Name)
	}
	if out[4].Name == out[5].Name || out[6].Name != "s_a_b" {
		t.Errorf("sanitised names merged: %q %q %q", out[4].Name, out[5].Name, out[6].Name)
	}
	// Deterministic: same input, same output.
	again := Assign(in)
	for i := range out {
		if out[i] != again[i] {
			t.Fatalf("not deterministic at %d", i)
		}
	}
	// Order decides collisions: swapping gives the plain name to the other.
	sw := Assign([]Original{in[2], in[1]})
	if sw[0].Name != "x" || !sw[1].Collided {
		t.Errorf("order: %+v", sw)
	}
}

func TestIsValidMatchesRegexp(t *testing.T) {
	for _, s := range []string{"", "a", "a-b_C9", "a.b", "a b", strings.Repeat("x", 64), strings.Repeat("x", 65), "日本", "a\n"} {
		if isValid(s) != Valid.MatchString(s) {
			t.Errorf("%q: isValid %v, regexp %v", s, isValid(s), Valid.MatchString(s))
		}
	}
}

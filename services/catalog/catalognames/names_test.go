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

func TestAssignStableKeepsNamesAcrossOrderAndAvailability(t *testing.T) {
	a := Original{Server: "a", Tool: "b_c", Prefixed: true}  // a_b_c
	ab := Original{Server: "a_b", Tool: "c", Prefixed: true} // a_b_c
	// Down at start: only a_b is listed and gets the plain name.
	first := AssignStable([]Original{ab}, nil)
	if first[0].Name != "a_b_c" || !first[0].New || first[0].Collided {
		t.Fatalf("first: %+v", first[0])
	}
	stored := map[Key]Stored{KeyOf(ab): {Base: Base(ab), Name: first[0].Name}}
	// a comes back (earlier in the file): the newcomer gets the suffix.
	second := AssignStable([]Original{a, ab}, stored)
	if second[1].Name != "a_b_c" || second[1].New {
		t.Fatalf("a_b after a returned: %+v", second[1])
	}
	want := "a_b_c_" + Suffix("a", "b_c", 8)
	if second[0].Name != want || !second[0].New || !second[0].Collided || second[0].Holder != KeyOf(ab) || second[0].Plain != "a_b_c" {
		t.Fatalf("a after return: %+v, want %s held by a_b", second[0], want)
	}
	stored[KeyOf(a)] = Stored{Base: Base(a), Name: second[0].Name}
	// Restart with both up, in either order: nothing moves, nothing is new.
	for _, in := range [][]Original{{a, ab}, {ab, a}} {
		got := AssignStable(in, stored)
		for i, o := range in {
			if got[i].Name != stored[KeyOf(o)].Name || got[i].New {
				t.Fatalf("restart %v: %+v", in, got)
			}
		}
	}
	// ab vanished but retained: a still does not take its name, and a
	// newcomer asking for it gets the suffix too.
	n := Original{Server: "n", Tool: "a_b_c", Prefixed: false}
	got := AssignStable([]Original{a, n}, stored)
	if got[0].Name != want || got[1].Name != "a_b_c_"+Suffix("n", "a_b_c", 8) || !got[1].Collided || got[1].Holder != KeyOf(ab) {
		t.Fatalf("retained holder: %+v", got)
	}
}

func TestAssignStableRenameOnPrefixChange(t *testing.T) {
	o := Original{Server: "s", Tool: "t", Prefixed: true}
	stored := map[Key]Stored{KeyOf(o): {Base: "s_t", Name: "s_t"}}
	o.Prefixed = false
	got := AssignStable([]Original{o}, stored)
	if got[0].Name != "t" || got[0].Previous != "s_t" || !got[0].New {
		t.Fatalf("%+v", got[0])
	}
}

func TestAssignStableDuplicatePair(t *testing.T) {
	o := Original{Server: "s", Tool: "t"}
	got := AssignStable([]Original{o, o}, nil)
	if got[0].Name == got[1].Name || !got[1].Duplicate || got[1].New || !got[0].New {
		t.Fatalf("%+v", got)
	}
	for _, g := range got {
		if !Valid.MatchString(g.Name) {
			t.Fatalf("invalid %q", g.Name)
		}
	}
}

// TestAssignScoped: the global scope wins a name over a stored tenant pair
// (renamed, Previous reported); a tenant pair never takes a retained global
// name; a pair whose server moved scope keeps its name; two tenant pairs
// are settled like any two pairs.
func TestAssignScoped(t *testing.T) {
	g := Original{Server: "a_b", Tool: "c", Prefixed: true}
	ten := Original{Server: "a", Tool: "b_c", Prefixed: true}
	stored := map[Key]Stored{KeyOf(ten): {Scope: "acme", Base: "a_b_c", Name: "a_b_c"}}
	res := AssignScoped([]Original{ten, g}, []string{"acme", "*"}, stored)
	if res[1].Name != "a_b_c" || !res[1].New {
		t.Fatalf("global pair = %+v", res[1])
	}
	if res[0].Name == "a_b_c" || res[0].Previous != "a_b_c" || !res[0].Collided || res[0].Holder != KeyOf(g) {
		t.Fatalf("tenant pair = %+v", res[0])
	}
	// A retained global assignment (server absent) still keeps the name from a tenant pair.
	retained := map[Key]Stored{KeyOf(g): {Scope: "*", Base: "a_b_c", Name: "a_b_c"}}
	res = AssignScoped([]Original{ten}, []string{"acme"}, retained)
	if res[0].Name == "a_b_c" || res[0].Holder != KeyOf(g) {
		t.Fatalf("tenant pair against a retained global name = %+v", res[0])
	}
	// A server moving from a tenant to every tenant keeps its name.
	res = AssignScoped([]Original{ten}, []string{"*"}, stored)
	if res[0].Name != "a_b_c" || res[0].New || res[0].Previous != "" {
		t.Fatalf("moved pair = %+v", res[0])
	}
	// Two tenants: each its own namespace, both plain.
	b := Original{Server: "a_b", Tool: "c", Prefixed: true}
	res = AssignScoped([]Original{b, ten}, []string{"beta", "acme"}, stored)
	if res[1].Name != "a_b_c" || res[0].Name != "a_b_c" || res[0].Collided || res[1].Collided || res[0].Suffixed {
		t.Fatalf("two tenants = %+v", res)
	}
	// Inside one tenant scope two pairs are settled like any two pairs.
	res = AssignScoped([]Original{b, ten}, []string{"acme", "acme"}, stored)
	if res[1].Name != "a_b_c" || res[0].Name == "a_b_c" || res[0].Holder != KeyOf(ten) {
		t.Fatalf("one tenant, two pairs = %+v", res)
	}
	// A pair moving from tenant beta to acme, where a stored pair holds its
	// name, is named again; one moving to a scope where its name is free keeps it.
	bStored := map[Key]Stored{KeyOf(ten): {Scope: "acme", Base: "a_b_c", Name: "a_b_c"}, KeyOf(b): {Scope: "beta", Base: "a_b_c", Name: "a_b_c"}}
	res = AssignScoped([]Original{ten, b}, []string{"acme", "acme"}, bStored)
	if res[0].Name != "a_b_c" || res[1].Name == "a_b_c" || !res[1].New {
		t.Fatalf("moved into a scope holding its name = %+v", res)
	}
	res = AssignScoped([]Original{ten, b}, []string{"acme", "gamma"}, bStored)
	if res[0].Name != "a_b_c" || res[1].Name != "a_b_c" || res[1].New {
		t.Fatalf("moved into a free scope = %+v", res)
	}
	// Names are distinct within the global scope plus any one tenant scope.
	in := []Original{ten, g, {Server: "a_b_c", Tool: "x"}, {Server: "z", Tool: "a_b_c"}, {Server: "y", Tool: "a_b_c"}}
	sc := []string{"acme", "*", "beta", "gamma", "gamma"}
	out := AssignScoped(in, sc, nil)
	for _, ns := range []string{"acme", "beta", "gamma"} {
		seen := map[string]bool{}
		for i, a := range out {
			if sc[i] != "*" && sc[i] != ns {
				continue
			}
			if seen[a.Name] {
				t.Fatalf("name %q assigned twice in %s's namespace: %+v", a.Name, ns, out)
			}
			seen[a.Name] = true
		}
	}
}

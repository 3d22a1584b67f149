package skills

import "testing"

// A tenant or subject holding '/' or '%' cannot make two principals share
// a custom-skill owner key.
func TestUserKeyInjective(t *testing.T) {
	pairs := [][2][2]string{
		{{"a/b", "c"}, {"a", "b/c"}},
		{{"a%2Fb", "c"}, {"a/b", "c"}},
		{{"a%", "2Fb/c"}, {"a%2Fb", "c"}},
	}
	for _, p := range pairs {
		if k1, k2 := userKey(p[0][0], p[0][1]), userKey(p[1][0], p[1][1]); k1 == k2 {
			t.Errorf("%v and %v share key %q", p[0], p[1], k1)
		}
	}
	if got := userKey("default", "alice"); got != "default/alice" {
		t.Errorf("plain key changed: %q", got)
	}
}

package authzcasbin

import "testing"

// FuzzParseCondition: the parser never panics, and a parsed condition
// evaluates without panicking at list time and at call time.
func FuzzParseCondition(f *testing.F) {
	for _, s := range []string{
		"subagent", "!subagent", "input.path under '/a'", `input.cmd matches "rm\\s+-rf"`,
		"attr.team in ['a', 'b'] && !(agent == 'x' || subagent)", "input.a.b glob '{x,y}*'", "((subagent))", "!!!subagent",
		"input.x != ['a']", "agent prefix 'p'", "(", "'", `"\x`, "input.", "attr.k ==",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCondition(s)
		if err != nil {
			return
		}
		for _, in := range []*CondInput{nil, {}, {CallTime: true, Input: map[string]any{"path": "/a/b", "cmd": "rm -rf", "a": map[string]any{"b": "xz"}, "x": 1.0}, Attributes: map[string]string{"team": "a"}, Agent: "x", IsSubagent: true}} {
			v, detail := c.Eval(in)
			if v != True && detail == "" {
				t.Fatalf("%q: %v without detail", s, v)
			}
			for _, eft := range []string{EffectAllow, EffectDeny} {
				ruleApplies(c, eft, in)
			}
		}
	})
}

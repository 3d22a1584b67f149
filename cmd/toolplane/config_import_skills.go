package main

import (
	"go.yaml.in/yaml/v3"
)

// importSkillEvolution maps DeerFlow's `skill_evolution.enabled` to
// skills.evolution.enabled (ManageSkill and the skill_manage tool,
// docs/deerflow.md §4.14). Other keys of the section (e.g. DeerFlow's LLM
// moderation model) are reported: Toolplane's scan of a change is the
// deterministic one.
func (r *importResult) importSkillEvolution(n *yaml.Node) {
	fields := pairs(n)
	if fields == nil {
		if deref(n) != nil && deref(n).Tag != "!!null" {
			r.drop("skill_evolution", "not a mapping")
		}
		return
	}
	for _, kv := range fields {
		p := "skill_evolution." + kv.key
		switch kv.key {
		case "enabled":
			var on bool
			if v := deref(kv.val); v == nil || v.Kind != yaml.ScalarNode || v.Decode(&on) != nil {
				r.drop(p, "not a boolean (skill evolution stays off)")
				continue
			}
			r.Config.Skills.Evolution.Enabled = on
		default:
			r.drop(p, "no Toolplane equivalent: changes are checked by the deterministic scan (skills.scan_timeout bounds it)")
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestImportDeerFlowSkillEvolution(t *testing.T) {
	for _, c := range []struct {
		src    string
		on     bool
		report string
	}{
		{"skill_evolution:\n  enabled: true\n  moderation_model_name: gpt-4o-mini\n", true, "skill_evolution.moderation_model_name: no Toolplane equivalent"},
		{"skill_evolution:\n  enabled: false\n", false, ""},
		{"skill_evolution:\n  enabled: maybe\n", false, "skill_evolution.enabled: not a boolean"},
		{"skill_evolution: on\n", false, "skill_evolution: not a mapping"},
		{"title: x\n", false, ""},
	} {
		dir := t.TempDir()
		src := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(src, []byte(c.src), 0o600); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "toolplane.yaml")
		_, stderr, err := runImport(t, src, "-o", out)
		if err != nil {
			t.Fatal(err)
		}
		if got := loadWritten(t, out).Skills.Evolution.Enabled; got != c.on {
			t.Errorf("%q: skills.evolution.enabled = %v, want %v", c.src, got, c.on)
		}
		lines := reportLines(stderr)
		if c.report != "" && !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, c.report) }) {
			t.Errorf("%q: report lacks %q:\n%s", c.src, c.report, stderr)
		}
		if c.report == "" && slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "skill_evolution") }) {
			t.Errorf("%q: skill_evolution reported:\n%s", c.src, stderr)
		}
	}
}

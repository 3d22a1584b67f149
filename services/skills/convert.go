package skills

import (
	"encoding/json"
	"path"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/services/skills/skillsmd"
	"github.com/toolplane/toolplane/services/skills/skillsscan"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

func categoryProto(c skillsstore.Category) skillsv1.SkillCategory {
	switch c {
	case skillsstore.Public:
		return skillsv1.SkillCategory_SKILL_CATEGORY_PUBLIC
	case skillsstore.Integration:
		return skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION
	case skillsstore.Custom:
		return skillsv1.SkillCategory_SKILL_CATEGORY_CUSTOM
	}
	return skillsv1.SkillCategory_SKILL_CATEGORY_UNSPECIFIED
}

func severityProto(s skillsscan.Severity) skillsv1.Severity {
	switch s {
	case skillsscan.Critical:
		return skillsv1.Severity_SEVERITY_CRITICAL
	case skillsscan.High:
		return skillsv1.Severity_SEVERITY_HIGH
	case skillsscan.Medium:
		return skillsv1.Severity_SEVERITY_MEDIUM
	case skillsscan.Low:
		return skillsv1.Severity_SEVERITY_LOW
	}
	return skillsv1.Severity_SEVERITY_UNSPECIFIED
}

func findingProto(f skillsscan.Finding) *skillsv1.Finding {
	return &skillsv1.Finding{RuleId: f.RuleID, Severity: severityProto(f.Severity), File: f.File, Line: int32(f.Line),
		Column: int32(f.Column), Message: f.Message, Remediation: f.Remediation, Evidence: f.Evidence}
}

func reportProto(r skillsscan.Report) *skillsv1.ScanReport {
	out := &skillsv1.ScanReport{Blocked: r.Blocked, RulesVersion: r.RulesDigest}
	for _, f := range r.Findings {
		out.Findings = append(out.Findings, findingProto(f))
	}
	return out
}

// frontmatterStruct holds the frontmatter keys other than name,
// description and allowed-tools, under their SKILL.md spelling.
func frontmatterStruct(fm skillsmd.Frontmatter) *structpb.Struct {
	m := map[string]any{"secrets-autonomous": fm.SecretsAutonomous}
	for k, v := range map[string]string{"license": fm.License, "compatibility": fm.Compatibility, "version": fm.Version, "author": fm.Author} {
		if v != "" {
			m[k] = v
		}
	}
	if len(fm.Metadata) > 0 {
		md := map[string]any{}
		for k, v := range fm.Metadata {
			md[k] = v
		}
		m["metadata"] = md
	}
	if len(fm.RequiredSecrets) > 0 {
		var rs []any
		for _, sec := range fm.RequiredSecrets {
			rs = append(rs, map[string]any{"name": sec.Name, "optional": sec.Optional})
		}
		m["required-secrets"] = rs
	}
	for k, v := range fm.Extra {
		m[k] = v
	}
	st, err := structpb.NewStruct(m)
	if err != nil { // cannot happen: only strings, bools, maps and lists
		b, _ := json.Marshal(m)
		st = &structpb.Struct{}
		_ = st.UnmarshalJSON(b)
	}
	return st
}

func problemsProto(ps []skillsmd.Problem) []*skillsv1.Problem {
	var out []*skillsv1.Problem
	for _, p := range ps {
		out = append(out, &skillsv1.Problem{Field: p.Field, Line: int32(p.Line), Column: int32(p.Column), Message: p.Message})
	}
	return out
}

// skillProto renders a stored skill for user u.
func (s *Server) skillProto(sk skillsstore.Skill, enabled bool, u user) *skillsv1.Skill {
	out := &skillsv1.Skill{
		Name: sk.Name, Category: categoryProto(sk.Category), Enabled: enabled,
		Editable: sk.Category == skillsstore.Custom && sk.Owner == u.key,
		Digest:   sk.Digest, Version: int32(sk.Version), UpdateTime: timestamppb.New(sk.UpdatedAt),
		Path: path.Join(s.cfg.ContainerPath, string(sk.Category), sk.Name),
	}
	if sk.Category == skillsstore.Custom {
		out.Owner = sk.Owner
	}
	for _, f := range sk.Files {
		out.Files = append(out.Files, f.Path)
	}
	d, err := s.doc(sk)
	if err != nil {
		out.Problems = []*skillsv1.Problem{{Field: "SKILL.md", Message: "cannot read SKILL.md: " + err.Error()}}
		out.HasAllowedTools, out.AllowedTools = true, nil // fail closed
		return out
	}
	fm := d.doc.Frontmatter
	out.Description = fm.Description
	out.HasAllowedTools = fm.AllowedToolsSet
	out.AllowedTools = fm.AllowedTools
	out.Frontmatter = frontmatterStruct(fm)
	out.Problems = problemsProto(d.problems)
	return out
}

func historyProto(ev skillsstore.HistoryEntry) *skillsv1.HistoryEntry {
	out := &skillsv1.HistoryEntry{Version: int32(ev.Version), Author: ev.Author, Time: timestamppb.New(ev.Time),
		Action: ev.Action, Digest: ev.Digest, ScanDecision: ev.ScanDecision, FindingCounts: map[string]int32{},
		ThreadId: ev.ThreadID, FilePath: ev.FilePath}
	for k, v := range ev.Counts {
		out.FindingCounts[k] = int32(v)
	}
	return out
}

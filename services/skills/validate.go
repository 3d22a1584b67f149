package skills

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/services/skills/skillsmd"
)

// Request limits checked before handlers run.
const (
	maxQueryBytes      = 4096 // DescribeSkills query
	maxActiveSkills    = 64   // ResolveSkillPolicy active skills
	maxAlwaysAvailable = 256  // ResolveSkillPolicy always-available names
	maxPathBytes       = 1024 // ReadSkillFile path
)

// Validate checks a request before its handler runs (called by the shared
// validation interceptor). It returns a gRPC status error with
// INVALID_ARGUMENT naming the field and the reason, or nil.
func (s *Server) Validate(fullMethod string, req any) error {
	if r, ok := req.(*skillsv1.ReadSkillFileRequest); ok && r.GetPath() != "" {
		if why := pathProblem(r.GetPath()); why != "" {
			return badPath(codes.InvalidArgument, r.GetName(), r.GetPath(), why)
		}
	}
	if err := s.validate(req); err != "" {
		return status.Error(codes.InvalidArgument, err)
	}
	return nil
}

func checkName(field, name string) string {
	switch {
	case name == "":
		return field + ": required"
	case !skillsmd.ValidName(name):
		return fmt.Sprintf("%s: %q is not a skill name (1-64 lowercase letters, digits and single hyphens)", field, name)
	}
	return ""
}

func (s *Server) checkInline(field string, f *skillsv1.InlineFiles) string {
	if f.GetName() != "" {
		if e := checkName(field+".name", f.GetName()); e != "" {
			return e
		}
	}
	if len(f.GetFiles()) == 0 {
		return field + ".files: at least SKILL.md is required"
	}
	if len(f.GetFiles()) > s.cfg.Limits.MaxFiles {
		return fmt.Sprintf("%s.files: %d files; the limit is %d", field, len(f.GetFiles()), s.cfg.Limits.MaxFiles)
	}
	for i, file := range f.GetFiles() {
		if file.GetPath() == "" {
			return fmt.Sprintf("%s.files[%d].path: required", field, i)
		}
	}
	return ""
}

func (s *Server) checkArchive(field string, b []byte) string {
	switch {
	case len(b) == 0:
		return field + ": empty archive"
	case int64(len(b)) > s.cfg.Limits.MaxArchiveBytes:
		return fmt.Sprintf("%s: %d bytes; the limit is %d", field, len(b), s.cfg.Limits.MaxArchiveBytes)
	}
	return ""
}

func (s *Server) validate(req any) string {
	switch r := req.(type) {
	case *skillsv1.ListSkillsRequest:
		if _, ok := skillsv1.SkillCategory_name[int32(r.GetCategory())]; !ok {
			return "category: unknown value"
		}
	case *skillsv1.GetSkillRequest:
		return checkName("name", r.GetName())
	case *skillsv1.DeleteSkillRequest:
		return checkName("name", r.GetName())
	case *skillsv1.ListSkillHistoryRequest:
		return checkName("name", r.GetName())
	case *skillsv1.RollbackSkillRequest:
		if e := checkName("name", r.GetName()); e != "" {
			return e
		}
		if r.GetVersion() < 1 {
			return "version: must be >= 1"
		}
	case *skillsv1.InstallSkillRequest:
		switch r.GetCategory() {
		case skillsv1.SkillCategory_SKILL_CATEGORY_UNSPECIFIED, skillsv1.SkillCategory_SKILL_CATEGORY_CUSTOM, skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION:
		default:
			return "category: must be CUSTOM or INTEGRATION (public skills ship with the suite)"
		}
		switch src := r.GetSource().(type) {
		case nil:
			return "source: one of archive or files is required"
		case *skillsv1.InstallSkillRequest_Archive:
			return s.checkArchive("archive", src.Archive)
		case *skillsv1.InstallSkillRequest_Files:
			return s.checkInline("files", src.Files)
		}
	case *skillsv1.UpdateSkillRequest:
		if e := checkName("name", r.GetName()); e != "" {
			return e
		}
		if r.GetSkill() == nil || (r.GetSkill().Enabled == nil && len(r.GetSkill().GetFiles()) == 0) {
			return "skill: nothing to change (set enabled and/or files)"
		}
		if n := len(r.GetSkill().GetFiles()); n > s.cfg.Limits.MaxFiles {
			return fmt.Sprintf("skill.files: %d files; the limit is %d", n, s.cfg.Limits.MaxFiles)
		}
		for i, f := range r.GetSkill().GetFiles() {
			if f.GetPath() == "" {
				return fmt.Sprintf("skill.files[%d].path: required", i)
			}
		}
	case *skillsv1.ScanSkillRequest:
		if _, ok := skillsv1.ScanFormat_name[int32(r.GetFormat())]; !ok {
			return "format: unknown value"
		}
		switch src := r.GetSource().(type) {
		case nil:
			return "source: one of archive, files or name is required"
		case *skillsv1.ScanSkillRequest_Archive:
			return s.checkArchive("archive", src.Archive)
		case *skillsv1.ScanSkillRequest_Files:
			return s.checkInline("files", src.Files)
		case *skillsv1.ScanSkillRequest_Name:
			return checkName("name", src.Name)
		}
	case *skillsv1.ReviewSkillPackageRequest:
		switch src := r.GetSource().(type) {
		case nil:
			return "source: one of archive, files or name is required"
		case *skillsv1.ReviewSkillPackageRequest_Archive:
			return s.checkArchive("archive", src.Archive)
		case *skillsv1.ReviewSkillPackageRequest_Files:
			return s.checkInline("files", src.Files)
		case *skillsv1.ReviewSkillPackageRequest_Name:
			return checkName("name", src.Name)
		}
	case *skillsv1.DescribeSkillsRequest:
		switch {
		case strings.TrimSpace(r.GetQuery()) == "":
			return "query: required (a skill name, select:a,b, +required rest, or words)"
		case len(r.GetQuery()) > maxQueryBytes:
			return fmt.Sprintf("query: longer than %d bytes", maxQueryBytes)
		case r.GetLimit() < 0:
			return "limit: must be >= 0"
		}
	case *skillsv1.ResolveSkillPolicyRequest:
		if len(r.GetActiveSkills()) > maxActiveSkills {
			return fmt.Sprintf("active_skills: more than %d", maxActiveSkills)
		}
		for i, a := range r.GetActiveSkills() {
			if e := checkName(fmt.Sprintf("active_skills[%d].name", i), a.GetName()); e != "" {
				return e
			}
		}
		if len(r.GetAlwaysAvailable()) > maxAlwaysAvailable {
			return fmt.Sprintf("always_available: more than %d names", maxAlwaysAvailable)
		}
		for i, n := range r.GetAlwaysAvailable() {
			if strings.TrimSpace(n) == "" {
				return fmt.Sprintf("always_available[%d]: must not be blank", i)
			}
		}
	case *skillsv1.ReadSkillFileRequest:
		if e := checkName("name", r.GetName()); e != "" {
			return e
		}
		if len(r.GetPath()) > maxPathBytes {
			return fmt.Sprintf("path: longer than %d bytes", maxPathBytes)
		}
		if why := pathProblem(r.GetPath()); why != "" {
			return "path: " + why
		}
	}
	return ""
}

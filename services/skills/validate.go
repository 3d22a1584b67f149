package skills

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
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
// INVALID_ARGUMENT, an ErrorInfo and a google.rpc.BadRequest naming the field
// and the reason, or nil.
func (s *Server) Validate(fullMethod string, req any) error {
	if r, ok := req.(*skillsv1.ReadSkillFileRequest); ok && r.GetPath() != "" {
		if why := pathProblem(r.GetPath()); why != "" {
			return badPath(codes.InvalidArgument, r.GetName(), r.GetPath(), why)
		}
	}
	if v := s.validate(req); v != nil {
		return invalidRequest(*v)
	}
	return nil
}

// invalidRequest is INVALID_ARGUMENT (ERROR_REASON_INVALID_REQUEST) with a
// google.rpc.BadRequest of v.
func invalidRequest(v grpcx.Violation) error {
	return grpcx.Invalid(errorDomain, skillsv1.ErrorReason_ERROR_REASON_INVALID_REQUEST.String(), v)
}

// bad is one field violation; why is a grpcx.Violation* reason.
func bad(field, why, format string, args ...any) *grpcx.Violation {
	return &grpcx.Violation{Field: field, Reason: why, Description: fmt.Sprintf(format, args...)}
}

func checkName(field, name string) *grpcx.Violation {
	switch {
	case name == "":
		return bad(field, grpcx.ViolationRequired, "required")
	case !skillsmd.ValidName(name):
		return bad(field, grpcx.ViolationInvalid, "%q is not a skill name (1-64 lowercase letters, digits and single hyphens)", name)
	}
	return nil
}

func (s *Server) checkInline(field string, f *skillsv1.InlineFiles) *grpcx.Violation {
	if f.GetName() != "" {
		if v := checkName(field+".name", f.GetName()); v != nil {
			return v
		}
	}
	if len(f.GetFiles()) == 0 {
		return bad(field+".files", grpcx.ViolationRequired, "at least SKILL.md is required")
	}
	if len(f.GetFiles()) > s.cfg.Limits.MaxFiles {
		return bad(field+".files", grpcx.ViolationTooMany, "%d files; the limit is %d", len(f.GetFiles()), s.cfg.Limits.MaxFiles)
	}
	for i, file := range f.GetFiles() {
		if file.GetPath() == "" {
			return bad(fmt.Sprintf("%s.files[%d].path", field, i), grpcx.ViolationRequired, "required")
		}
	}
	return nil
}

func (s *Server) checkArchive(field string, b []byte) *grpcx.Violation {
	switch {
	case len(b) == 0:
		return bad(field, grpcx.ViolationRequired, "empty archive")
	case int64(len(b)) > s.cfg.Limits.MaxArchiveBytes:
		return bad(field, grpcx.ViolationTooLong, "%d bytes; the limit is %d", len(b), s.cfg.Limits.MaxArchiveBytes)
	}
	return nil
}

func (s *Server) validate(req any) *grpcx.Violation {
	switch r := req.(type) {
	case *skillsv1.ListSkillsRequest:
		if _, ok := skillsv1.SkillCategory_name[int32(r.GetCategory())]; !ok {
			return bad("category", grpcx.ViolationUnknownValue, "unknown value")
		}
	case *skillsv1.GetSkillRequest:
		return checkName("name", r.GetName())
	case *skillsv1.DeleteSkillRequest:
		return checkName("name", r.GetName())
	case *skillsv1.ListSkillHistoryRequest:
		return checkName("name", r.GetName())
	case *skillsv1.RollbackSkillRequest:
		if v := checkName("name", r.GetName()); v != nil {
			return v
		}
		if r.GetVersion() < 1 {
			return bad("version", grpcx.ViolationOutOfRange, "must be >= 1")
		}
	case *skillsv1.InstallSkillRequest:
		switch r.GetCategory() {
		case skillsv1.SkillCategory_SKILL_CATEGORY_UNSPECIFIED, skillsv1.SkillCategory_SKILL_CATEGORY_CUSTOM, skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION:
		default:
			return bad("category", grpcx.ViolationInvalid, "must be CUSTOM or INTEGRATION (public skills ship with the suite)")
		}
		switch src := r.GetSource().(type) {
		case nil:
			return bad("source", grpcx.ViolationRequired, "one of archive or files is required")
		case *skillsv1.InstallSkillRequest_Archive:
			return s.checkArchive("archive", src.Archive)
		case *skillsv1.InstallSkillRequest_Files:
			return s.checkInline("files", src.Files)
		}
	case *skillsv1.UpdateSkillRequest:
		if v := checkName("name", r.GetName()); v != nil {
			return v
		}
		if r.GetSkill() == nil || (r.GetSkill().Enabled == nil && len(r.GetSkill().GetFiles()) == 0) {
			return bad("skill", grpcx.ViolationRequired, "nothing to change (set enabled and/or files)")
		}
		if n := len(r.GetSkill().GetFiles()); n > s.cfg.Limits.MaxFiles {
			return bad("skill.files", grpcx.ViolationTooMany, "%d files; the limit is %d", n, s.cfg.Limits.MaxFiles)
		}
		for i, f := range r.GetSkill().GetFiles() {
			if f.GetPath() == "" {
				return bad(fmt.Sprintf("skill.files[%d].path", i), grpcx.ViolationRequired, "required")
			}
		}
	case *skillsv1.ScanSkillRequest:
		if _, ok := skillsv1.ScanFormat_name[int32(r.GetFormat())]; !ok {
			return bad("format", grpcx.ViolationUnknownValue, "unknown value")
		}
		switch src := r.GetSource().(type) {
		case nil:
			return bad("source", grpcx.ViolationRequired, "one of archive, files or name is required")
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
			return bad("source", grpcx.ViolationRequired, "one of archive, files or name is required")
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
			return bad("query", grpcx.ViolationRequired, "required (a skill name, select:a,b, +required rest, or words)")
		case len(r.GetQuery()) > maxQueryBytes:
			return bad("query", grpcx.ViolationTooLong, "longer than %d bytes", maxQueryBytes)
		case r.GetLimit() < 0:
			return bad("limit", grpcx.ViolationOutOfRange, "must be >= 0")
		}
	case *skillsv1.ResolveSkillPolicyRequest:
		if len(r.GetActiveSkills()) > maxActiveSkills {
			return bad("active_skills", grpcx.ViolationTooMany, "more than %d", maxActiveSkills)
		}
		for i, a := range r.GetActiveSkills() {
			if v := checkName(fmt.Sprintf("active_skills[%d].name", i), a.GetName()); v != nil {
				return v
			}
		}
		if len(r.GetAlwaysAvailable()) > maxAlwaysAvailable {
			return bad("always_available", grpcx.ViolationTooMany, "more than %d names", maxAlwaysAvailable)
		}
		for i, n := range r.GetAlwaysAvailable() {
			if strings.TrimSpace(n) == "" {
				return bad(fmt.Sprintf("always_available[%d]", i), grpcx.ViolationRequired, "must not be blank")
			}
		}
	case *skillsv1.ManageSkillRequest:
		return checkManage(r)
	case *skillsv1.ReadSkillFileRequest:
		if v := checkName("name", r.GetName()); v != nil {
			return v
		}
		if len(r.GetPath()) > maxPathBytes {
			return bad("path", grpcx.ViolationTooLong, "longer than %d bytes", maxPathBytes)
		}
		if why := pathProblem(r.GetPath()); why != "" {
			return bad("path", grpcx.ViolationInvalid, "%s", why)
		}
	}
	return nil
}

// checkManage checks a ManageSkill request: the fields its action needs,
// paths (SKILL.md is changed only by create, edit and patch; support files
// only under references/, templates/, scripts/, assets/) and sizes.
func checkManage(r *skillsv1.ManageSkillRequest) *grpcx.Violation {
	if _, ok := actionNames[r.GetAction()]; !ok {
		return bad("action", grpcx.ViolationInvalid, "must be one of create, edit, patch, write_file, remove_file, delete")
	}
	if v := checkName("name", r.GetName()); v != nil {
		return v
	}
	for _, f := range []struct {
		field string
		n     int
	}{{"content", len(r.GetContent())}, {"find", len(r.GetFind())}, {"replace", len(r.GetReplace())}} {
		if f.n > maxManageContentBytes {
			return bad(f.field, grpcx.ViolationTooLong, "%d bytes; the limit is %d", f.n, maxManageContentBytes)
		}
	}
	if len(r.GetPath()) > maxPathBytes {
		return bad("path", grpcx.ViolationTooLong, "longer than %d bytes", maxPathBytes)
	}
	switch r.GetAction() {
	case skillsv1.SkillAction_SKILL_ACTION_CREATE, skillsv1.SkillAction_SKILL_ACTION_EDIT:
		if strings.TrimSpace(r.GetContent()) == "" {
			return bad("content", grpcx.ViolationRequired, "required: the full SKILL.md")
		}
		if r.GetPath() != "" && r.GetPath() != "SKILL.md" {
			return bad("path", grpcx.ViolationInvalid, "create and edit write SKILL.md; use write_file for support files")
		}
	case skillsv1.SkillAction_SKILL_ACTION_PATCH:
		if r.GetFind() == "" {
			return bad("find", grpcx.ViolationRequired, "required: the exact text to replace")
		}
		if r.ExpectedCount != nil && (r.GetExpectedCount() < 1 || r.GetExpectedCount() > maxExpectedCount) {
			return bad("expected_count", grpcx.ViolationOutOfRange, "must be 1..%d", maxExpectedCount)
		}
		if p := r.GetPath(); p != "" && p != "SKILL.md" {
			if why := supportPathProblem(p); why != "" {
				return bad("path", grpcx.ViolationInvalid, "%s", why)
			}
		}
	case skillsv1.SkillAction_SKILL_ACTION_WRITE_FILE, skillsv1.SkillAction_SKILL_ACTION_REMOVE_FILE:
		if r.GetPath() == "" {
			return bad("path", grpcx.ViolationRequired, "required: a file under references/, templates/, scripts/ or assets/")
		}
		if why := supportPathProblem(r.GetPath()); why != "" {
			return bad("path", grpcx.ViolationInvalid, "%s", why)
		}
	}
	return nil
}

package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/services/skills/skillsarchive"
	"github.com/toolplane/toolplane/services/skills/skillsreview"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

// fail maps err with toStatus, logging causes that become INTERNAL.
func (s *Server) fail(ctx context.Context, op string, err error) error {
	st := toStatus(err)
	if status.Code(st) == codes.Internal {
		s.log.ErrorContext(ctx, "skills request failed", "op", op, "error", err)
	}
	return st
}

// inlinePackage builds a package from inline files (duplicates refused).
func (s *Server) inlinePackage(files []*skillsv1.SkillFile) (*skillsarchive.Package, error) {
	m := make(map[string][]byte, len(files))
	for _, f := range files {
		if _, dup := m[f.GetPath()]; dup {
			return nil, &skillsarchive.RefusalError{Reason: skillsarchive.ReasonDuplicate, Entry: f.GetPath(), Detail: "listed twice"}
		}
		m[f.GetPath()] = f.GetContent()
	}
	return skillsarchive.FromFiles(m, nil, s.cfg.limits())
}

// ListSkills lists the skills visible to the user, shadowing applied.
func (s *Server) ListSkills(ctx context.Context, req *skillsv1.ListSkillsRequest) (*skillsv1.ListSkillsResponse, error) {
	u := userOf(ctx)
	sks, err := s.visible(ctx, u)
	if err != nil {
		return nil, s.fail(ctx, "ListSkills", err)
	}
	st, err := s.enableStates(ctx, u)
	if err != nil {
		return nil, s.fail(ctx, "ListSkills", err)
	}
	out := &skillsv1.ListSkillsResponse{EvolutionEnabled: s.cfg.Evolution.Enabled}
	for _, sk := range sks {
		en := st.enabled(sk)
		if req.GetEnabledOnly() && !en {
			continue
		}
		if c := req.GetCategory(); c != skillsv1.SkillCategory_SKILL_CATEGORY_UNSPECIFIED && c != categoryProto(sk.Category) {
			continue
		}
		out.Skills = append(out.Skills, s.skillProto(sk, en, u))
	}
	return out, nil
}

// GetSkill returns one skill with the lenient reader's problems.
func (s *Server) GetSkill(ctx context.Context, req *skillsv1.GetSkillRequest) (*skillsv1.GetSkillResponse, error) {
	u := userOf(ctx)
	sk, err := s.resolve(ctx, u, req.GetName())
	if err != nil {
		return nil, s.fail(ctx, "GetSkill", err)
	}
	st, err := s.enableStates(ctx, u)
	if err != nil {
		return nil, s.fail(ctx, "GetSkill", err)
	}
	return &skillsv1.GetSkillResponse{Skill: s.skillProto(sk, st.enabled(sk), u)}, nil
}

// InstallSkill installs a custom skill (any user) or an integration skill
// (admin), atomically.
func (s *Server) InstallSkill(ctx context.Context, req *skillsv1.InstallSkillRequest) (_ *skillsv1.InstallSkillResponse, err error) {
	defer func() { s.metrics.write("install", err) }()
	u := userOf(ctx)
	cat, owner := skillsstore.Custom, u.key
	if req.GetCategory() == skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION {
		if !u.admin {
			return nil, permissionDenied("installing an integration skill needs the admin role")
		}
		cat, owner = skillsstore.Integration, u.tenant
	}
	var pkg *skillsarchive.Package
	folder := ""
	if req.GetFiles() != nil {
		pkg, err = s.inlinePackage(req.GetFiles().GetFiles())
		folder = req.GetFiles().GetName()
	} else {
		pkg, err = skillsarchive.Read(req.GetArchive(), s.cfg.limits())
	}
	if err != nil {
		return nil, s.fail(ctx, "InstallSkill", err)
	}
	if folder == "" {
		folder = pkg.RootName
	}
	sk, rep, err := s.install(ctx, cat, owner, u.key, pkg, folder)
	if err != nil {
		return nil, s.fail(ctx, "InstallSkill", err)
	}
	s.log.InfoContext(ctx, "skill installed", "skill", sk.Name, "category", string(sk.Category), "user", u.key, "findings", len(rep.Findings))
	return &skillsv1.InstallSkillResponse{Skill: s.skillProto(sk, true, u), Report: reportProto(rep)}, nil
}

// UpdateSkill replaces a custom skill's content and/or toggles enablement.
func (s *Server) UpdateSkill(ctx context.Context, req *skillsv1.UpdateSkillRequest) (_ *skillsv1.UpdateSkillResponse, err error) {
	op := "edit"
	if len(req.GetSkill().GetFiles()) == 0 {
		op = map[bool]string{true: "enable", false: "disable"}[req.GetSkill().GetEnabled()]
	}
	defer func() { s.metrics.write(op, err) }()
	u := userOf(ctx)
	name := req.GetName()
	sk, err := s.resolve(ctx, u, name)
	if err != nil {
		return nil, s.fail(ctx, "UpdateSkill", err)
	}
	resp := &skillsv1.UpdateSkillResponse{}
	upd := req.GetSkill()
	if upd == nil {
		return nil, status.Error(codes.InvalidArgument, "skill: nothing to change (set enabled and/or files)")
	}
	if len(upd.GetFiles()) > 0 {
		if sk.Category != skillsstore.Custom || sk.Owner != u.key {
			return nil, readOnly(name, string(sk.Category))
		}
		pkg, err := s.inlinePackage(upd.GetFiles())
		if err != nil {
			return nil, s.fail(ctx, "UpdateSkill", err)
		}
		_, rep, err := s.check(ctx, "edit", pkg, name)
		if err != nil {
			return nil, s.fail(ctx, "UpdateSkill", err)
		}
		dec, counts := decision(rep)
		s.mu.Lock()
		sk, err = s.newVersion(ctx, sk, pkg, skillsstore.HistoryEntry{Action: "edit", Author: u.key, ScanDecision: dec, Counts: counts})
		s.mu.Unlock()
		if err != nil {
			return nil, s.fail(ctx, "UpdateSkill", err)
		}
		resp.Report = reportProto(rep)
	}
	if upd.Enabled != nil {
		if sk.Category == skillsstore.Public && !u.admin {
			return nil, permissionDenied("enabling or disabling public skill %q changes it for everyone and needs the admin role", name)
		}
		ev := skillsstore.HistoryEntry{Version: sk.Version, Digest: sk.Digest, Author: u.key, Action: "disable"}
		if upd.GetEnabled() {
			// Enabling re-scans with the current rules (docs/architecture.md §11.2).
			pkg, err := s.load(sk.Name, sk.Files)
			if err != nil {
				return nil, s.fail(ctx, "UpdateSkill", err)
			}
			rep := s.scan(ctx, pkg)
			ev.Action = "enable"
			ev.ScanDecision, ev.Counts = decision(rep)
			resp.Report = reportProto(rep)
			if rep.Blocked {
				ev.Action = "enable_refused"
				if err := s.store.Record(ctx, sk.ID, ev); err != nil {
					s.log.ErrorContext(ctx, "skills history write failed", "error", err)
				}
				return nil, s.fail(ctx, "UpdateSkill", &scanBlockedError{op: "enable", report: rep})
			}
		}
		if err := s.store.SetEnabled(ctx, sk.ID, stateKey(sk, u), upd.GetEnabled(), ev); err != nil {
			return nil, s.fail(ctx, "UpdateSkill", err)
		}
	}
	st, err := s.enableStates(ctx, u)
	if err != nil {
		return nil, s.fail(ctx, "UpdateSkill", err)
	}
	resp.Skill = s.skillProto(sk, st.enabled(sk), u)
	return resp, nil
}

// DeleteSkill deletes one of the user's custom skills and collects its blobs.
func (s *Server) DeleteSkill(ctx context.Context, req *skillsv1.DeleteSkillRequest) (_ *skillsv1.DeleteSkillResponse, err error) {
	defer func() { s.metrics.write("delete", err) }()
	u := userOf(ctx)
	sk, err := s.resolve(ctx, u, req.GetName())
	if err != nil {
		return nil, s.fail(ctx, "DeleteSkill", err)
	}
	if sk.Category != skillsstore.Custom || sk.Owner != u.key {
		return nil, readOnly(sk.Name, string(sk.Category))
	}
	if err := s.store.Delete(ctx, sk.ID); err != nil {
		return nil, s.fail(ctx, "DeleteSkill", err)
	}
	if err := s.gc(ctx); err != nil {
		s.log.Warn("skills blob gc failed", "error", err)
	}
	s.log.InfoContext(ctx, "skill deleted", "skill", sk.Name, "user", u.key)
	return &skillsv1.DeleteSkillResponse{}, nil
}

// ListSkillHistory lists a skill's events, newest first.
func (s *Server) ListSkillHistory(ctx context.Context, req *skillsv1.ListSkillHistoryRequest) (*skillsv1.ListSkillHistoryResponse, error) {
	u := userOf(ctx)
	sk, err := s.resolve(ctx, u, req.GetName())
	if err != nil {
		return nil, s.fail(ctx, "ListSkillHistory", err)
	}
	evs, err := s.store.History(ctx, sk.ID)
	if err != nil {
		return nil, s.fail(ctx, "ListSkillHistory", err)
	}
	out := &skillsv1.ListSkillHistoryResponse{}
	for _, ev := range evs {
		// Enable events of another user's state are not this user's business.
		if (ev.Action == "enable" || ev.Action == "disable" || ev.Action == "enable_refused") &&
			sk.Category == skillsstore.Integration && ev.Author != u.key && !u.admin {
			continue
		}
		out.Entries = append(out.Entries, historyProto(ev))
	}
	return out, nil
}

// RollbackSkill restores an earlier content version of a custom skill as a
// new version. The restored content is validated and re-scanned; a blocked
// rollback is refused and recorded (action rollback_refused).
func (s *Server) RollbackSkill(ctx context.Context, req *skillsv1.RollbackSkillRequest) (_ *skillsv1.RollbackSkillResponse, err error) {
	defer func() { s.metrics.write("rollback", err) }()
	u := userOf(ctx)
	sk, err := s.resolve(ctx, u, req.GetName())
	if err != nil {
		return nil, s.fail(ctx, "RollbackSkill", err)
	}
	if sk.Category != skillsstore.Custom || sk.Owner != u.key {
		return nil, readOnly(sk.Name, string(sk.Category))
	}
	c, err := s.store.Version(ctx, sk.ID, int(req.GetVersion()))
	if errors.Is(err, skillsstore.ErrNotFound) {
		return nil, statusErr(codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_SKILL_NOT_FOUND,
			map[string]string{"name": sk.Name, "version": fmt.Sprint(req.GetVersion())},
			"skill %q has no version %d (current version %d)", sk.Name, req.GetVersion(), sk.Version)
	}
	if err != nil {
		return nil, s.fail(ctx, "RollbackSkill", err)
	}
	pkg, err := s.load(sk.Name, c.Files)
	if err != nil {
		return nil, s.fail(ctx, "RollbackSkill", err)
	}
	_, rep, err := s.check(ctx, "rollback", pkg, sk.Name)
	dec, counts := decision(rep)
	if err != nil {
		ev := skillsstore.HistoryEntry{Version: int(req.GetVersion()), Digest: c.Digest, Author: u.key,
			Action: "rollback_refused", ScanDecision: dec, Counts: counts}
		if rerr := s.store.Record(ctx, sk.ID, ev); rerr != nil {
			s.log.ErrorContext(ctx, "skills history write failed", "error", rerr)
		}
		return nil, s.fail(ctx, "RollbackSkill", err)
	}
	s.mu.Lock()
	sk, err = s.newVersion(ctx, sk, pkg, skillsstore.HistoryEntry{Action: "rollback", Author: u.key, ScanDecision: dec, Counts: counts})
	s.mu.Unlock()
	if err != nil {
		return nil, s.fail(ctx, "RollbackSkill", err)
	}
	st, err := s.enableStates(ctx, u)
	if err != nil {
		return nil, s.fail(ctx, "RollbackSkill", err)
	}
	return &skillsv1.RollbackSkillResponse{Skill: s.skillProto(sk, st.enabled(sk), u), Report: reportProto(rep)}, nil
}

// ScanSkill scans an archive, inline files or an installed skill; nothing is stored.
func (s *Server) ScanSkill(ctx context.Context, req *skillsv1.ScanSkillRequest) (*skillsv1.ScanSkillResponse, error) {
	pkg, root, _, err := s.source(ctx, req.GetArchive(), req.GetFiles(), req.GetName(), req.GetSource() != nil)
	if req.GetArchiveEntries() && req.GetArchive() != nil {
		pkg, err = skillsarchive.ReadEntries(req.GetArchive(), s.cfg.limits())
		root = "archive"
	}
	if err != nil {
		return nil, s.fail(ctx, "ScanSkill", err)
	}
	rep := s.scan(ctx, pkg)
	out := &skillsv1.ScanSkillResponse{Report: reportProto(rep)}
	if req.GetFormat() == skillsv1.ScanFormat_SCAN_FORMAT_SARIF {
		b, err := s.rules.SARIF(rep, root)
		if err != nil {
			return nil, s.fail(ctx, "ScanSkill", err)
		}
		out.Formatted = string(b)
	} else {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return nil, s.fail(ctx, "ScanSkill", err)
		}
		out.Formatted = string(b)
	}
	return out, nil
}

// source reads the package a Scan or Review request names. ref describes it
// for display ("archive", "inline://x", "skill://custom/x").
func (s *Server) source(ctx context.Context, archive []byte, files *skillsv1.InlineFiles, name string, set bool) (*skillsarchive.Package, string, string, error) {
	switch {
	case !set:
		return nil, "", "", status.Error(codes.InvalidArgument, "source: one of archive, files or name is required")
	case files != nil:
		pkg, err := s.inlinePackage(files.GetFiles())
		if err != nil {
			return nil, "", "inline://" + files.GetName(), err
		}
		root := files.GetName()
		if root == "" {
			root = pkg.RootName
		}
		pkg.RootName = root
		return pkg, root, "inline://" + root, nil
	case name != "":
		u := userOf(ctx)
		sk, err := s.resolve(ctx, u, name)
		if err != nil {
			return nil, "", "", err
		}
		pkg, err := s.load(sk.Name, sk.Files)
		return pkg, sk.Name, "skill://" + string(sk.Category) + "/" + sk.Name, err
	default:
		pkg, err := skillsarchive.Read(archive, s.cfg.limits())
		if err != nil {
			return nil, "", "archive", err
		}
		return pkg, pkg.RootName, "archive", nil
	}
}

// ReviewSkillPackage reviews a package read-only; refused archives are
// reviewed too (one blocker naming the refusal).
func (s *Server) ReviewSkillPackage(ctx context.Context, req *skillsv1.ReviewSkillPackageRequest) (*skillsv1.ReviewSkillPackageResponse, error) {
	pkg, _, ref, err := s.source(ctx, req.GetArchive(), req.GetFiles(), req.GetName(), req.GetSource() != nil)
	sctx, cancel := context.WithTimeout(ctx, s.cfg.ScanTimeout)
	defer cancel()
	in := skillsreview.Input{DisplayRef: ref, IncludeContent: req.GetIncludeContent(), Budget: s.cfg.Review.TextBudget, Rules: s.rules, Context: sctx}
	switch {
	case req.GetFiles() != nil:
		in.Source = "inline"
	case req.GetName() != "":
		in.Source = "installed"
		in.Category = strings.TrimPrefix(path.Dir(strings.TrimPrefix(ref, "skill://")), "/")
	default:
		in.Source = "archive"
	}
	if err != nil {
		if skillsarchive.ReasonOf(err) == "" {
			return nil, s.fail(ctx, "ReviewSkillPackage", err)
		}
		in.RefusedErr = err
	} else {
		in.Package = pkg
	}
	r := skillsreview.Review(in)
	facts := &skillsv1.ReviewFacts{Subject: r.Facts.Subject.DeclaredName, Digest: r.Facts.Subject.PackageDigest,
		Complete: r.Valid, TotalBytes: r.Facts.TotalBytes}
	if facts.Subject == "" {
		facts.Subject = ref
	}
	for _, it := range r.Facts.Inventory {
		facts.Files = append(facts.Files, it.Path)
	}
	if fm := r.Facts.Frontmatter; fm != nil {
		facts.Frontmatter = &skillsv1.Skill{Name: fm.Name, Description: fm.Description, AllowedTools: fm.AllowedTools,
			HasAllowedTools: fm.AllowedToolsSet, Frontmatter: frontmatterStruct(*fm), Problems: problemsProto(r.Facts.FrontmatterProblems),
			Files: facts.Files, Digest: facts.Digest}
	}
	out := &skillsv1.ReviewSkillPackageResponse{Facts: facts, Text: r.Text, FullReport: string(r.Full), Truncated: r.Truncated}
	for _, f := range r.Findings {
		out.Findings = append(out.Findings, &skillsv1.ReviewFinding{Level: levelProto(f.Level), Finding: findingProto(f.Finding)})
	}
	return out, nil
}

func levelProto(l string) skillsv1.ReviewLevel {
	switch l {
	case skillsreview.LevelBlocker:
		return skillsv1.ReviewLevel_REVIEW_LEVEL_BLOCKER
	case skillsreview.LevelError:
		return skillsv1.ReviewLevel_REVIEW_LEVEL_ERROR
	case skillsreview.LevelWarning:
		return skillsv1.ReviewLevel_REVIEW_LEVEL_WARNING
	}
	return skillsv1.ReviewLevel_REVIEW_LEVEL_INFO
}

// ReadSkillFile reads one file of an enabled skill, path-checked: the path
// must be a clean relative path of a file in the skill's manifest, so nothing
// outside the skill's folder can be named.
func (s *Server) ReadSkillFile(ctx context.Context, req *skillsv1.ReadSkillFileRequest) (*skillsv1.ReadSkillFileResponse, error) {
	u := userOf(ctx)
	name, p := req.GetName(), req.GetPath()
	if why := pathProblem(p); why != "" {
		return nil, badPath(codes.InvalidArgument, name, p, why)
	}
	sk, err := s.resolve(ctx, u, name)
	if err != nil {
		return nil, s.fail(ctx, "ReadSkillFile", err)
	}
	st, err := s.enableStates(ctx, u)
	if err != nil {
		return nil, s.fail(ctx, "ReadSkillFile", err)
	}
	if !st.enabled(sk) {
		return nil, disabled(name)
	}
	for _, f := range sk.Files {
		if f.Path == p {
			data, err := s.blobs.Get(f.Digest)
			if err != nil {
				return nil, s.fail(ctx, "ReadSkillFile", err)
			}
			return &skillsv1.ReadSkillFileResponse{Content: data, SkillDigest: sk.Digest, Category: categoryProto(sk.Category)}, nil
		}
	}
	return nil, badPath(codes.NotFound, name, p, "no such file in the skill")
}

// pathProblem returns why p is not a clean relative file path, or "".
func pathProblem(p string) string {
	switch {
	case p == "":
		return "required"
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return "must be relative to the skill folder"
	case strings.ContainsAny(p, "\\:\x00"):
		return "must not contain '\\', ':' or NUL"
	case path.Clean(p) != p:
		return "must be a clean path (no '.', '..', empty or trailing elements)"
	case p == ".." || strings.HasPrefix(p, "../"):
		return "escapes the skill folder"
	}
	return ""
}

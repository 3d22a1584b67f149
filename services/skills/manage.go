package skills

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/skills/skillsarchive"
	"github.com/toolplane/toolplane/services/skills/skillsscan"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

// agentAuthor is the history author of a ManageSkill change made by an
// agent's skill_manage call (docs/deerflow.md §4.14).
const agentAuthor = "agent"

// supportDirs are the folders write_file and remove_file may touch
// (docs/deerflow.md §4.14); SKILL.md changes go through create, edit and
// patch so that it is always validated as the skill's definition.
var supportDirs = []string{"references/", "templates/", "scripts/", "assets/"}

// Bounds of one ManageSkill request (checked before the handler runs).
const (
	maxManageContentBytes = 1 << 20 // content, find, replace
	maxExpectedCount      = 10000
)

// actionNames are the history action names of ManageSkill actions.
var actionNames = map[skillsv1.SkillAction]string{
	skillsv1.SkillAction_SKILL_ACTION_CREATE:      "create",
	skillsv1.SkillAction_SKILL_ACTION_EDIT:        "edit",
	skillsv1.SkillAction_SKILL_ACTION_PATCH:       "patch",
	skillsv1.SkillAction_SKILL_ACTION_WRITE_FILE:  "write_file",
	skillsv1.SkillAction_SKILL_ACTION_REMOVE_FILE: "remove_file",
	skillsv1.SkillAction_SKILL_ACTION_DELETE:      "delete",
}

// skillLocks serialises ManageSkill per (user, skill): the read, change,
// scan and write of one action never interleave with another on the same
// skill of the same user (docs/deerflow.md §4.14). Entries are reference
// counted and removed when unused, so the map holds only skills being
// changed.
type skillLocks struct {
	mu sync.Mutex
	m  map[string]*skillLock
}

type skillLock struct {
	mu   sync.Mutex
	refs int
}

func (l *skillLocks) lock(key string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*skillLock{}
	}
	e := l.m[key]
	if e == nil {
		e = &skillLock{}
		l.m[key] = e
	}
	e.refs++
	l.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

func evolutionDisabled() error {
	return statusErr(codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_EVOLUTION_DISABLED, nil,
		"skill evolution is off (skills.evolution.enabled: false); custom skills can be changed with InstallSkill and UpdateSkill")
}

func patchMismatch(name, file string, found, expected int) error {
	meta := map[string]string{"name": name, "path": file, "found": strconv.Itoa(found), "expected": strconv.Itoa(expected)}
	if found == 0 {
		return statusErr(codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_PATCH_MISMATCH, meta,
			"patch of %s in skill %q: the text to find does not occur", file, name)
	}
	return statusErr(codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_PATCH_MISMATCH, meta,
		"patch of %s in skill %q: the text to find occurs %d times, expected_count is %d", file, name, found, expected)
}

// supportPathProblem returns why p cannot be a support file of write_file or
// remove_file, or "".
func supportPathProblem(p string) string {
	if why := pathProblem(p); why != "" {
		return why
	}
	for _, d := range supportDirs {
		if strings.HasPrefix(p, d) && len(p) > len(d) {
			return ""
		}
	}
	return "must be a file under references/, templates/, scripts/ or assets/"
}

// ManageSkill implements the agent's skill_manage (docs/deerflow.md §4.14)
// on the user's custom skills: every change builds a new package from the
// current version, validates SKILL.md strictly, scans the staged package
// (files under scripts/ as executable) and stores it as one new version, or
// nothing. A blocked change of an existing skill is recorded
// (manage_refused).
func (s *Server) ManageSkill(ctx context.Context, req *skillsv1.ManageSkillRequest) (_ *skillsv1.ManageSkillResponse, err error) {
	act := actionNames[req.GetAction()]
	defer func() { s.metrics.write("manage_"+act, err) }()
	if !s.cfg.Evolution.Enabled {
		return nil, evolutionDisabled()
	}
	u := userOf(ctx)
	ev := skillsstore.HistoryEntry{Action: act, Author: u.key}
	// Only a service caller (the runtime) says which agent call this is; a
	// user's own call is recorded as the user's.
	if cc := auth.TrustedCallContext(ctx, req.GetCallContext()); cc != nil && cc.GetThreadId() != "" {
		ev.Author, ev.ThreadID = agentAuthor, cc.GetThreadId()
	}
	name := req.GetName()
	unlock := s.manageLocks.lock(u.key + "\x00" + name)
	defer unlock()
	var out *skillsv1.ManageSkillResponse
	run := func(ctx context.Context) error {
		var err error
		out, err = s.manage(ctx, u, req, ev)
		return err
	}
	// Replicas sharing a store serialise on the store as well.
	if ex, ok := s.store.(skillsstore.Exclusive); ok {
		err = ex.WithLock(ctx, "manage:"+u.key+"/"+name, run)
	} else {
		err = run(ctx)
	}
	if err != nil {
		return nil, s.fail(ctx, "ManageSkill", err)
	}
	s.log.InfoContext(ctx, "skill managed", "skill", name, "action", act, "user", u.key, "author", ev.Author, "thread", ev.ThreadID)
	return out, nil
}

func (s *Server) manage(ctx context.Context, u user, req *skillsv1.ManageSkillRequest, ev skillsstore.HistoryEntry) (*skillsv1.ManageSkillResponse, error) {
	name := req.GetName()
	if req.GetAction() == skillsv1.SkillAction_SKILL_ACTION_CREATE {
		return s.manageCreate(ctx, u, name, req.GetContent(), ev)
	}
	sk, err := s.resolve(ctx, u, name)
	if err != nil {
		return nil, err
	}
	if sk.Category != skillsstore.Custom || sk.Owner != u.key {
		return nil, readOnly(name, string(sk.Category))
	}
	if req.GetAction() == skillsv1.SkillAction_SKILL_ACTION_DELETE {
		if err := s.store.Delete(ctx, sk.ID); err != nil {
			return nil, err
		}
		if err := s.gc(ctx); err != nil {
			s.log.Warn("skills blob gc failed", "error", err)
		}
		return &skillsv1.ManageSkillResponse{Message: fmt.Sprintf("Deleted skill %s (it had %d versions).", name, sk.Version)}, nil
	}
	cur, err := s.load(sk.Name, sk.Files)
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(cur.Files)+1)
	for _, f := range cur.Files {
		files[f.Path] = f.Data
	}
	resp := &skillsv1.ManageSkillResponse{}
	switch req.GetAction() {
	case skillsv1.SkillAction_SKILL_ACTION_EDIT:
		files["SKILL.md"] = []byte(req.GetContent())
		resp.Message = "Replaced SKILL.md of skill " + name
	case skillsv1.SkillAction_SKILL_ACTION_PATCH:
		p := req.GetPath()
		if p == "" {
			p = "SKILL.md"
		}
		data, ok := files[p]
		if !ok {
			return nil, badPath(codes.NotFound, name, p, "no such file in the skill")
		}
		found := strings.Count(string(data), req.GetFind())
		n := 1
		if req.ExpectedCount != nil {
			n = int(req.GetExpectedCount())
			if found != n {
				return nil, patchMismatch(name, p, found, n)
			}
		} else if found == 0 {
			return nil, patchMismatch(name, p, 0, 1)
		}
		files[p] = []byte(strings.Replace(string(data), req.GetFind(), req.GetReplace(), n))
		resp.Replaced = int32(n)
		ev.FilePath = p
		resp.Message = fmt.Sprintf("Patched %s of skill %s (%d replacement(s))", p, name, n)
	case skillsv1.SkillAction_SKILL_ACTION_WRITE_FILE:
		p := req.GetPath()
		_, existed := files[p]
		files[p] = []byte(req.GetContent())
		ev.FilePath = p
		resp.Message = "Wrote " + p + " of skill " + name
		if existed {
			resp.Message = "Replaced " + p + " of skill " + name
		}
	case skillsv1.SkillAction_SKILL_ACTION_REMOVE_FILE:
		p := req.GetPath()
		if _, ok := files[p]; !ok {
			return nil, badPath(codes.NotFound, name, p, "no such file in the skill")
		}
		delete(files, p)
		ev.FilePath = p
		resp.Message = "Removed " + p + " of skill " + name
	}
	pkg, err := s.stagedPackage(name, files)
	if err != nil {
		return nil, err
	}
	_, rep, err := s.check(ctx, ev.Action, pkg, name)
	ev.ScanDecision, ev.Counts = decision(rep)
	if err != nil {
		var blocked *scanBlockedError
		if errors.As(err, &blocked) {
			refused := ev
			refused.Action, refused.Version, refused.Digest = "manage_refused", sk.Version, pkg.Digest()
			if rerr := s.store.Record(ctx, sk.ID, refused); rerr != nil {
				s.log.ErrorContext(ctx, "skills history write failed", "error", rerr)
			}
		}
		return nil, err
	}
	s.mu.Lock()
	sk, err = s.newVersion(ctx, sk, pkg, ev)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	st, err := s.enableStates(ctx, u)
	if err != nil {
		return nil, err
	}
	resp.Skill = s.skillProto(sk, st.enabled(sk), u)
	resp.Report = reportProto(rep)
	resp.Message += fmt.Sprintf(" (version %d, scan %s).", sk.Version, ev.ScanDecision)
	return resp, nil
}

// manageCreate creates a custom skill from its SKILL.md. The name must not
// be visible to the user in any category: an agent does not shadow a
// public or integration skill.
func (s *Server) manageCreate(ctx context.Context, u user, name, content string, ev skillsstore.HistoryEntry) (*skillsv1.ManageSkillResponse, error) {
	if sk, err := s.resolve(ctx, u, name); err == nil {
		return nil, statusErr(codes.AlreadyExists, skillsv1.ErrorReason_ERROR_REASON_SKILL_EXISTS,
			map[string]string{"name": name, "category": string(sk.Category)},
			"a %s skill named %q already exists; edit or patch it (custom skills only) or choose another name", sk.Category, name)
	} else if !isNotFound(err) {
		return nil, err
	}
	pkg, err := s.stagedPackage(name, map[string][]byte{"SKILL.md": []byte(content)})
	if err != nil {
		return nil, err
	}
	sk, rep, err := s.installAs(ctx, skillsstore.Custom, u.key, pkg, name, ev)
	if err != nil {
		return nil, err
	}
	return &skillsv1.ManageSkillResponse{Skill: s.skillProto(sk, true, u), Report: reportProto(rep),
		Message: fmt.Sprintf("Created skill %s (version %d, scan %s).", name, sk.Version, scanWord(rep))}, nil
}

func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}

// stagedPackage builds the package of a change in memory, with the
// configured limits; files under scripts/ are marked executable so the
// scanner treats them as programs whatever their name.
func (s *Server) stagedPackage(name string, files map[string][]byte) (*skillsarchive.Package, error) {
	exec := map[string]bool{}
	for p := range files {
		if strings.HasPrefix(p, "scripts/") {
			exec[p] = true
		}
	}
	pkg, err := skillsarchive.FromFiles(files, exec, s.cfg.limits())
	if err != nil {
		return nil, err
	}
	pkg.RootName = name
	return pkg, nil
}

func scanWord(rep skillsscan.Report) string {
	d, _ := decision(rep)
	return d
}

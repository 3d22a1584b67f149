package skills

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/skills/skillsarchive"
	"github.com/toolplane/toolplane/services/skills/skillsmd"
	"github.com/toolplane/toolplane/services/skills/skillsscan"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
	"github.com/toolplane/toolplane/skills/public"
)

// systemAuthor is the history author of shipped public skills.
const systemAuthor = "system"

// user is the acting user of a request.
type user struct {
	key    string // "tenant/subject"
	tenant string
	admin  bool
}

// userOf returns the effective principal of ctx (docs/architecture.md §5). Without
// an identity (never after the auth interceptor) it fails closed to an
// anonymous non-admin user.
func userOf(ctx context.Context) user {
	p := auth.EffectivePrincipal(ctx)
	if p == nil {
		return user{key: "default/anonymous", tenant: "default"}
	}
	t := tenantOf(p)
	return user{key: userKey(t, p.GetSubject()), tenant: t, admin: slices.Contains(p.GetRoles(), auth.AdminRole)}
}

// userKey is "tenant/subject" with '%' and '/' of the tenant escaped, so
// that the first '/' always ends the tenant and no two principals share a
// key (tenant "a/b" with subject "c" is not tenant "a" with subject "b/c";
// docs/architecture.md §5). Keys of tenants without '%' or '/' are
// unchanged.
func userKey(tenant, subject string) string {
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(tenant) + "/" + subject
}

func tenantOf(p *typev1.Principal) string { return auth.TenantOf(p) }

// precedence orders categories for shadowing: custom > integration > public.
func precedence(c skillsstore.Category) int {
	switch c {
	case skillsstore.Custom:
		return 3
	case skillsstore.Integration:
		return 2
	}
	return 1
}

// visible returns the skills the user sees, one per name (shadowing applied),
// sorted by name.
func (s *Server) visible(ctx context.Context, u user) ([]skillsstore.Skill, error) {
	all, err := s.store.List(ctx, u.key, u.tenant)
	if err != nil {
		return nil, err
	}
	byName := map[string]skillsstore.Skill{}
	for _, sk := range all {
		if cur, ok := byName[sk.Name]; !ok || precedence(sk.Category) > precedence(cur.Category) {
			byName[sk.Name] = sk
		}
	}
	out := make([]skillsstore.Skill, 0, len(byName))
	for _, sk := range byName {
		out = append(out, sk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// resolve returns the skill named name as the user sees it.
func (s *Server) resolve(ctx context.Context, u user, name string) (skillsstore.Skill, error) {
	for _, c := range []struct {
		cat   skillsstore.Category
		owner string
	}{{skillsstore.Custom, u.key}, {skillsstore.Integration, u.tenant}, {skillsstore.Public, ""}} {
		sk, err := s.store.Get(ctx, c.cat, c.owner, name)
		if err == nil {
			return sk, nil
		}
		if !errors.Is(err, skillsstore.ErrNotFound) {
			return sk, err
		}
	}
	return skillsstore.Skill{}, notFound(name)
}

// enableStates loads the global and the user's enable states.
type enableStates struct{ global, mine map[int64]bool }

func (s *Server) enableStates(ctx context.Context, u user) (enableStates, error) {
	g, err := s.store.EnableStates(ctx, "")
	if err != nil {
		return enableStates{}, err
	}
	m, err := s.store.EnableStates(ctx, u.key)
	return enableStates{global: g, mine: m}, err
}

// enabled: public skills use the global state, the others the user's
// (docs/deerflow.md §4.2); absent = enabled.
func (e enableStates) enabled(sk skillsstore.Skill) bool {
	states := e.mine
	if sk.Category == skillsstore.Public {
		states = e.global
	}
	if v, ok := states[sk.ID]; ok {
		return v
	}
	return true
}

// stateKey is the enable-state key a toggle of sk by u writes.
func stateKey(sk skillsstore.Skill, u user) string {
	if sk.Category == skillsstore.Public {
		return ""
	}
	return u.key
}

// doc returns the leniently parsed SKILL.md of sk (cached by blob digest).
func (s *Server) doc(sk skillsstore.Skill) (*parsedDoc, error) {
	for _, f := range sk.Files {
		if f.Path != "SKILL.md" {
			continue
		}
		if d, ok := s.docs.Get(f.Digest); ok {
			return d, nil
		}
		data, err := s.blobs.Get(f.Digest)
		if err != nil {
			return nil, err
		}
		doc, probs := skillsmd.ParseLenient(data)
		if doc == nil {
			doc = &skillsmd.Document{Positions: map[string]int{}}
			doc.Frontmatter.Name = sk.Name
			// Unreadable frontmatter: fail closed on tools.
			doc.Frontmatter.AllowedToolsSet = true
			doc.Frontmatter.AllowedTools = []string{}
		}
		if doc.Frontmatter.Name != "" && doc.Frontmatter.Name != sk.Name {
			probs = append(probs, skillsmd.Problem{Field: "name", Line: doc.Positions["name"], Column: 7,
				Message: fmt.Sprintf("%q differs from the installed name %q", doc.Frontmatter.Name, sk.Name)})
		}
		d := &parsedDoc{doc: doc, problems: probs}
		s.docs.Add(f.Digest, d)
		return d, nil
	}
	return nil, fmt.Errorf("skill %q has no SKILL.md", sk.Name)
}

// load reads a stored manifest back into a package.
func (s *Server) load(name string, files []skillsstore.FileRef) (*skillsarchive.Package, error) {
	pkg := &skillsarchive.Package{RootName: name}
	for _, f := range files {
		data, err := s.blobs.Get(f.Digest)
		if err != nil {
			return nil, err
		}
		pkg.Files = append(pkg.Files, skillsarchive.File{Path: f.Path, Data: data, Executable: f.Executable})
	}
	sort.Slice(pkg.Files, func(i, j int) bool { return pkg.Files[i].Path < pkg.Files[j].Path })
	return pkg, nil
}

// decision summarises a scan for the history.
func decision(rep skillsscan.Report) (string, map[string]int) {
	counts := map[string]int{}
	for sev, n := range rep.Counts {
		counts[string(sev)] = n
	}
	switch {
	case rep.Blocked:
		return "blocked", counts
	case len(rep.Findings) > 0:
		return "findings", counts
	}
	return "clean", counts
}

// check validates a package strictly for install or edit (folder = the
// skill's folder name, "" to skip the name equality) and scans it.
func (s *Server) check(ctx context.Context, op string, pkg *skillsarchive.Package, folder string) (*skillsmd.Document, skillsscan.Report, error) {
	md := pkg.File("SKILL.md")
	if md == nil {
		return nil, skillsscan.Report{}, &skillsarchive.RefusalError{Reason: skillsarchive.ReasonMissingSkillMD, Detail: "no SKILL.md at the skill root"}
	}
	doc, err := skillsmd.ParseStrict(md.Data, folder)
	if err != nil {
		return nil, skillsscan.Report{}, err
	}
	rep := s.scan(ctx, pkg)
	if rep.Blocked {
		return doc, rep, &scanBlockedError{op: op, report: rep}
	}
	return doc, rep, nil
}

// scan runs the scanner bounded by skills.scan_timeout (an unfinished scan
// blocks: skillsscan.IncompleteRuleID).
func (s *Server) scan(ctx context.Context, pkg *skillsarchive.Package) skillsscan.Report {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ScanTimeout)
	defer cancel()
	start := time.Now()
	rep := s.rules.ScanContext(ctx, pkg)
	s.metrics.scanned(start, rep)
	return rep
}

// putBlobs stores the package's files and returns the manifest and the
// digests this call created (to undo on failure). Caller holds s.mu.
func (s *Server) putBlobs(pkg *skillsarchive.Package) (skillsstore.Content, []string, error) {
	c := skillsstore.Content{Digest: pkg.Digest()}
	var created []string
	for _, f := range pkg.Files {
		d, isNew, err := s.blobs.Put(f.Data)
		if err != nil {
			s.undoBlobs(created)
			return c, nil, err
		}
		if isNew {
			created = append(created, d)
		}
		c.Files = append(c.Files, skillsstore.FileRef{Path: f.Path, Digest: d, Size: int64(len(f.Data)), Executable: f.Executable})
	}
	return c, created, nil
}

func (s *Server) undoBlobs(created []string) {
	for _, d := range created {
		if err := s.blobs.Delete(d); err != nil {
			s.log.Warn("skills blob cleanup failed", "digest", d, "error", err)
		}
	}
}

// install validates, scans and stores a new skill atomically: on any failure
// nothing is left (no row, no blob written by this call).
func (s *Server) install(ctx context.Context, cat skillsstore.Category, owner, author string, pkg *skillsarchive.Package, folder string) (skillsstore.Skill, skillsscan.Report, error) {
	return s.installAs(ctx, cat, owner, pkg, folder, skillsstore.HistoryEntry{Action: "install", Author: author})
}

// installAs is install recording ev (its scan decision and counts filled
// in) as the first history event.
func (s *Server) installAs(ctx context.Context, cat skillsstore.Category, owner string, pkg *skillsarchive.Package, folder string, ev skillsstore.HistoryEntry) (skillsstore.Skill, skillsscan.Report, error) {
	doc, rep, err := s.check(ctx, ev.Action, pkg, folder)
	if err != nil {
		return skillsstore.Skill{}, rep, err
	}
	name := doc.Frontmatter.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.store.Get(ctx, cat, owner, name); err == nil {
		return skillsstore.Skill{}, rep, exists(name)
	} else if !errors.Is(err, skillsstore.ErrNotFound) {
		return skillsstore.Skill{}, rep, err
	}
	content, created, err := s.putBlobs(pkg)
	if err != nil {
		return skillsstore.Skill{}, rep, err
	}
	ev.ScanDecision, ev.Counts = decision(rep)
	sk, err := s.store.Create(ctx, cat, owner, name, content, ev)
	if err != nil {
		s.undoBlobs(created)
		if errors.Is(err, skillsstore.ErrAlreadyExists) {
			return sk, rep, exists(name)
		}
		return sk, rep, err
	}
	return sk, rep, nil
}

// newVersion stores pkg as the next version of sk (edit or rollback).
// Caller holds s.mu.
func (s *Server) newVersion(ctx context.Context, sk skillsstore.Skill, pkg *skillsarchive.Package, ev skillsstore.HistoryEntry) (skillsstore.Skill, error) {
	content, created, err := s.putBlobs(pkg)
	if err != nil {
		return sk, err
	}
	out, err := s.store.AddVersion(ctx, sk.ID, content, ev)
	if err != nil {
		s.undoBlobs(created)
		return sk, err
	}
	return out, nil
}

// gc removes blobs no stored version references.
func (s *Server) gc(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs, err := s.store.ReferencedDigests(ctx)
	if err != nil {
		return err
	}
	n, err := s.blobs.GC(refs)
	if n > 0 {
		s.log.Info("skills blobs collected", "count", n)
	}
	return err
}

// publicPackages reads the shipped public skills (skills/public).
func publicPackages(lim skillsarchive.Limits) (map[string]*skillsarchive.Package, error) {
	ents, err := fs.ReadDir(public.FS, ".")
	if err != nil {
		return nil, err
	}
	out := map[string]*skillsarchive.Package{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		files := map[string][]byte{}
		err := fs.WalkDir(public.FS, e.Name(), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := fs.ReadFile(public.FS, p)
			rel, _ := relPath(e.Name(), p)
			files[rel] = data
			return err
		})
		if err != nil {
			return nil, err
		}
		pkg, err := skillsarchive.FromFiles(files, nil, lim)
		if err != nil {
			return nil, fmt.Errorf("public skill %s: %w", e.Name(), err)
		}
		pkg.RootName = e.Name()
		out[e.Name()] = pkg
	}
	return out, nil
}

func relPath(root, p string) (string, bool) {
	if len(p) > len(root)+1 && p[:len(root)+1] == root+"/" {
		return path.Clean(p[len(root)+1:]), true
	}
	return p, false
}

// syncPublic makes the stored public skills equal the shipped ones: new
// skills are added, changed ones get a new version (action "upgrade"),
// skills no longer shipped are removed. A shipped skill that fails strict
// validation or has a CRITICAL finding is skipped with an error log.
func (s *Server) syncPublic(ctx context.Context) error {
	// Replicas sharing a store start together: one syncs at a time, the
	// others then find the skills in place.
	if ex, ok := s.store.(skillsstore.Exclusive); ok {
		return ex.WithLock(ctx, "public_sync", s.syncPublicOnce)
	}
	return s.syncPublicOnce(ctx)
}

func (s *Server) syncPublicOnce(ctx context.Context) error {
	pkgs, err := publicPackages(s.cfg.limits())
	if err != nil {
		return fmt.Errorf("skills: public skills: %w", err)
	}
	stored, err := s.store.ListCategory(ctx, skillsstore.Public)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sk := range stored {
		if sk.Category == skillsstore.Public && pkgs[sk.Name] == nil {
			if err := s.store.Delete(ctx, sk.ID); err != nil {
				return err
			}
		}
	}
	for name, pkg := range pkgs {
		_, rep, err := s.check(ctx, "public skill load", pkg, name)
		if err != nil {
			s.log.Error("shipped public skill refused", "skill", name, "error", err)
			continue
		}
		dec, counts := decision(rep)
		ev := skillsstore.HistoryEntry{Author: systemAuthor, ScanDecision: dec, Counts: counts}
		cur, err := s.store.Get(ctx, skillsstore.Public, "", name)
		switch {
		case errors.Is(err, skillsstore.ErrNotFound):
			content, created, err := s.putBlobs(pkg)
			if err != nil {
				return err
			}
			ev.Action = "install"
			if _, err := s.store.Create(ctx, skillsstore.Public, "", name, content, ev); err != nil {
				s.undoBlobs(created)
				return err
			}
		case err != nil:
			return err
		case cur.Digest != pkg.Digest():
			ev.Action = "upgrade"
			if _, err := s.newVersion(ctx, cur, pkg, ev); err != nil {
				return err
			}
		}
	}
	return nil
}

package skills

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/svckit"
	sat "github.com/toolplane/toolplane/services/skills/skillsarchive/skillsarchivetest"
	"github.com/toolplane/toolplane/services/skills/skillsscan"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
	"github.com/toolplane/toolplane/skills/public"
)

func newServer(t testing.TB, dir string) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := New(context.Background(), Config{}, svckit.Env{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxFor(subject string, admin bool) context.Context {
	p := &typev1.Principal{Subject: subject, Tenant: "default", Roles: []string{"user"}}
	if admin {
		p.Roles = append(p.Roles, auth.AdminRole)
	}
	return auth.WithIdentity(context.Background(), auth.Identity{Principal: p, Kind: auth.KindUser})
}

// serviceFor is the runtime's service credential acting for subject.
func serviceFor(subject string) context.Context {
	return auth.WithIdentity(context.Background(), auth.Identity{
		Principal: &typev1.Principal{Subject: "runtime", Tenant: "default"}, Kind: auth.KindService,
		ActingFor: &typev1.Principal{Subject: subject, Tenant: "default", Roles: []string{"user"}}})
}

func info(t *testing.T, err error) (codes.Code, *errdetails.ErrorInfo) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a status error: %v", err)
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), ei
		}
	}
	return st.Code(), nil
}

func wantErr(t *testing.T, err error, code codes.Code, reason skillsv1.ErrorReason) *errdetails.ErrorInfo {
	t.Helper()
	if err == nil {
		t.Fatalf("expected %s %s, got success", code, reason)
	}
	c, ei := info(t, err)
	if c != code || ei == nil || ei.Reason != reason.String() {
		t.Fatalf("got %v (%v), want %s %s", c, err, code, reason)
	}
	return ei
}

func names(sks []*skillsv1.Skill) []string {
	var out []string
	for _, s := range sks {
		out = append(out, s.GetName()+":"+strings.TrimPrefix(s.GetCategory().String(), "SKILL_CATEGORY_"))
	}
	return out
}

// publicFiles returns the shipped files of a public skill.
func publicFiles(t *testing.T, name string) []*skillsv1.SkillFile {
	t.Helper()
	var out []*skillsv1.SkillFile
	err := fs.WalkDir(public.FS, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(public.FS, p)
		out = append(out, &skillsv1.SkillFile{Path: strings.TrimPrefix(p, name+"/"), Content: data})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func zipOf(name string, files []*skillsv1.SkillFile) []byte {
	var es []sat.Entry
	for _, f := range files {
		es = append(es, sat.Entry{Name: name + "/" + f.GetPath(), Data: f.GetContent()})
	}
	return sat.Zip(es...)
}

func skillMD(name, desc, extra, body string) []byte {
	return []byte("---\nname: " + name + "\ndescription: " + desc + "\n" + extra + "---\n" + body + "\n")
}

func TestPublicSkillsLoaded(t *testing.T) {
	s := newServer(t, "")
	resp, err := s.ListSkills(ctxFor("alice", false), &skillsv1.ListSkillsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := names(resp.GetSkills())
	want := []string{"casbin-policy-writer:PUBLIC", "mcp-config-review:PUBLIC", "tool-call-triage:PUBLIC", "tool-search-guide:PUBLIC"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v", got)
	}
	for _, sk := range resp.GetSkills() {
		if !sk.GetEnabled() || sk.GetEditable() || sk.GetDescription() == "" || len(sk.GetProblems()) != 0 ||
			sk.GetPath() != "/mnt/skills/public/"+sk.GetName() || sk.GetVersion() != 1 || len(sk.GetDigest()) != 64 {
			t.Fatalf("skill %+v", sk)
		}
	}
	mcp := resp.GetSkills()[1]
	if !mcp.GetHasAllowedTools() || strings.Join(mcp.GetAllowedTools(), ",") != "read_file,ls,tool_search" ||
		mcp.GetFrontmatter().GetFields()["license"].GetStringValue() != "Apache-2.0" {
		t.Fatalf("mcp-config-review: %+v", mcp)
	}
	// Restart: nothing duplicated, nothing re-versioned.
	dir := t.TempDir()
	s1 := newServer(t, dir)
	s1.Close()
	s2 := newServer(t, dir)
	r2, _ := s2.ListSkills(ctxFor("alice", false), &skillsv1.ListSkillsRequest{})
	if len(r2.GetSkills()) != 4 || r2.GetSkills()[0].GetVersion() != 1 {
		t.Fatalf("after restart: %v", names(r2.GetSkills()))
	}
}

// blobState lists every file under the data dir (except the sqlite files).
func blobState(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(filepath.Base(p), "skills.db") {
			out = append(out, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func TestHostileCorpusInstallRefusedNothingLeft(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	ctx := ctxFor("mallory", false)
	before := blobState(t, dir)
	for _, c := range sat.Hostile() {
		t.Run(c.Name, func(t *testing.T) {
			req := &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{Archive: c.Data}}
			if err := s.Validate("/toolplane.skills.v1.SkillsService/InstallSkill", req); err != nil {
				t.Fatalf("validation refused a corpus case: %v", err)
			}
			_, err := s.InstallSkill(ctx, req)
			if rule, ok := strings.CutPrefix(c.Reason, "scan:"); ok {
				ei := wantErr(t, err, codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_SCAN_BLOCKED)
				if !strings.Contains(ei.Metadata["rule_ids"], rule) {
					t.Fatalf("rule_ids %q lack %s", ei.Metadata["rule_ids"], rule)
				}
				return
			}
			ei := wantErr(t, err, codes.InvalidArgument, skillsv1.ErrorReason_ERROR_REASON_ARCHIVE_REFUSED)
			if ei.Metadata["code"] != "archive."+c.Reason {
				t.Fatalf("code %q, want archive.%s", ei.Metadata["code"], c.Reason)
			}
		})
	}
	if after := blobState(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("files left on disk:\nbefore %v\nafter  %v", before, after)
	}
	resp, _ := s.ListSkills(ctx, &skillsv1.ListSkillsRequest{Category: skillsv1.SkillCategory_SKILL_CATEGORY_CUSTOM})
	if len(resp.GetSkills()) != 0 {
		t.Fatalf("custom skills installed: %v", names(resp.GetSkills()))
	}
}

// TestPublicExampleLifecycle: a public example skill installed as a custom
// skill (shadowing the public one for that user only), listed, described,
// read, disabled, re-enabled (re-scanned), edited, rolled back, deleted.
func TestPublicExampleLifecycle(t *testing.T) {
	s := newServer(t, "")
	ents, _ := fs.ReadDir(public.FS, ".")
	n := 0
	for _, e := range ents {
		if e.IsDir() {
			n++
			t.Run(e.Name(), func(t *testing.T) { exampleLifecycle(t, s, e.Name()) })
		}
	}
	if n < 3 {
		t.Fatalf("%d public skills", n)
	}
}

func exampleLifecycle(t *testing.T, s *Server, name string) {
	alice, bob := ctxFor("alice", false), ctxFor("bob", false)
	files := publicFiles(t, name)
	inst, err := s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{Archive: zipOf(name, files)}})
	if err != nil {
		t.Fatal(err)
	}
	if inst.GetSkill().GetCategory() != skillsv1.SkillCategory_SKILL_CATEGORY_CUSTOM || !inst.GetSkill().GetEditable() ||
		inst.GetReport().GetBlocked() || inst.GetSkill().GetOwner() != "default/alice" {
		t.Fatalf("install: %+v", inst)
	}
	// Listed: alice sees her custom copy, bob the public one.
	la, _ := s.ListSkills(alice, &skillsv1.ListSkillsRequest{})
	lb, _ := s.ListSkills(bob, &skillsv1.ListSkillsRequest{})
	if !strings.Contains(strings.Join(names(la.GetSkills()), ","), name+":CUSTOM") ||
		!strings.Contains(strings.Join(names(lb.GetSkills()), ","), name+":PUBLIC") || len(la.GetSkills()) != 4 {
		t.Fatalf("alice %v bob %v", names(la.GetSkills()), names(lb.GetSkills()))
	}
	// Described.
	d, err := s.DescribeSkills(alice, &skillsv1.DescribeSkillsRequest{Query: "select:" + name})
	if err != nil || len(d.GetMatches()) != 1 || d.GetMatches()[0].GetSkill().GetCategory() != skillsv1.SkillCategory_SKILL_CATEGORY_CUSTOM {
		t.Fatalf("describe: %v %+v", err, d)
	}
	// Read.
	rd, err := s.ReadSkillFile(alice, &skillsv1.ReadSkillFileRequest{Name: name, Path: "SKILL.md"})
	if err != nil || !strings.Contains(string(rd.GetContent()), "name: "+name) || rd.GetSkillDigest() != inst.GetSkill().GetDigest() {
		t.Fatalf("read: %v", err)
	}
	// Disabled, then re-enabled with a scan report.
	off := false
	up, err := s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: name, Skill: &skillsv1.SkillUpdate{Enabled: &off}})
	if err != nil || up.GetSkill().GetEnabled() {
		t.Fatalf("disable: %v %+v", err, up)
	}
	_, err = s.ReadSkillFile(alice, &skillsv1.ReadSkillFileRequest{Name: name, Path: "SKILL.md"})
	wantErr(t, err, codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_SKILL_DISABLED)
	if d, _ := s.DescribeSkills(alice, &skillsv1.DescribeSkillsRequest{Query: "select:" + name}); len(d.GetMatches()) != 0 {
		t.Fatal("disabled skill described")
	}
	on := true
	up, err = s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: name, Skill: &skillsv1.SkillUpdate{Enabled: &on}})
	if err != nil || !up.GetSkill().GetEnabled() || up.GetReport() == nil || up.GetReport().GetRulesVersion() == "" {
		t.Fatalf("enable: %v %+v", err, up)
	}
	// Edited.
	edited := []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD(name, "Edited description for the tool search guide.", "", "# Edited")}}
	up, err = s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: name, Skill: &skillsv1.SkillUpdate{Files: edited}})
	if err != nil || up.GetSkill().GetVersion() != 2 || up.GetSkill().GetDescription() != "Edited description for the tool search guide." ||
		len(up.GetSkill().GetFiles()) != 1 {
		t.Fatalf("edit: %v %+v", err, up)
	}
	// Rolled back to version 1.
	rb, err := s.RollbackSkill(alice, &skillsv1.RollbackSkillRequest{Name: name, Version: 1})
	if err != nil || rb.GetSkill().GetVersion() != 3 || rb.GetSkill().GetDigest() != inst.GetSkill().GetDigest() {
		t.Fatalf("rollback: %v %+v", err, rb)
	}
	h, err := s.ListSkillHistory(alice, &skillsv1.ListSkillHistoryRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range h.GetEntries() {
		actions = append(actions, e.GetAction())
		if e.GetAuthor() != "default/alice" || e.GetTime() == nil {
			t.Fatalf("entry %+v", e)
		}
	}
	if strings.Join(actions, ",") != "rollback,edit,enable,disable,install" || h.GetEntries()[0].GetScanDecision() != "clean" {
		t.Fatalf("history %v", actions)
	}
	// Deleted: alice sees the public skill again; blobs of her versions are collected.
	if _, err := s.DeleteSkill(alice, &skillsv1.DeleteSkillRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	g, err := s.GetSkill(alice, &skillsv1.GetSkillRequest{Name: name})
	if err != nil || g.GetSkill().GetCategory() != skillsv1.SkillCategory_SKILL_CATEGORY_PUBLIC {
		t.Fatalf("after delete: %v %+v", err, g)
	}
	_, err = s.DeleteSkill(alice, &skillsv1.DeleteSkillRequest{Name: name})
	wantErr(t, err, codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_READ_ONLY)
	refs, _ := s.store.ReferencedDigests(context.Background())
	all, _ := s.blobs.List()
	if len(all) != len(refs) {
		t.Fatalf("blobs %d, referenced %d", len(all), len(refs))
	}
}

func TestEnableStatesIndependent(t *testing.T) {
	s := newServer(t, "")
	alice, bob, admin := ctxFor("alice", false), ctxFor("bob", false), ctxFor("root", true)
	for _, ctx := range []context.Context{alice, bob} {
		_, err := s.InstallSkill(ctx, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
			Name: "notes", Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("notes", "Personal notes skill.", "", "x")}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	off := false
	if _, err := s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "notes", Skill: &skillsv1.SkillUpdate{Enabled: &off}}); err != nil {
		t.Fatal(err)
	}
	ga, _ := s.GetSkill(alice, &skillsv1.GetSkillRequest{Name: "notes"})
	gb, _ := s.GetSkill(bob, &skillsv1.GetSkillRequest{Name: "notes"})
	if ga.GetSkill().GetEnabled() || !gb.GetSkill().GetEnabled() || ga.GetSkill().GetDigest() != gb.GetSkill().GetDigest() {
		t.Fatalf("alice %v bob %v", ga.GetSkill().GetEnabled(), gb.GetSkill().GetEnabled())
	}
	// Public skills: global state, admin only.
	_, err := s.UpdateSkill(bob, &skillsv1.UpdateSkillRequest{Name: "tool-call-triage", Skill: &skillsv1.SkillUpdate{Enabled: &off}})
	wantErr(t, err, codes.PermissionDenied, skillsv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED)
	if _, err := s.UpdateSkill(admin, &skillsv1.UpdateSkillRequest{Name: "tool-call-triage", Skill: &skillsv1.SkillUpdate{Enabled: &off}}); err != nil {
		t.Fatal(err)
	}
	for _, ctx := range []context.Context{alice, bob} {
		l, _ := s.ListSkills(ctx, &skillsv1.ListSkillsRequest{EnabledOnly: true})
		for _, sk := range l.GetSkills() {
			if sk.GetName() == "tool-call-triage" {
				t.Fatal("globally disabled public skill listed as enabled")
			}
		}
	}
	// Integration: admin installs, users toggle independently, nobody edits.
	_, err = s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Category: skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION,
		Source: &skillsv1.InstallSkillRequest_Archive{Archive: sat.Good()}})
	wantErr(t, err, codes.PermissionDenied, skillsv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED)
	in, err := s.InstallSkill(admin, &skillsv1.InstallSkillRequest{Category: skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION,
		Source: &skillsv1.InstallSkillRequest_Archive{Archive: sat.Good()}})
	if err != nil || in.GetSkill().GetCategory() != skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION || in.GetSkill().GetEditable() {
		t.Fatalf("integration: %v %+v", err, in)
	}
	if _, err := s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "demo-skill", Skill: &skillsv1.SkillUpdate{Enabled: &off}}); err != nil {
		t.Fatal(err)
	}
	gb2, _ := s.GetSkill(bob, &skillsv1.GetSkillRequest{Name: "demo-skill"})
	if !gb2.GetSkill().GetEnabled() {
		t.Fatal("alice's integration toggle leaked to bob")
	}
	// Integration skills belong to the installing admin's tenant.
	other := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindUser,
		Principal: &typev1.Principal{Subject: "alice", Tenant: "globex", Roles: []string{"user"}}})
	_, err = s.GetSkill(other, &skillsv1.GetSkillRequest{Name: "demo-skill"})
	wantErr(t, err, codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_SKILL_NOT_FOUND)
	// ... and globex's alice is not default's alice.
	_, err = s.GetSkill(other, &skillsv1.GetSkillRequest{Name: "notes"})
	wantErr(t, err, codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_SKILL_NOT_FOUND)
	if g, err := s.GetSkill(other, &skillsv1.GetSkillRequest{Name: "tool-call-triage"}); err != nil || g.GetSkill().GetEnabled() {
		t.Fatalf("public skills are global: %v", err)
	}
	_, err = s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "demo-skill", Skill: &skillsv1.SkillUpdate{Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("demo-skill", "d", "", "")}}}})
	wantErr(t, err, codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_READ_ONLY)
	_, err = s.InstallSkill(admin, &skillsv1.InstallSkillRequest{Category: skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION,
		Source: &skillsv1.InstallSkillRequest_Archive{Archive: sat.Good()}})
	wantErr(t, err, codes.AlreadyExists, skillsv1.ErrorReason_ERROR_REASON_SKILL_EXISTS)
}

// strictRules returns the default rules plus a CRITICAL rule for "MAGIC-TOKEN".
func strictRules(t *testing.T) *skillsscan.Ruleset {
	t.Helper()
	extra := `
  - id: test-magic-token
    family: test
    severity: CRITICAL
    pattern: 'MAGIC-TOKEN'
    message: Test rule.
    remediation: Remove it.
    examples: {positive: [MAGIC-TOKEN], negative: [magic]}
`
	rs, err := skillsscan.Load(append(skillsscan.DefaultRulesYAML(), []byte(extra)...))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestEnableAndRollbackRescan(t *testing.T) {
	s := newServer(t, "")
	alice := ctxFor("alice", false)
	install := func(body string) {
		_, err := s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
			Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("magic", "Uses a token.", "", body)}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	install("MAGIC-TOKEN v1")
	_, err := s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "magic", Skill: &skillsv1.SkillUpdate{
		Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("magic", "Uses a token.", "", "clean v2")}}}})
	if err != nil {
		t.Fatal(err)
	}
	off, on := false, true
	if _, err := s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "magic", Skill: &skillsv1.SkillUpdate{Enabled: &off}}); err != nil {
		t.Fatal(err)
	}
	// The rules change: v1 content is now CRITICAL.
	s.rules = strictRules(t)
	_, err = s.RollbackSkill(alice, &skillsv1.RollbackSkillRequest{Name: "magic", Version: 1})
	ei := wantErr(t, err, codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_SCAN_BLOCKED)
	if ei.Metadata["rule_ids"] != "test-magic-token" {
		t.Fatalf("meta %v", ei.Metadata)
	}
	g, _ := s.GetSkill(alice, &skillsv1.GetSkillRequest{Name: "magic"})
	if g.GetSkill().GetVersion() != 2 {
		t.Fatalf("blocked rollback changed the version: %d", g.GetSkill().GetVersion())
	}
	h, _ := s.ListSkillHistory(alice, &skillsv1.ListSkillHistoryRequest{Name: "magic"})
	if top := h.GetEntries()[0]; top.GetAction() != "rollback_refused" || top.GetVersion() != 1 || top.GetScanDecision() != "blocked" || top.GetFindingCounts()["CRITICAL"] != 1 {
		t.Fatalf("history top %+v", top)
	}
	// Enabling re-scans: clean v2 enables fine ...
	if _, err := s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "magic", Skill: &skillsv1.SkillUpdate{Enabled: &on}}); err != nil {
		t.Fatal(err)
	}
	// ... but a skill installed under the old rules with now-CRITICAL content does not.
	s.rules = skillsscan.Default()
	_, err = s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
		Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("magic-two", "Uses a token.", "", "MAGIC-TOKEN")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "magic-two", Skill: &skillsv1.SkillUpdate{Enabled: &off}})
	s.rules = strictRules(t)
	_, err = s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "magic-two", Skill: &skillsv1.SkillUpdate{Enabled: &on}})
	wantErr(t, err, codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_SCAN_BLOCKED)
	g, _ = s.GetSkill(alice, &skillsv1.GetSkillRequest{Name: "magic-two"})
	h, _ = s.ListSkillHistory(alice, &skillsv1.ListSkillHistoryRequest{Name: "magic-two"})
	if g.GetSkill().GetEnabled() || h.GetEntries()[0].GetAction() != "enable_refused" {
		t.Fatalf("enabled=%v history %v", g.GetSkill().GetEnabled(), h.GetEntries()[0])
	}
	// Edits are scanned too.
	_, err = s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "magic", Skill: &skillsv1.SkillUpdate{
		Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("magic", "Uses a token.", "", "MAGIC-TOKEN again")}}}})
	wantErr(t, err, codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_SCAN_BLOCKED)
}

func TestValidationErrors(t *testing.T) {
	s := newServer(t, "")
	alice := ctxFor("alice", false)
	inline := func(name string, files ...*skillsv1.SkillFile) *skillsv1.InstallSkillRequest {
		return &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{Name: name, Files: files}}}
	}
	// Unquoted ": " in description: field, line and column in ErrorInfo, fix in the message.
	_, err := s.InstallSkill(alice, inline("x", &skillsv1.SkillFile{Path: "SKILL.md", Content: []byte("---\nname: x\ndescription: Use when: needed\n---\n")}))
	ei := wantErr(t, err, codes.InvalidArgument, skillsv1.ErrorReason_ERROR_REASON_INVALID_FRONTMATTER)
	if ei.Metadata["field"] != "description" || ei.Metadata["line"] != "3" || ei.Metadata["column"] != "22" || !strings.Contains(err.Error(), "double quotes") {
		t.Fatalf("meta %v err %v", ei.Metadata, err)
	}
	// Folder name must equal the frontmatter name.
	_, err = s.InstallSkill(alice, inline("other", &skillsv1.SkillFile{Path: "SKILL.md", Content: skillMD("x", "d", "", "")}))
	ei = wantErr(t, err, codes.InvalidArgument, skillsv1.ErrorReason_ERROR_REASON_INVALID_FRONTMATTER)
	if ei.Metadata["field"] != "name" {
		t.Fatalf("meta %v", ei.Metadata)
	}
	// Custom name clash.
	if _, err := s.InstallSkill(alice, inline("x", &skillsv1.SkillFile{Path: "SKILL.md", Content: skillMD("x", "d", "", "")})); err != nil {
		t.Fatal(err)
	}
	_, err = s.InstallSkill(alice, inline("x", &skillsv1.SkillFile{Path: "SKILL.md", Content: skillMD("x", "d", "", "")}))
	wantErr(t, err, codes.AlreadyExists, skillsv1.ErrorReason_ERROR_REASON_SKILL_EXISTS)
	// Duplicate inline paths.
	_, err = s.InstallSkill(alice, inline("y", &skillsv1.SkillFile{Path: "SKILL.md", Content: skillMD("y", "d", "", "")}, &skillsv1.SkillFile{Path: "SKILL.md"}))
	wantErr(t, err, codes.InvalidArgument, skillsv1.ErrorReason_ERROR_REASON_ARCHIVE_REFUSED)
	// Editing a public skill.
	_, err = s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "tool-search-guide", Skill: &skillsv1.SkillUpdate{Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("tool-search-guide", "d", "", "")}}}})
	wantErr(t, err, codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_READ_ONLY)
	// Not found.
	_, err = s.GetSkill(alice, &skillsv1.GetSkillRequest{Name: "nope"})
	wantErr(t, err, codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_SKILL_NOT_FOUND)
	_, err = s.RollbackSkill(alice, &skillsv1.RollbackSkillRequest{Name: "x", Version: 7})
	wantErr(t, err, codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_SKILL_NOT_FOUND)

	// Validate (interceptor side).
	const m = "/toolplane.skills.v1.SkillsService/"
	for _, c := range []struct {
		method string
		req    proto.Message
		field  string
	}{
		{"GetSkill", &skillsv1.GetSkillRequest{Name: "Bad Name"}, "name:"},
		{"InstallSkill", &skillsv1.InstallSkillRequest{}, "source:"},
		{"InstallSkill", &skillsv1.InstallSkillRequest{Category: skillsv1.SkillCategory_SKILL_CATEGORY_PUBLIC, Source: &skillsv1.InstallSkillRequest_Archive{Archive: []byte("x")}}, "category:"},
		{"InstallSkill", &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{Archive: make([]byte, 50<<20+1)}}, "archive:"},
		{"UpdateSkill", &skillsv1.UpdateSkillRequest{Name: "x", Skill: &skillsv1.SkillUpdate{}}, "skill:"},
		{"RollbackSkill", &skillsv1.RollbackSkillRequest{Name: "x"}, "version:"},
		{"DescribeSkills", &skillsv1.DescribeSkillsRequest{Query: "  "}, "query:"},
		{"ResolveSkillPolicy", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: []*skillsv1.ActiveSkill{{Name: "../x"}}}, "active_skills[0].name:"},
		{"ResolveSkillPolicy", &skillsv1.ResolveSkillPolicyRequest{AlwaysAvailable: []string{" "}}, "always_available[0]:"},
		{"ScanSkill", &skillsv1.ScanSkillRequest{Format: 9, Source: &skillsv1.ScanSkillRequest_Name{Name: "x"}}, "format:"},
		{"ReviewSkillPackage", &skillsv1.ReviewSkillPackageRequest{}, "source:"},
	} {
		err := s.Validate(m+c.method, c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.field) {
			t.Errorf("%s %v: %v", c.method, c.req, err)
		}
	}
	if err := s.Validate(m+"GetSkill", &skillsv1.GetSkillRequest{Name: "ok-name"}); err != nil {
		t.Fatal(err)
	}
	// Every RPC has a class.
	for _, md := range skillsv1.SkillsService_ServiceDesc.Methods {
		if _, ok := s.Classes()[m+md.MethodName]; !ok {
			t.Errorf("no class for %s", md.MethodName)
		}
	}
}

func TestReadSkillFilePaths(t *testing.T) {
	s := newServer(t, "")
	alice := ctxFor("alice", false)
	for _, p := range []string{"../../etc/passwd", "/etc/passwd", "references/../SKILL.md", "./SKILL.md", "a\\b", "C:x"} {
		req := &skillsv1.ReadSkillFileRequest{Name: "mcp-config-review", Path: p}
		wantErr(t, s.Validate("/toolplane.skills.v1.SkillsService/ReadSkillFile", req), codes.InvalidArgument, skillsv1.ErrorReason_ERROR_REASON_BAD_PATH)
		_, err := s.ReadSkillFile(alice, req)
		wantErr(t, err, codes.InvalidArgument, skillsv1.ErrorReason_ERROR_REASON_BAD_PATH)
	}
	_, err := s.ReadSkillFile(alice, &skillsv1.ReadSkillFileRequest{Name: "mcp-config-review", Path: "references/missing.md"})
	wantErr(t, err, codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_BAD_PATH)
	r, err := s.ReadSkillFile(alice, &skillsv1.ReadSkillFileRequest{Name: "mcp-config-review", Path: "references/checklist.md"})
	if err != nil || !strings.Contains(string(r.GetContent()), "checklist") || r.GetCategory() != skillsv1.SkillCategory_SKILL_CATEGORY_PUBLIC {
		t.Fatalf("%v", err)
	}
}

func TestResolveSkillPolicy(t *testing.T) {
	s := newServer(t, "")
	alice := serviceFor("alice")
	admin := ctxFor("root", true)
	for _, c := range []struct{ name, extra string }{
		{"no-tools", "allowed-tools: []\n"},
		{"writer", "allowed-tools: [write_file, read_file]\n"},
		{"plain", ""},
	} {
		_, err := s.InstallSkill(ctxFor("alice", false), &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
			Name: c.name, Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD(c.name, "Skill "+c.name+".", c.extra, "")}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	off := false
	if _, err := s.UpdateSkill(admin, &skillsv1.UpdateSkillRequest{Name: "tool-call-triage", Skill: &skillsv1.SkillUpdate{Enabled: &off}}); err != nil {
		t.Fatal(err)
	}
	always := []string{"tool_search", "describe_skill", "read_file", "review_skill_package"}
	act := func(ns ...string) []*skillsv1.ActiveSkill {
		var out []*skillsv1.ActiveSkill
		for _, n := range ns {
			out = append(out, &skillsv1.ActiveSkill{Name: n})
		}
		return out
	}
	list := func(v ...string) *typev1.StringList { return &typev1.StringList{Values: v} }
	cases := []struct {
		name         string
		req          *skillsv1.ResolveSkillPolicyRequest
		unrestricted bool
		allowed      string
		unresolved   string
	}{
		{"passive", &skillsv1.ResolveSkillPolicyRequest{AlwaysAvailable: always}, true, "", ""},
		{"no declaration", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: act("plain", "tool-search-guide"), AlwaysAvailable: always}, true, "", ""},
		{"union", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: act("mcp-config-review", "writer", "plain"), AlwaysAvailable: always}, false,
			"describe_skill,ls,read_file,review_skill_package,tool_search,write_file", ""},
		{"explicit empty", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: act("no-tools"), AlwaysAvailable: always}, false,
			"describe_skill,read_file,review_skill_package,tool_search", ""},
		{"missing", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: act("writer", "ghost"), AlwaysAvailable: always}, false,
			"describe_skill,read_file,review_skill_package,tool_search", "ghost"},
		{"disabled", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: act("tool-call-triage"), AlwaysAvailable: always}, false,
			"describe_skill,read_file,review_skill_package,tool_search", "tool-call-triage"},
		{"outside allowlist", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: act("writer"), Allowlist: list("plain"), AlwaysAvailable: always}, false,
			"describe_skill,read_file,review_skill_package,tool_search", "writer"},
		{"subagent intersection", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: act("writer"), Allowlist: list("writer", "plain"),
			ParentAllowlist: list("plain"), AlwaysAvailable: always}, false, "describe_skill,read_file,review_skill_package,tool_search", "writer"},
		{"subagent within parent", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: act("writer"), ParentAllowlist: list("writer")}, false,
			"read_file,write_file", ""},
		{"stale digest", &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: []*skillsv1.ActiveSkill{{Name: "writer", Digest: "0000"}}}, false, "", "writer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := s.ResolveSkillPolicy(alice, c.req)
			if err != nil {
				t.Fatal(err)
			}
			p := resp.GetPolicy()
			if p.GetUnrestricted() != c.unrestricted || strings.Join(p.GetAllowedTools(), ",") != c.allowed ||
				strings.Join(p.GetUnresolved(), ",") != c.unresolved || p.GetReason() == "" {
				t.Fatalf("got %+v", p)
			}
		})
	}
	// Bob has no "writer" skill: the same request fails closed for him.
	resp, _ := s.ResolveSkillPolicy(serviceFor("bob"), &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: act("writer")})
	if resp.GetPolicy().GetUnrestricted() || len(resp.GetPolicy().GetUnresolved()) != 1 {
		t.Fatalf("bob: %+v", resp.GetPolicy())
	}
}

func TestDescribeSkills(t *testing.T) {
	s := newServer(t, "")
	alice := ctxFor("alice", false)
	q := func(query string, allow *typev1.StringList) []string {
		t.Helper()
		r, err := s.DescribeSkills(alice, &skillsv1.DescribeSkillsRequest{Query: query, Allowlist: allow})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range r.GetMatches() {
			out = append(out, m.GetSkill().GetName())
		}
		return out
	}
	if got := q("select:tool-search-guide,casbin-policy-writer,ghost", nil); strings.Join(got, ",") != "casbin-policy-writer,tool-search-guide" {
		t.Fatalf("select: %v", got)
	}
	if got := q("+casbin policy", nil); strings.Join(got, ",") != "casbin-policy-writer" {
		t.Fatalf("+required: %v", got)
	}
	if got := q("review an MCP server configuration for security problems", nil); len(got) == 0 || got[0] != "mcp-config-review" {
		t.Fatalf("ranked: %v", got)
	}
	if got := q("why did my tool call fail", nil); len(got) == 0 || got[0] != "tool-call-triage" {
		t.Fatalf("ranked 2: %v", got)
	}
	// describe_skill passes a bare name most of the time.
	for _, n := range []string{"tool-search-guide", "casbin-policy-writer", "mcp-config-review", "tool-call-triage"} {
		if got := q(n, nil); len(got) == 0 || got[0] != n {
			t.Fatalf("name %s: %v", n, got)
		}
	}
	// The cached index follows the visible set: alice's new skill is found at once.
	if _, err := s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
		Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("invoice-parser", "Extract totals and line items from invoices.", "", "")}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := q("parse an invoice", nil); len(got) == 0 || got[0] != "invoice-parser" {
		t.Fatalf("after install: %v", got)
	}
	if got := q("parse an invoice", &typev1.StringList{Values: []string{"tool-call-triage"}}); len(got) == 1 && got[0] == "invoice-parser" {
		t.Fatalf("allowlist ignored: %v", got)
	}
	if got := q("select:tool-search-guide", &typev1.StringList{}); len(got) != 0 {
		t.Fatalf("empty allowlist: %v", got)
	}
	if got := q("select:tool-search-guide,casbin-policy-writer", &typev1.StringList{Values: []string{"casbin-policy-writer"}}); strings.Join(got, ",") != "casbin-policy-writer" {
		t.Fatalf("allowlist: %v", got)
	}
}

var rawTag = regexp.MustCompile(`(?i)<\s*/?\s*(system|skill_system|available-deferred-tools|slash_skill_activation)\b`)

func TestScanAndReview(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	alice := ctxFor("alice", false)
	before := blobState(t, dir)
	var inj []byte
	for _, c := range sat.Hostile() {
		if c.Name == "injection-tags" {
			inj = c.Data
		}
	}
	sc, err := s.ScanSkill(alice, &skillsv1.ScanSkillRequest{Source: &skillsv1.ScanSkillRequest_Archive{Archive: inj}, Format: skillsv1.ScanFormat_SCAN_FORMAT_SARIF})
	if err != nil || !sc.GetReport().GetBlocked() {
		t.Fatalf("scan: %v %+v", err, sc)
	}
	var sarif map[string]any
	if err := json.Unmarshal([]byte(sc.GetFormatted()), &sarif); err != nil || sarif["version"] != "2.1.0" {
		t.Fatalf("sarif: %v", err)
	}
	sj, err := s.ScanSkill(alice, &skillsv1.ScanSkillRequest{Source: &skillsv1.ScanSkillRequest_Name{Name: "casbin-policy-writer"}})
	if err != nil || sj.GetReport().GetBlocked() || !json.Valid([]byte(sj.GetFormatted())) {
		t.Fatalf("scan installed: %v", err)
	}
	rv, err := s.ReviewSkillPackage(alice, &skillsv1.ReviewSkillPackageRequest{Source: &skillsv1.ReviewSkillPackageRequest_Archive{Archive: inj}, IncludeContent: true})
	if err != nil {
		t.Fatal(err)
	}
	if rawTag.MatchString(rv.GetText()) || !strings.Contains(rv.GetText(), "&lt;system&gt;") || rv.GetFacts().GetComplete() ||
		rv.GetFindings()[0].GetLevel() != skillsv1.ReviewLevel_REVIEW_LEVEL_BLOCKER || !strings.Contains(rv.GetFullReport(), "markdown") {
		t.Fatalf("review: %+v", rv)
	}
	// A refused archive is reviewed, not an error.
	rv, err = s.ReviewSkillPackage(alice, &skillsv1.ReviewSkillPackageRequest{Source: &skillsv1.ReviewSkillPackageRequest_Archive{Archive: sat.Hostile()[0].Data}})
	if err != nil || len(rv.GetFindings()) != 1 || rv.GetFindings()[0].GetFinding().GetRuleId() != "archive-path-traversal" {
		t.Fatalf("refused review: %v %+v", err, rv)
	}
	rv, err = s.ReviewSkillPackage(alice, &skillsv1.ReviewSkillPackageRequest{Source: &skillsv1.ReviewSkillPackageRequest_Name{Name: "tool-call-triage"}, IncludeContent: true})
	if err != nil || !rv.GetFacts().GetComplete() || rv.GetFacts().GetSubject() != "tool-call-triage" || len(rv.GetFacts().GetFiles()) != 2 ||
		!strings.Contains(rv.GetText(), "skill://public/tool-call-triage") {
		t.Fatalf("installed review: %v %+v", err, rv.GetFacts())
	}
	// Scanning and reviewing never install anything.
	if after := blobState(t, dir); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatal("scan/review wrote files")
	}
	if l, _ := s.ListSkills(alice, &skillsv1.ListSkillsRequest{Category: skillsv1.SkillCategory_SKILL_CATEGORY_CUSTOM}); len(l.GetSkills()) != 0 {
		t.Fatal("scan/review installed a skill")
	}
}

func TestLenientProblemsReported(t *testing.T) {
	s := newServer(t, "")
	alice := ctxFor("alice", false)
	if _, err := s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
		Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("legacy", "Legacy skill.", "", "")}}}}}); err != nil {
		t.Fatal(err)
	}
	// Simulate a skill stored before the rules tightened: store a version
	// whose SKILL.md no longer passes strict validation.
	ctx := context.Background()
	sk, err := s.store.Get(ctx, skillsstore.Custom, "default/alice", "legacy")
	if err != nil {
		t.Fatal(err)
	}
	d, _, _ := s.blobs.Put([]byte("---\nname: legacy\ndescription: broken: yaml\nallowed-tools: Bash\n---\n"))
	files := append([]skillsstore.FileRef(nil), sk.Files...)
	files[0].Digest = d
	if _, err := s.store.AddVersion(ctx, sk.ID, skillsstore.Content{Files: files, Digest: "legacy-v2"}, skillsstore.HistoryEntry{Action: "edit"}); err != nil {
		t.Fatal(err)
	}
	g, err := s.GetSkill(alice, &skillsv1.GetSkillRequest{Name: "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	sp := g.GetSkill()
	if len(sp.GetProblems()) == 0 || sp.GetProblems()[0].GetField() != "description" || sp.GetProblems()[0].GetLine() != 3 ||
		!sp.GetHasAllowedTools() || len(sp.GetAllowedTools()) != 0 {
		t.Fatalf("lenient: %+v", sp)
	}
	// Its unreadable allowed-tools fail closed in the policy.
	pol, _ := s.ResolveSkillPolicy(serviceFor("alice"), &skillsv1.ResolveSkillPolicyRequest{
		ActiveSkills: []*skillsv1.ActiveSkill{{Name: "legacy"}}, AlwaysAvailable: []string{"read_file"}})
	if pol.GetPolicy().GetUnrestricted() || strings.Join(pol.GetPolicy().GetAllowedTools(), ",") != "read_file" {
		t.Fatalf("policy: %+v", pol.GetPolicy())
	}
}

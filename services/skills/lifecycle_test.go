package skills

import (
	"log/slog"

	"context"
	"errors"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/svckit"
	sat "github.com/toolplane/toolplane/services/skills/skillsarchive/skillsarchivetest"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

func TestConcurrentInstallSameName(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	alice := ctxFor("alice", false)
	before := blobState(t, dir)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
				Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("race", "Race.", "", "")},
					{Path: "data.txt", Content: []byte{byte(i)}}}}}})
		}(i)
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		wantErr(t, err, codes.AlreadyExists, skillsv1.ErrorReason_ERROR_REASON_SKILL_EXISTS)
	}
	if ok != 1 {
		t.Fatalf("%d installs succeeded", ok)
	}
	// Exactly the winner's two new blobs were added (SKILL.md and its data.txt).
	if after := blobState(t, dir); len(after) != len(before)+2 {
		t.Fatalf("blobs before %d after %d", len(before), len(after))
	}
}

func TestRestartCollectsOrphansAndSyncsPublic(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	ctx := context.Background()
	// A crash between writing blobs and committing the row leaves an orphan.
	orphan, _, err := s.blobs.Put([]byte("orphan from an interrupted install"))
	if err != nil {
		t.Fatal(err)
	}
	// A shipped skill drifted (older content stored) and a skill no longer shipped.
	pub, err := s.store.Get(ctx, skillsstore.Public, "", "tool-call-triage")
	if err != nil {
		t.Fatal(err)
	}
	shipped := pub.Digest
	if _, err := s.store.AddVersion(ctx, pub.ID, skillsstore.Content{Files: pub.Files[:1], Digest: "old"}, skillsstore.HistoryEntry{Action: "install", Author: systemAuthor}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Create(ctx, skillsstore.Public, "", "retired-skill", skillsstore.Content{Files: pub.Files[:1], Digest: "r"}, skillsstore.HistoryEntry{Action: "install"}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2 := newServer(t, dir)
	if s2.blobs.Has(orphan) {
		t.Fatal("orphan blob survived the restart")
	}
	g, err := s2.GetSkill(ctxFor("alice", false), &skillsv1.GetSkillRequest{Name: "tool-call-triage"})
	if err != nil || g.GetSkill().GetDigest() != shipped || g.GetSkill().GetVersion() != 3 || len(g.GetSkill().GetFiles()) != 2 {
		t.Fatalf("upgrade: %v %+v", err, g.GetSkill())
	}
	h, _ := s2.ListSkillHistory(ctxFor("alice", false), &skillsv1.ListSkillHistoryRequest{Name: "tool-call-triage"})
	if h.GetEntries()[0].GetAction() != "upgrade" || h.GetEntries()[0].GetAuthor() != systemAuthor {
		t.Fatalf("history %+v", h.GetEntries()[0])
	}
	_, err = s2.GetSkill(ctxFor("alice", false), &skillsv1.GetSkillRequest{Name: "retired-skill"})
	wantErr(t, err, codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_SKILL_NOT_FOUND)
	if err := s2.Ready(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	var c Config
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.ContainerPath = "relative/path"
	c.Limits.MaxTotalBytes = 1
	c.Describe.MaxLimit = 1
	c.Describe.DefaultLimit = 5
	err := c.Validate()
	for _, key := range []string{"skills.container_path", "skills.limits.max_total_bytes", "skills.describe.max_limit"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("error %v does not name %s", err, key)
		}
	}
	if _, err := New(context.Background(), Config{ScanTimeout: 1}, svckit.Env{DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "skills.scan_timeout") {
		t.Fatalf("New accepted an invalid config: %v", err)
	}
}

// failingStore fails writes after the blobs were stored.
type failingStore struct{ skillsstore.Store }

func (failingStore) Create(context.Context, skillsstore.Category, string, string, skillsstore.Content, skillsstore.HistoryEntry) (skillsstore.Skill, error) {
	return skillsstore.Skill{}, errors.New("disk full")
}

func (failingStore) AddVersion(context.Context, int64, skillsstore.Content, skillsstore.HistoryEntry) (skillsstore.Skill, error) {
	return skillsstore.Skill{}, errors.New("disk full")
}

func TestStoreFailureLeavesNoBlobs(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	alice := ctxFor("alice", false)
	if _, err := s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
		Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("kept", "Kept.", "", "v1")}}}}}); err != nil {
		t.Fatal(err)
	}
	before := blobState(t, dir)
	real := s.store
	s.store = failingStore{real}
	_, err := s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{Archive: sat.Good()}})
	if c, _ := info(t, err); c != codes.Internal || strings.Contains(err.Error(), "disk full") {
		t.Fatalf("install: %v (internal causes must not leak)", err)
	}
	_, err = s.UpdateSkill(alice, &skillsv1.UpdateSkillRequest{Name: "kept", Skill: &skillsv1.SkillUpdate{
		Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("kept", "Kept.", "", "v2 with new bytes")}}}})
	if c, _ := info(t, err); c != codes.Internal {
		t.Fatalf("edit: %v", err)
	}
	if after := blobState(t, dir); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("blobs left behind:\n%v\n%v", before, after)
	}
	s.store = real
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(context.Background(), Config{}, svckit.Env{DataDir: t.TempDir(), Metrics: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	alice := ctxFor("alice", false)
	s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{Archive: sat.Good()}})
	for _, c := range sat.Hostile() {
		if c.Name == "reverse-shell" || c.Name == "zip-slip" {
			s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{Archive: c.Data}})
		}
	}
	for result, want := range map[string]float64{"ok": 1, "blocked": 1, "refused": 1} {
		if got := counterValue(s.metrics.writes.WithLabelValues("install", result)); got != want {
			t.Errorf("install %s = %v, want %v", result, got, want)
		}
	}
	if counterValue(s.metrics.findings.WithLabelValues("CRITICAL")) < 1 {
		t.Error("no CRITICAL finding counted")
	}
	var h dto.Metric
	s.metrics.scanSeconds.Write(&h)
	if h.GetHistogram().GetSampleCount() < 2 {
		t.Errorf("scan histogram count %d", h.GetHistogram().GetSampleCount())
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 3 {
		t.Errorf("gathered %d families: %v", len(mfs), err)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

package skills

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/skills/skillsblob"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// newPGServer starts the service on the skills schema of dsn through its
// own pool (one replica), with its own, unused data directory.
func newPGServer(t *testing.T, dsn string) (*Server, string) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	s, err := New(context.Background(), Config{}, svckit.Env{DataDir: dir, Logger: slog.New(slog.DiscardHandler), Postgres: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// TestTwoReplicasOnPostgres: two skills servers over one database (two
// replicas) sync the shipped public skills once between them; a skill
// installed through one is listed and its file bytes (bytea) read through
// the other; a delete through the other is seen by the first; neither
// writes a sqlite file or a blob folder.
func TestTwoReplicasOnPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, dirA := newPGServer(t, dsn)
	b, dirB := newPGServer(t, dsn)
	alice := ctxFor("alice", false)
	if _, err := a.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
		Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("notes", "Take notes.", "", "Body.")},
			{Path: "data/words.txt", Content: []byte("alpha beta")}}}}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Server{a, b} {
		resp, err := s.ListSkills(alice, &skillsv1.ListSkillsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := names(resp.GetSkills())
		if len(got) != 5 || got[2] != "notes:CUSTOM" {
			t.Fatalf("skills seen by a replica: %v", got)
		}
	}
	f, err := b.ReadSkillFile(alice, &skillsv1.ReadSkillFileRequest{Name: "notes", Path: "data/words.txt"})
	if err != nil || string(f.GetContent()) != "alpha beta" {
		t.Fatalf("file through the other replica: %q %v", f.GetContent(), err)
	}
	if _, err := b.DeleteSkill(alice, &skillsv1.DeleteSkillRequest{Name: "notes"}); err != nil {
		t.Fatal(err)
	}
	_, err = a.GetSkill(alice, &skillsv1.GetSkillRequest{Name: "notes"})
	if c, _ := info(t, err); c != codes.NotFound {
		t.Fatalf("deleted skill through the first replica: %v", err)
	}
	for _, dir := range []string{dirA, dirB} {
		for _, p := range []string{"skills.db", filepath.Join("skills", "blobs")} {
			if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
				t.Fatalf("%s written although the store is PostgreSQL", p)
			}
		}
	}
}

// TestReplicasStartTogether: replicas starting at the same moment over an
// empty database each sync the shipped public skills; all start, and each
// public skill is stored once at version 1.
func TestReplicasStartTogether(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 3
	errs := make(chan error, n)
	for range n {
		go func() {
			pool, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				errs <- err
				return
			}
			t.Cleanup(pool.Close)
			s, err := New(context.Background(), Config{}, svckit.Env{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Postgres: pool})
			if err == nil {
				t.Cleanup(func() { s.Close() })
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("a replica failed to start: %v", err)
		}
	}
	s, _ := newPGServer(t, dsn)
	resp, err := s.ListSkills(ctxFor("alice", false), &skillsv1.ListSkillsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetSkills()) != 4 {
		t.Fatalf("public skills: %v", names(resp.GetSkills()))
	}
	for _, sk := range resp.GetSkills() {
		if sk.GetVersion() != 1 {
			t.Fatalf("%s at version %d, want 1 (synced once)", sk.GetName(), sk.GetVersion())
		}
	}
}

// TestSharedBlobDir: with skills.blob_dir set, two replicas over one
// database keep the skill files in that folder (not in skills.blobs) and
// read each other's.
func TestSharedBlobDir(t *testing.T) {
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	start := func() *Server {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s, err := New(context.Background(), Config{BlobDir: shared}, svckit.Env{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Postgres: pool})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := start(), start()
	alice := ctxFor("alice", false)
	if _, err := a.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
		Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD("shared", "Shared.", "", "Body.")}, {Path: "x.txt", Content: []byte("on the volume")}}}}}); err != nil {
		t.Fatal(err)
	}
	f, err := b.ReadSkillFile(alice, &skillsv1.ReadSkillFileRequest{Name: "shared", Path: "x.txt"})
	if err != nil || string(f.GetContent()) != "on the volume" {
		t.Fatalf("file through the other replica: %q %v", f.GetContent(), err)
	}
	if _, err := os.Stat(filepath.Join(shared, "sha256", skillsblob.Digest([]byte("on the volume"))[:2], skillsblob.Digest([]byte("on the volume")))); err != nil {
		t.Fatalf("file not in the shared folder: %v", err)
	}
	var n int
	pool, _ := pgxpool.New(context.Background(), dsn)
	defer pool.Close()
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM skills.blobs`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("skills.blobs has %d rows (%v) although blob_dir is set", n, err)
	}
}

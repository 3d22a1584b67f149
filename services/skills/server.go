// Package skills is the skills service: SKILL.md storage, strict validation,
// deterministic scanning, review, and the tool policy active skills impose
// (docs/architecture.md §2.3, docs/deerflow.md §4).
//
// Categories (docs/deerflow.md §4.1): public skills are shipped in the binary
// (skills/public), loaded at start, read-only, visible in every tenant, and
// their enable state is global (admin only); integration skills are
// installed by an admin for the admin's tenant, read-only, enable state per
// user; custom skills belong to one user, editable, enable state per user. For a user, a custom skill shadows an
// integration or public skill of the same name, and an integration skill
// shadows a public one. "The user" is auth.EffectivePrincipal (the acting-for
// end user of a service credential, else the caller), keyed "tenant/subject".
//
// Files live in a content-addressed blob store (DataDir/skills/blobs);
// metadata, versions, edit history and enable state in DataDir/skills.db.
// Any CRITICAL scan finding blocks install, edit, rollback and enable;
// enabling re-scans with the current rules (DeerFlow does not).
package skills

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/grpc"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/search"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/skills/skillsblob"
	"github.com/toolplane/toolplane/services/skills/skillsmd"
	"github.com/toolplane/toolplane/services/skills/skillspg"
	"github.com/toolplane/toolplane/services/skills/skillsscan"
	"github.com/toolplane/toolplane/services/skills/skillssqlite"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

// Server implements skillsv1.SkillsServiceServer.
type Server struct {
	skillsv1.UnimplementedSkillsServiceServer
	cfg   Config
	env   svckit.Env
	log   *slog.Logger
	store skillsstore.Store
	blobs skillsstore.Blobs
	rules *skillsscan.Ruleset
	// mu serialises every write (install, edit, rollback, delete, GC) so
	// that blobs written for a failed write can be removed safely.
	mu sync.Mutex
	// manageLocks serialise ManageSkill per (user, skill) (manage.go).
	manageLocks skillLocks
	// docs caches parsed SKILL.md by blob digest (immutable content).
	docs *lru.Cache[string, *parsedDoc]
	// indexes caches DescribeSkills search indexes by document-set hash.
	indexes *lru.Cache[string, *search.Index]
	metrics *metrics
}

type parsedDoc struct {
	doc      *skillsmd.Document
	problems []skillsmd.Problem
}

var (
	_ skillsv1.SkillsServiceServer = (*Server)(nil)
	_ svckit.Service               = (*Server)(nil)
)

// New builds the service from its config section and the process environment:
// it opens DataDir/skills.db and DataDir/skills/blobs (or, with env.Postgres,
// the skills schema of that database), loads the shipped
// public skills and removes unreferenced blobs.
func New(ctx context.Context, cfg Config, env svckit.Env) (*Server, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	if env.DataDir == "" {
		return nil, errors.New("skills: data dir is not set")
	}
	blobs, store, err := openStores(ctx, cfg, env)
	if err != nil {
		return nil, err
	}
	docs, _ := lru.New[string, *parsedDoc](1024)
	indexes, _ := lru.New[string, *search.Index](64)
	s := &Server{cfg: cfg, env: env, log: log, store: store, blobs: blobs, rules: skillsscan.Default(), docs: docs, indexes: indexes,
		metrics: newMetrics(env.Metrics)}
	if err := s.syncPublic(ctx); err != nil {
		store.Close()
		return nil, err
	}
	if err := s.gc(ctx); err != nil {
		log.Warn("skills blob gc failed", "error", err)
	}
	return s, nil
}

// blobGCMinAge is the grace period of the blob stores several processes
// share (PostgreSQL, skills.blob_dir): a blob put within it is not deleted,
// since another replica may have just put it for an install whose metadata
// is not committed yet.
const blobGCMinAge = 10 * time.Minute

// openStores opens the blob and metadata stores: DataDir/skills/blobs and
// DataDir/skills.db, or the skills schema of env.Postgres when set; a
// configured skills.blob_dir holds the blobs in either case, as a folder
// shared by several processes.
func openStores(ctx context.Context, cfg Config, env svckit.Env) (skillsstore.Blobs, skillsstore.Store, error) {
	var blobs skillsstore.Blobs
	if cfg.BlobDir != "" {
		b, err := skillsblob.OpenShared(cfg.BlobDir, blobGCMinAge)
		if err != nil {
			return nil, nil, fmt.Errorf("skills.blob_dir: %w", err)
		}
		blobs = b
	}
	if env.Postgres != nil {
		if blobs == nil {
			b, err := skillspg.OpenBlobs(ctx, env.Postgres, blobGCMinAge)
			if err != nil {
				return nil, nil, fmt.Errorf("skills: %w", err)
			}
			blobs = b
		}
		store, err := skillspg.Open(ctx, env.Postgres)
		if err != nil {
			return nil, nil, fmt.Errorf("skills: %w", err)
		}
		return blobs, store, nil
	}
	if err := os.MkdirAll(filepath.Join(env.DataDir, "skills"), 0o750); err != nil {
		return nil, nil, fmt.Errorf("skills: %w", err)
	}
	if blobs == nil {
		b, err := skillsblob.Open(filepath.Join(env.DataDir, "skills", "blobs"))
		if err != nil {
			return nil, nil, err
		}
		blobs = b
	}
	store, err := skillssqlite.Open(filepath.Join(env.DataDir, "skills.db"))
	if err != nil {
		return nil, nil, fmt.Errorf("skills: %w", err)
	}
	return blobs, store, nil
}

// Name returns "skills".
func (s *Server) Name() string { return "skills" }

// FullName returns the fully-qualified gRPC service name.
func (s *Server) FullName() string { return skillsv1.SkillsService_ServiceDesc.ServiceName }

// Register registers the gRPC service.
func (s *Server) Register(r grpc.ServiceRegistrar) { skillsv1.RegisterSkillsServiceServer(r, s) }

// RegisterGateway registers the REST mirror.
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return skillsv1.RegisterSkillsServiceHandler(ctx, mux, conn)
}

// Ready reports whether the service can serve (the store answers).
func (s *Server) Ready(ctx context.Context) error { return s.store.Ping(ctx) }

// Close releases the store.
func (s *Server) Close() error { return s.store.Close() }

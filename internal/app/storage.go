package app

import (
	"context"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/services/authz/authzpg"
	"github.com/toolplane/toolplane/services/catalog/catalogpg"
	"github.com/toolplane/toolplane/services/runtime/runtimepg"
	"github.com/toolplane/toolplane/services/skills/skillspg"
)

// StorageKey is the configuration key of the PostgreSQL DSN (environment
// TOOLPLANE_STORAGE_DSN); errors of OpenStorage name it.
const StorageKey = "storage.dsn"

// migrateTimeout bounds connecting and migrating at start (a replica that
// waits for another's migration lock waits at most a minute of it).
const migrateTimeout = 2 * time.Minute

// schemas maps a service to its PostgreSQL schema and migrations.
var schemas = map[string]struct {
	name string
	fs   func() fs.FS
}{
	"catalog": {catalogpg.Schema, catalogpg.Migrations},
	"authz":   {authzpg.Schema, authzpg.Migrations},
	"skills":  {skillspg.Schema, skillspg.Migrations},
	"runtime": {runtimepg.Schema, runtimepg.Migrations},
}

// OpenStorage connects to the PostgreSQL database of storage.dsn and
// applies the migrations of the schemas of services (each under its
// advisory lock), so that a bad DSN, an unreachable server or a failed
// migration is a configuration error (exit 2, one line naming the key)
// before anything listens. An empty dsn returns nil, nil: every service
// keeps its sqlite file in the data directory. The error never holds the
// DSN (it may hold a password).
func OpenStorage(ctx context.Context, dsn string, services []string) (*pgxpool.Pool, error) {
	if dsn == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	pool, err := pgstore.Open(ctx, dsn)
	if err != nil {
		return nil, &config.Error{Key: StorageKey, Reason: oneLine(err)}
	}
	for _, svc := range services {
		sc, ok := schemas[svc]
		if !ok {
			continue
		}
		if err := pgstore.Migrate(ctx, pool, sc.name, sc.fs()); err != nil {
			pool.Close()
			return nil, &config.Error{Key: StorageKey, Reason: oneLine(err)}
		}
	}
	return pool, nil
}

// oneLine returns err's text on one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// storageKind names the backend of cfg for the "serving" log line (never
// the DSN).
func storageKind(cfg *Config) string {
	if cfg.Storage.DSN != "" {
		return "postgresql"
	}
	return "sqlite"
}

// Package svckit defines what a Toolplane service package gives the
// composition root (internal/app): one value that registers its gRPC service
// and REST mirror, declares the access class of every RPC, validates requests,
// reports readiness and closes its stores.
package svckit

import (
	"context"
	"log/slog"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/toolplane/toolplane/internal/auth"
)

// Env is what the composition root hands every service constructor.
type Env struct {
	// DataDir is the process data directory; a service keeps its files under
	// DataDir/<service>.db and DataDir/<service>/.
	DataDir string
	// Logger is the process logger, already tagged with the service name.
	Logger *slog.Logger
	// Metrics is where the service registers its own collectors.
	Metrics prometheus.Registerer
	// Upstreams holds client connections to the other services, keyed by
	// service short name ("catalog", "authz", "skills"); set for the runtime.
	// They always go through gRPC, also in one process (docs/architecture.md §1).
	Upstreams map[string]grpc.ClientConnInterface
	// MaxMessageBytes is the configured maximum gRPC message size.
	MaxMessageBytes int
	// Postgres, when non-nil, is the process's PostgreSQL pool (storage.dsn,
	// migrated before listening by internal/app): the service keeps its
	// state in its own schema of that database instead of sqlite files in
	// DataDir (docs/decisions/0080-postgresql-stores.md). The pool belongs
	// to the composition root, which closes it after every service.
	Postgres *pgxpool.Pool
}

// Service is one Toolplane service as wired by internal/app.
type Service interface {
	// Name is the short name: "catalog", "authz", "skills" or "runtime".
	Name() string
	// FullName is the fully-qualified gRPC service name, e.g.
	// "toolplane.catalog.v1.CatalogService"; health is reported under it.
	FullName() string
	// Register registers the gRPC service.
	Register(grpc.ServiceRegistrar)
	// RegisterGateway registers the REST mirror on mux, forwarding to conn.
	RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error
	// Classes maps every full method name ("/pkg.Service/Method") to its class.
	Classes() map[string]auth.Class
	// Validate checks a request before the handler runs; it returns a gRPC
	// status error (INVALID_ARGUMENT naming the field) or nil.
	Validate(fullMethod string, req any) error
	// Ready returns nil when the service can serve (stores open, upstreams reachable).
	Ready(ctx context.Context) error
	// Close releases everything; called last on shutdown.
	Close() error
}

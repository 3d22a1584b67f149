package catalogpg

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Replica membership and the published tools of stateful servers
// (migrations/00005_placement.sql; docs/decisions/0086-session-placement.md).

// Heartbeat records that the replica at address (process instance) is
// alive and returns the addresses of every member whose heartbeat is
// younger than timeout, this one included. Rows older than ten timeouts
// are deleted. conflict is the instance of another live process that
// heartbeated under the same address since this one last did (a
// misconfigured advertise address), "" otherwise.
func (s *Store) Heartbeat(ctx context.Context, address, instance string, timeout time.Duration) (live []string, conflict string, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var prev string
		var fresh bool
		err := tx.QueryRow(ctx, `SELECT instance, heartbeat_at > now() - $2::interval FROM catalog.replicas WHERE address = $1 FOR UPDATE`,
			address, timeout).Scan(&prev, &fresh)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if prev != "" && prev != instance && fresh {
			conflict = prev
		}
		if _, err := tx.Exec(ctx, `INSERT INTO catalog.replicas (address, instance) VALUES ($1, $2)
			ON CONFLICT (address) DO UPDATE SET instance = excluded.instance, heartbeat_at = now(),
			started_at = CASE WHEN catalog.replicas.instance = excluded.instance THEN catalog.replicas.started_at ELSE now() END`,
			address, instance); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM catalog.replicas WHERE heartbeat_at < now() - $1::interval`, 10*timeout); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT address FROM catalog.replicas WHERE heartbeat_at > now() - $1::interval ORDER BY address`, timeout)
		if err != nil {
			return err
		}
		live, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("catalogpg: heartbeat: %w", err)
	}
	return live, conflict, nil
}

// Leave removes the replica's membership row (a clean stop: the others
// take over its stateful servers at their next heartbeat instead of after
// the member timeout).
func (s *Store) Leave(ctx context.Context, address, instance string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM catalog.replicas WHERE address = $1 AND instance = $2`, address, instance)
	if err != nil {
		return fmt.Errorf("catalogpg: leave: %w", err)
	}
	return nil
}

// PublishedTools is the tool list a stateful server's owner published.
type PublishedTools struct {
	Owner string
	// Tools is the JSON array of the server's tools (catalogmcp.ToolDef).
	Tools []byte
	// Version increases with every publication of the server.
	Version int64
}

// PublishTools stores the tools (a JSON array) owner listed for server.
func (s *Store) PublishTools(ctx context.Context, server, owner string, tools []byte) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO catalog.stateful_tools (server, owner, tools, version) VALUES ($1, $2, $3, 1)
		ON CONFLICT (server) DO UPDATE SET owner = excluded.owner, tools = excluded.tools,
		version = catalog.stateful_tools.version + 1, updated_at = now()`, server, owner, string(tools))
	if err != nil {
		return fmt.Errorf("catalogpg: publish tools of %s: %w", server, err)
	}
	return nil
}

// StatefulTools returns the published tools of every stateful server.
func (s *Store) StatefulTools(ctx context.Context) (map[string]PublishedTools, error) {
	rows, err := s.pool.Query(ctx, `SELECT server, owner, tools::text, version FROM catalog.stateful_tools`)
	if err != nil {
		return nil, fmt.Errorf("catalogpg: stateful tools: %w", err)
	}
	out := map[string]PublishedTools{}
	var server, owner, tools string
	var version int64
	_, err = pgx.ForEachRow(rows, []any{&server, &owner, &tools, &version}, func() error {
		out[server] = PublishedTools{Owner: owner, Tools: []byte(tools), Version: version}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalogpg: stateful tools: %w", err)
	}
	return out, nil
}

// Locks holds session-level advisory locks on one dedicated connection:
// the locks of the stateful servers this replica runs. PostgreSQL releases
// them when the connection ends, so a replica that dies, or loses its
// database, loses them: the next owner takes them over.
type Locks struct {
	conn *pgxpool.Conn
}

// NewLocks takes a connection out of the pool for advisory locks. TCP
// keepalives of the session are short, so the server notices a vanished
// replica (and frees its locks) within about 15 s.
func (s *Store) NewLocks(ctx context.Context) (*Locks, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("catalogpg: locks: %w", err)
	}
	if _, err := conn.Exec(ctx, `SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3`); err != nil {
		conn.Release()
		return nil, fmt.Errorf("catalogpg: locks: %w", err)
	}
	return &Locks{conn: conn}, nil
}

// lockKey is the advisory lock key of a name (FNV-1a, 63 bits, as
// internal/pgstore names its locks).
func lockKey(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int64(h.Sum64() & (1<<63 - 1))
}

// TryLock takes the lock named name without waiting; false when another
// session holds it.
func (l *Locks) TryLock(ctx context.Context, name string) (bool, error) {
	var ok bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockKey(name)).Scan(&ok); err != nil {
		return false, fmt.Errorf("catalogpg: lock %s: %w", name, err)
	}
	return ok, nil
}

// Unlock releases the lock named name.
func (l *Locks) Unlock(ctx context.Context, name string) error {
	if _, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lockKey(name)); err != nil {
		return fmt.Errorf("catalogpg: unlock %s: %w", name, err)
	}
	return nil
}

// Ping checks the connection (and so the locks it holds) is alive.
func (l *Locks) Ping(ctx context.Context) error { return l.conn.Ping(ctx) }

// Close ends the session, releasing every lock it holds.
func (l *Locks) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.conn.Conn().Close(ctx) // not back to the pool: its locks go with it
	l.conn.Release()
}

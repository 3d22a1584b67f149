package catalogpg

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane/internal/pgstore"
)

// The catalog's server configuration on PostgreSQL, its source of truth
// there (migration 00004_servers.sql;
// docs/decisions/0087-catalog-config-in-postgresql.md).

// ConfigChannel is the notification channel of server configuration
// changes: every transaction that bumps the version notifies it with the
// new version.
const ConfigChannel = "toolplane_catalog_config"

// FileImportLock is the advisory lock whose holder imports the extensions
// file into the database (pgstore.SessionLock).
const FileImportLock = "catalog.file_import"

// Origins of a server row: who wrote it last.
const (
	OriginFile = "file" // imported from the extensions file
	OriginAPI  = "api"  // ReplaceServers, UpdateServer
)

// ServerRow is one server of the configuration: its mcpServers entry (JSON
// text as the file holds it) and who wrote it last.
type ServerRow struct {
	Name   string
	Origin string
	Entry  []byte
}

// ServerConfig is the stored configuration: servers in list order, the
// version (0 = never written) and the extensions file content imported
// last with its SHA-256 (hex; "" = none).
type ServerConfig struct {
	Version     int64
	FileSHA256  string
	FileContent []byte
	Servers     []ServerRow
}

// ErrNoChange, returned by the function of EditServers, leaves the
// configuration as it is (no version bump, no notification).
var ErrNoChange = errors.New("catalogpg: no change")

// ConfigVersion returns the version of the stored configuration (one
// primary-key read: the periodic check of every replica).
func (s *Store) ConfigVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.pool.QueryRow(ctx, `SELECT version FROM catalog.server_config WHERE id = 1`).Scan(&v); err != nil {
		return 0, fmt.Errorf("catalogpg: config version: %w", err)
	}
	return v, nil
}

// LoadServers returns the stored configuration, read in one snapshot.
func (s *Store) LoadServers(ctx context.Context) (*ServerConfig, error) {
	var out *ServerConfig
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		out, err = loadServers(ctx, tx, false)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalogpg: load servers: %w", err)
	}
	return out, nil
}

func loadServers(ctx context.Context, tx pgx.Tx, forUpdate bool) (*ServerConfig, error) {
	q := `SELECT version, file_sha256, file_content FROM catalog.server_config WHERE id = 1`
	if forUpdate {
		q += ` FOR UPDATE`
	}
	c := &ServerConfig{}
	if err := tx.QueryRow(ctx, q).Scan(&c.Version, &c.FileSHA256, &c.FileContent); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT name, origin, entry::text FROM catalog.servers ORDER BY position, name`)
	if err != nil {
		return nil, err
	}
	var r ServerRow
	var entry string
	_, err = pgx.ForEachRow(rows, []any{&r.Name, &r.Origin, &entry}, func() error {
		r.Entry = []byte(entry)
		c.Servers = append(c.Servers, r)
		return nil
	})
	return c, err
}

// EditServers changes the configuration in one transaction: it locks the
// configuration row (so writers on every replica are serialised and none
// edits a stale list), reads the servers, lets fn change c.Servers and
// c.FileSHA256 (Version is ignored), writes the rows, bumps the version
// and notifies ConfigChannel, all committed together. fn returning
// ErrNoChange rolls back and returns the configuration as read; any other
// error of fn is returned as is. It returns the configuration as stored.
func (s *Store) EditServers(ctx context.Context, fn func(c *ServerConfig) error) (*ServerConfig, error) {
	var out *ServerConfig
	var fnErr error
	err := pgstore.InTx(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		fnErr = nil
		c, err := loadServers(ctx, tx, true)
		if err != nil {
			return err
		}
		read := *c
		read.Servers = append([]ServerRow(nil), c.Servers...)
		if err := fn(c); err != nil {
			fnErr = err
			if errors.Is(err, ErrNoChange) {
				out = &read
			}
			return err
		}
		n := len(c.Servers)
		names, origins, entries, positions := make([]string, n), make([]string, n), make([]string, n), make([]int32, n)
		for i, r := range c.Servers {
			if r.Origin != OriginFile && r.Origin != OriginAPI {
				return fmt.Errorf("server %q: origin %q", r.Name, r.Origin)
			}
			names[i], origins[i], entries[i], positions[i] = r.Name, r.Origin, string(r.Entry), int32(i)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM catalog.servers WHERE name <> ALL($1::text[])`, names); err != nil {
			return err
		}
		if n > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO catalog.servers (name, position, origin, entry, updated_at)
				SELECT n, p, o, e::json, now() FROM unnest($1::text[], $2::integer[], $3::text[], $4::text[]) AS t(n, p, o, e)
				ON CONFLICT (name) DO UPDATE SET position = excluded.position, origin = excluded.origin, entry = excluded.entry,
					updated_at = CASE WHEN catalog.servers.entry::text IS DISTINCT FROM excluded.entry::text
						OR catalog.servers.origin IS DISTINCT FROM excluded.origin THEN now() ELSE catalog.servers.updated_at END`,
				names, positions, origins, entries); err != nil {
				return err
			}
		}
		if c.FileContent == nil {
			c.FileContent = []byte{} // NOT NULL
		}
		if err := tx.QueryRow(ctx, `UPDATE catalog.server_config SET version = version + 1, file_sha256 = $1, file_content = $2, updated_at = now()
			WHERE id = 1 RETURNING version`, c.FileSHA256, c.FileContent).Scan(&c.Version); err != nil {
			return err
		}
		if err := pgstore.Notify(ctx, tx, ConfigChannel, strconv.FormatInt(c.Version, 10)); err != nil {
			return err
		}
		out = c
		return nil
	})
	if fnErr != nil {
		if errors.Is(fnErr, ErrNoChange) {
			return out, nil
		}
		return nil, fnErr
	}
	if err != nil {
		return nil, fmt.Errorf("catalogpg: edit servers: %w", err)
	}
	return out, nil
}

// ConfigListenerApplicationName is the application_name of the listening
// connection of ListenConfig.
const ConfigListenerApplicationName = "toolplane-catalog-listen"

// ListenConfig calls fn with the version of every committed configuration
// change, from any process, until ctx ends (pgstore.Listen); fn(0) after
// every (re)connection: the caller re-reads the version.
func (s *Store) ListenConfig(ctx context.Context, fn func(version int64), onErr func(error)) {
	pgstore.Listen(ctx, s.pool, ConfigChannel, ConfigListenerApplicationName, func(payload string, reconnected bool) {
		v, err := strconv.ParseInt(payload, 10, 64)
		if reconnected || err != nil {
			v = 0
		}
		fn(v)
	}, onErr)
}

// NewFileImportLock returns the advisory lock FileImportLock on a
// connection of its own (not yet taken).
func (s *Store) NewFileImportLock() *pgstore.SessionLock {
	return pgstore.NewSessionLock(s.pool, FileImportLock, "toolplane-catalog-file-import")
}

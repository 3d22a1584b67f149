-- The catalog's MCP server configuration, the source of truth on
-- PostgreSQL (docs/decisions/0087-catalog-config-in-postgresql.md): one row
-- per server in list order (`position`), its mcpServers entry as the
-- extensions file holds it (placeholders such as ${TOKEN} unexpanded,
-- unknown keys kept; `json`, not `jsonb`, so the text is kept as written)
-- and who wrote it last: `file` (imported from the extensions file by the
-- replica holding the advisory lock catalog.file_import) or `api`
-- (ReplaceServers, UpdateServer). server_config is one row: the version,
-- bumped by every change in the same transaction that notifies
-- toolplane_catalog_config, and the file content imported last with its
-- SHA-256, so a replica that takes the import over does not re-import an
-- unchanged file over API writes, and a changed file overrides only the
-- servers whose entries changed in it. Secrets are kept as the file and
-- catalog.applied_config keep them: placeholders (${TOKEN}) unexpanded,
-- literal values as written; never logged, masked in every response. Expand-only: new tables.

-- +goose Up
CREATE TABLE catalog.servers (
  name       text PRIMARY KEY,
  position   integer NOT NULL,
  origin     text NOT NULL CHECK (origin IN ('file', 'api')),
  entry      json NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE TABLE catalog.server_config (
  id          integer PRIMARY KEY CHECK (id = 1),
  version     bigint NOT NULL,
  file_sha256  text NOT NULL,
  file_content bytea NOT NULL,
  updated_at   timestamptz NOT NULL
);
INSERT INTO catalog.server_config (id, version, file_sha256, file_content, updated_at) VALUES (1, 0, '', '', now());

-- +goose Down
DROP TABLE catalog.server_config;
DROP TABLE catalog.servers;

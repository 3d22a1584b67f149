-- Tool identity (docs/decisions/0100-0102), the tables of catalogstore's
-- sqlite migrations 002-004 column for column: stable exposed names per
-- (scope, server, tool), definition pins with their audit trail, and the
-- last applied extensions_config.json per path.

-- +goose Up
CREATE TABLE catalog.tool_names (
  scope        text NOT NULL,
  server       text NOT NULL,
  tool         text NOT NULL,
  base         text NOT NULL,
  name         text NOT NULL,
  assigned_at  timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL,
  PRIMARY KEY (scope, server, tool),
  UNIQUE (scope, name)
);
CREATE TABLE catalog.tool_pins (
  scope               text NOT NULL,
  server              text NOT NULL,
  tool                text NOT NULL,
  approved_hash       text NOT NULL,
  approved_definition bytea NOT NULL,
  rejected_hash       text NOT NULL DEFAULT '',
  updated_at          timestamptz NOT NULL,
  PRIMARY KEY (scope, server, tool)
);
CREATE TABLE catalog.tool_audit (
  id              bigserial PRIMARY KEY,
  at              timestamptz NOT NULL,
  actor           text NOT NULL,
  action          text NOT NULL CHECK (action IN ('approve', 'reject')),
  scope           text NOT NULL,
  server          text NOT NULL,
  tool            text NOT NULL,
  name            text NOT NULL,
  previous_hash   text NOT NULL,
  definition_hash text NOT NULL,
  diff            text NOT NULL
);
CREATE TABLE catalog.applied_config (
  path       text PRIMARY KEY,
  sha256     text NOT NULL,
  content    bytea NOT NULL,
  applied_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE catalog.applied_config;
DROP TABLE catalog.tool_audit;
DROP TABLE catalog.tool_pins;
DROP TABLE catalog.tool_names;

-- OAuth state of upstream MCP servers (docs/architecture.md §10.6), the
-- tables of catalogstore's sqlite migrations 010-011 column for column:
-- one token per connection (server, tenant, subject; "" "" = the shared or
-- discovery connection), the clients registered per server and issuer, and
-- the pending logins, so the authorization server's redirect may land on
-- any replica. Every secret is in `sealed` (AES-256-GCM under `key_id`,
-- the row's identity as additional data); plain columns hold none.
-- Renewals of one connection are serialised across replicas by a
-- transaction-level advisory lock (catalogpg/oauth.go), not by a table.
-- Expand-only: new tables.

-- +goose Up
CREATE TABLE catalog.oauth_tokens (
  server     text NOT NULL,
  tenant     text NOT NULL,
  subject    text NOT NULL,
  key_id     text NOT NULL,
  sealed     bytea NOT NULL,
  expires_at timestamptz,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (server, tenant, subject)
);
CREATE TABLE catalog.oauth_clients (
  server     text NOT NULL,
  issuer     text NOT NULL,
  key_id     text NOT NULL,
  sealed     bytea NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (server, issuer)
);
CREATE TABLE catalog.oauth_pending (
  state      text PRIMARY KEY,
  server     text NOT NULL,
  tenant     text NOT NULL,
  subject    text NOT NULL,
  key_id     text NOT NULL,
  sealed     bytea NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_pending_expires ON catalog.oauth_pending (expires_at);

-- +goose Down
DROP TABLE catalog.oauth_pending;
DROP TABLE catalog.oauth_clients;
DROP TABLE catalog.oauth_tokens;

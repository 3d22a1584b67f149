-- OAuth state of upstream MCP servers (docs/architecture.md §10.6). Every
-- secret is in `sealed`: AES-256-GCM, nonce || ciphertext, under the key
-- `key_id`, with the row's identity as additional data (a sealed value
-- moved to another row does not open). Plain columns hold no secret.
-- Portable types only, so the PostgreSQL store mirrors these tables.

-- One token per connection: (server, tenant, subject), "" "" = the shared,
-- admin-authorised connection.
CREATE TABLE oauth_tokens (
    server     TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    key_id     TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    expires_at TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (server, tenant, subject)
);

-- Clients registered (RFC 7591) with an authorization server, per server.
CREATE TABLE oauth_clients (
    server     TEXT NOT NULL,
    issuer     TEXT NOT NULL,
    key_id     TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (server, issuer)
);

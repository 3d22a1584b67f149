-- Pending OAuth logins (docs/architecture.md §10.6): the state of a login
-- started by ConnectServer, bound to its server and principal, single use
-- and short-lived. Kept in the store (not in memory) so the authorization
-- server's redirect may land on any catalog replica sharing it. The PKCE
-- verifier and the client are in `sealed` (as in 010_oauth.sql).
CREATE TABLE oauth_pending (
    state      TEXT PRIMARY KEY,
    server     TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    key_id     TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    expires_at INTEGER NOT NULL -- Unix milliseconds
);
CREATE INDEX oauth_pending_expires ON oauth_pending (expires_at);

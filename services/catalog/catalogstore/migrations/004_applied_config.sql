-- The last applied extensions_config.json per file path (docs/decisions/0102):
-- a missing, empty, `{}` or `"mcpServers": null` file keeps this
-- configuration, also at the first start after a bad edit. sha256 is the hex
-- SHA-256 of content.
CREATE TABLE applied_config (
    path       TEXT PRIMARY KEY,
    sha256     TEXT NOT NULL,
    content    BLOB NOT NULL,
    applied_at TEXT NOT NULL
);

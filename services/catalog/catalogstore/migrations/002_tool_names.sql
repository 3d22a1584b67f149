-- Stable exposed names (docs/architecture.md §7, docs/decisions/0100):
-- the exposed name of a (scope, server, tool) pair, assigned once. scope is
-- the visibility scope ('*' for servers visible to every tenant); server is
-- the tool's origin server and tool its original name. base is the plain
-- name the pair asked for when assigned (`<server>_<tool>` or `<tool>`), so a
-- change of tool_name_prefix is a rename, not a collision. Rows of pairs no
-- longer in the catalog are kept until last_seen_at is older than
-- catalog.name_retention. Times are RFC 3339 UTC.
CREATE TABLE tool_names (
    scope        TEXT NOT NULL,
    server       TEXT NOT NULL,
    tool         TEXT NOT NULL,
    base         TEXT NOT NULL,
    name         TEXT NOT NULL,
    assigned_at  TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    PRIMARY KEY (scope, server, tool),
    UNIQUE (scope, name)
);

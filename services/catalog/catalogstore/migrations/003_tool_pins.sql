-- Definition pinning (docs/architecture.md §7, docs/decisions/0101): per
-- (scope, server, tool) pair of a pinned server, the approved definition
-- (its hash and its canonical RFC 8785 JSON, kept for diffs; '' and empty
-- when a new tool waits for review) and the last rejected hash. The state of
-- a tool follows from its current hash: = approved_hash → ACTIVE, =
-- rejected_hash → REJECTED, approved_hash '' → PENDING, else CHANGED.
CREATE TABLE tool_pins (
    scope               TEXT NOT NULL,
    server              TEXT NOT NULL,
    tool                TEXT NOT NULL,
    approved_hash       TEXT NOT NULL,
    approved_definition BLOB NOT NULL,
    rejected_hash       TEXT NOT NULL DEFAULT '',
    updated_at          TEXT NOT NULL,
    PRIMARY KEY (scope, server, tool)
);

-- Review decisions on tool definitions (approve / reject), append-only.
-- diff is a JSON array of {"path", "old", "new"} (JSON Pointers, RFC 6901).
CREATE TABLE tool_audit (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    at              TEXT NOT NULL,
    actor           TEXT NOT NULL,
    action          TEXT NOT NULL CHECK (action IN ('approve', 'reject')),
    scope           TEXT NOT NULL,
    server          TEXT NOT NULL,
    tool            TEXT NOT NULL,
    name            TEXT NOT NULL,
    previous_hash   TEXT NOT NULL,
    definition_hash TEXT NOT NULL,
    diff            TEXT NOT NULL
);

-- Policy lines (ptype "p": v0..v6 = sub, dom, rtype, obj, act, eft, cond) and
-- role links (ptype "g": v0..v2 = member, role, domain), in Casbin's
-- casbin_rule layout plus the owning source. Store order (id) is the order
-- Casbin evaluates lines in.
CREATE TABLE casbin_rule (
  id     INTEGER PRIMARY KEY AUTOINCREMENT,
  ptype  TEXT NOT NULL,
  v0     TEXT NOT NULL DEFAULT '',
  v1     TEXT NOT NULL DEFAULT '',
  v2     TEXT NOT NULL DEFAULT '',
  v3     TEXT NOT NULL DEFAULT '',
  v4     TEXT NOT NULL DEFAULT '',
  v5     TEXT NOT NULL DEFAULT '',
  v6     TEXT NOT NULL DEFAULT '',
  source TEXT NOT NULL DEFAULT 'api',
  UNIQUE (ptype, v0, v1, v2, v3, v4, v5, v6)
);

-- The policy version, bumped in the same transaction as every policy change.
CREATE TABLE policy_meta (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  version    INTEGER NOT NULL,
  updated_ns INTEGER NOT NULL
);
INSERT INTO policy_meta (id, version, updated_ns) VALUES (1, 0, 0);

-- The append-only decision log. Filter columns are copied out of the JSON
-- record for indexing.
CREATE TABLE decisions (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  id             TEXT NOT NULL UNIQUE,
  kind           INTEGER NOT NULL,
  time_ns        INTEGER NOT NULL,
  tenant         TEXT NOT NULL,
  subject        TEXT NOT NULL,
  resource       TEXT NOT NULL,
  allow          INTEGER NOT NULL,
  policy_version INTEGER NOT NULL,
  record         TEXT NOT NULL
);
CREATE INDEX decisions_tenant_seq ON decisions (tenant, seq);
CREATE INDEX decisions_time ON decisions (time_ns);

-- The skills service's schema (services/skills/skillspg): skill metadata,
-- content versions (JSON manifests of {path, digest, size, executable}),
-- the edit history, enable states and the file bytes themselves
-- (content-addressed blobs in bytea, at most the package limit each).
-- Times are Unix nanoseconds, as in skillssqlite. Expand/contract: later
-- migrations only add while two versions may run side by side
-- (docs/decisions/0080-postgresql-stores.md).

-- +goose Up
CREATE TABLE skills.skills (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  category   text NOT NULL CHECK (category IN ('public', 'integration', 'custom')),
  owner      text NOT NULL,
  name       text NOT NULL,
  version    integer NOT NULL,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  UNIQUE (category, owner, name)
);

CREATE TABLE skills.skill_versions (
  skill_id   bigint NOT NULL REFERENCES skills.skills (id) ON DELETE CASCADE,
  version    integer NOT NULL,
  digest     text NOT NULL,
  manifest   jsonb NOT NULL,
  created_at bigint NOT NULL,
  PRIMARY KEY (skill_id, version)
);

CREATE TABLE skills.skill_history (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  skill_id      bigint NOT NULL REFERENCES skills.skills (id) ON DELETE CASCADE,
  version       integer NOT NULL,
  action        text NOT NULL,
  author        text NOT NULL,
  at            bigint NOT NULL,
  digest        text NOT NULL,
  scan_decision text NOT NULL,
  counts        jsonb NOT NULL
);
CREATE INDEX skill_history_skill ON skills.skill_history (skill_id, id);

-- Enable state: user_key '' = global (public skills); otherwise per user.
CREATE TABLE skills.skill_enabled (
  skill_id   bigint NOT NULL REFERENCES skills.skills (id) ON DELETE CASCADE,
  user_key   text NOT NULL,
  enabled    boolean NOT NULL,
  updated_at bigint NOT NULL,
  PRIMARY KEY (skill_id, user_key)
);

-- File bytes by hex SHA-256 (skillsstore.Blobs). touched_ns is the last
-- Put of the bytes by any replica: a blob touched within the collection
-- grace period may be about to be referenced and is not deleted.
CREATE TABLE skills.blobs (
  digest     text PRIMARY KEY CHECK (digest ~ '^[0-9a-f]{64}$'),
  data       bytea NOT NULL,
  touched_ns bigint NOT NULL
);

-- +goose Down
DROP TABLE skills.blobs;
DROP TABLE skills.skill_enabled;
DROP TABLE skills.skill_history;
DROP TABLE skills.skill_versions;
DROP TABLE skills.skills;

-- Skills metadata (services/skills/skillsstore). File bytes live in the blob
-- store; versions keep JSON manifests of {path, digest, size, executable}.
CREATE TABLE skills (
    id         INTEGER PRIMARY KEY,
    category   TEXT    NOT NULL CHECK (category IN ('public', 'integration', 'custom')),
    owner      TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (category, owner, name)
);

CREATE TABLE skill_versions (
    skill_id   INTEGER NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
    version    INTEGER NOT NULL,
    digest     TEXT    NOT NULL,
    manifest   TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (skill_id, version)
);

CREATE TABLE skill_history (
    id            INTEGER PRIMARY KEY,
    skill_id      INTEGER NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
    version       INTEGER NOT NULL,
    action        TEXT    NOT NULL,
    author        TEXT    NOT NULL,
    at            INTEGER NOT NULL,
    digest        TEXT    NOT NULL,
    scan_decision TEXT    NOT NULL,
    counts        TEXT    NOT NULL
);
CREATE INDEX skill_history_skill ON skill_history (skill_id, id);

-- Enable state: user_key '' = global (public skills); otherwise per user.
CREATE TABLE skill_enabled (
    skill_id   INTEGER NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
    user_key   TEXT    NOT NULL,
    enabled    INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (skill_id, user_key)
);

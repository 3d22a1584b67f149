CREATE TABLE threads (
  id            TEXT PRIMARY KEY,
  owner_tenant  TEXT NOT NULL,
  owner_subject TEXT NOT NULL,
  create_ns     INTEGER NOT NULL,
  update_ns     INTEGER NOT NULL,
  state         BLOB NOT NULL,
  read_marks    TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX threads_owner ON threads(owner_tenant, owner_subject, create_ns DESC, id DESC);
CREATE INDEX threads_update ON threads(update_ns);

CREATE TABLE messages (
  seq       INTEGER PRIMARY KEY AUTOINCREMENT,
  thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
  body      BLOB NOT NULL
);
CREATE INDEX messages_thread ON messages(thread_id, seq);

CREATE TABLE events (
  seq       INTEGER PRIMARY KEY AUTOINCREMENT,
  thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
  kind      TEXT NOT NULL,
  detail    TEXT NOT NULL,
  time_ns   INTEGER NOT NULL
);
CREATE INDEX events_thread ON events(thread_id, seq);

CREATE TABLE runs (
  run_id    TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
  status    INTEGER NOT NULL,
  start_ns  INTEGER NOT NULL,
  body      BLOB NOT NULL
);
CREATE INDEX runs_thread ON runs(thread_id, start_ns DESC);
CREATE INDEX runs_status ON runs(status);

CREATE TABLE agents (
  name TEXT PRIMARY KEY,
  body BLOB NOT NULL
);

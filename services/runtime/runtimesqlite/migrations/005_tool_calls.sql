-- Idempotent ExecuteToolCall (docs/decisions/0082-idempotent-tool-calls.md);
-- the same table as runtimepg's migration 00003.
CREATE TABLE tool_calls (
  thread_id   TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
  call_id     TEXT NOT NULL,
  state       INTEGER NOT NULL,
  fingerprint TEXT NOT NULL,
  owner       TEXT NOT NULL,
  lease_ns    INTEGER NOT NULL,
  create_ns   INTEGER NOT NULL,
  result      BLOB,
  PRIMARY KEY (thread_id, call_id)
);
CREATE INDEX tool_calls_created ON tool_calls(create_ns);

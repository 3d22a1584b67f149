-- Idempotent ExecuteToolCall (docs/decisions/0082-idempotent-tool-calls.md):
-- one row per (thread_id, tool_call_id), claimed before the call runs
-- (state 1, the executing replica and its lease) and holding the result
-- (state 2, a marshalled ToolResult) once the call's state update commits.
-- Expand only: a new table.

-- +goose Up
CREATE TABLE runtime.tool_calls (
  thread_id   text NOT NULL REFERENCES runtime.threads (id) ON DELETE CASCADE,
  call_id     text NOT NULL,
  state       integer NOT NULL,
  fingerprint text NOT NULL,
  owner       text NOT NULL,
  lease_ns    bigint NOT NULL,
  create_ns   bigint NOT NULL,
  result      bytea,
  PRIMARY KEY (thread_id, call_id)
);
CREATE INDEX tool_calls_created ON runtime.tool_calls (create_ns);

-- +goose Down
DROP TABLE runtime.tool_calls;

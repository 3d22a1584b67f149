-- The runtime's schema (services/runtime/runtimepg). Thread state is one
-- protobuf blob per thread, updated under a row lock (SELECT ... FOR UPDATE)
-- so the promotion reducer is race-free across replicas. Times are Unix
-- nanoseconds, as in runtimesqlite. Expand/contract: later migrations only
-- add (columns with defaults, tables, indexes) while two versions may run
-- side by side (docs/decisions/0080-postgresql-stores.md).

-- +goose Up
CREATE TABLE runtime.threads (
  id            text PRIMARY KEY,
  owner_tenant  text NOT NULL,
  owner_subject text NOT NULL,
  create_ns     bigint NOT NULL,
  update_ns     bigint NOT NULL,
  state         bytea NOT NULL,
  read_marks    jsonb NOT NULL DEFAULT '{}',
  -- Subagent threads (runtimestore.Child): parent_id is '' for every other
  -- thread; child is the marker with the agent override, NULL otherwise.
  parent_id     text NOT NULL DEFAULT '',
  child         jsonb
);
CREATE INDEX threads_owner ON runtime.threads (owner_tenant, owner_subject, create_ns DESC, id DESC) WHERE parent_id = '';
CREATE INDEX threads_update ON runtime.threads (update_ns);
CREATE INDEX threads_parent ON runtime.threads (parent_id) WHERE parent_id <> '';

CREATE TABLE runtime.messages (
  seq       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  thread_id text NOT NULL REFERENCES runtime.threads (id) ON DELETE CASCADE,
  body      bytea NOT NULL,
  create_ns bigint NOT NULL,
  role      integer NOT NULL
);
CREATE INDEX messages_thread ON runtime.messages (thread_id, seq);
CREATE INDEX messages_time ON runtime.messages (create_ns);

CREATE TABLE runtime.events (
  seq       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  thread_id text NOT NULL REFERENCES runtime.threads (id) ON DELETE CASCADE,
  kind      text NOT NULL,
  detail    text NOT NULL,
  time_ns   bigint NOT NULL
);
CREATE INDEX events_thread ON runtime.events (thread_id, seq);

CREATE TABLE runtime.runs (
  run_id    text PRIMARY KEY,
  -- ins orders runs that started in the same nanosecond (insertion order).
  ins       bigint GENERATED ALWAYS AS IDENTITY,
  thread_id text NOT NULL REFERENCES runtime.threads (id) ON DELETE CASCADE,
  status    integer NOT NULL,
  start_ns  bigint NOT NULL,
  body      bytea NOT NULL
);
CREATE INDEX runs_thread ON runtime.runs (thread_id, start_ns DESC, ins DESC);
CREATE INDEX runs_status ON runtime.runs (status);

CREATE TABLE runtime.agents (
  name text PRIMARY KEY,
  body bytea NOT NULL
);

-- +goose Down
DROP TABLE runtime.agents;
DROP TABLE runtime.runs;
DROP TABLE runtime.events;
DROP TABLE runtime.messages;
DROP TABLE runtime.threads;

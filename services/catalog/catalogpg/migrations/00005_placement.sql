-- Placement of `stateful: true` servers across catalog replicas
-- (docs/decisions/0086-session-placement.md). `replicas` is the membership:
-- one row per replica address (catalog.placement.advertise_address),
-- refreshed every heartbeat; a replica whose heartbeat is older than
-- catalog.placement.member_timeout is no longer a member. `stateful_tools`
-- holds the tools each stateful server's owner listed, so every replica
-- lists them while only the owner runs the server. Which replica runs a
-- server is decided by rendezvous hashing of its name over the members and
-- guarded by a session advisory lock per server, not by a table.
-- Expand-only: new tables.

-- +goose Up
CREATE TABLE catalog.replicas (
  address      text PRIMARY KEY,
  instance     text NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE catalog.stateful_tools (
  server     text PRIMARY KEY,
  owner      text NOT NULL,
  tools      jsonb NOT NULL,
  version    bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE catalog.stateful_tools;
DROP TABLE catalog.replicas;

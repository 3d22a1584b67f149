-- The authz service's schema (services/authz/authzpg): the policy in
-- Casbin's casbin_rule layout with the owning source per line, the policy
-- version (its row lock serialises every policy write, so identity order is
-- store order, the order Casbin evaluates lines in), and the append-only
-- decision log. Expand/contract: later migrations only add while two
-- versions may run side by side (docs/decisions/0080-postgresql-stores.md).

-- +goose Up
CREATE TABLE authz.casbin_rule (
  id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  ptype  text NOT NULL,
  v0     text NOT NULL DEFAULT '',
  v1     text NOT NULL DEFAULT '',
  v2     text NOT NULL DEFAULT '',
  v3     text NOT NULL DEFAULT '',
  v4     text NOT NULL DEFAULT '',
  v5     text NOT NULL DEFAULT '',
  v6     text NOT NULL DEFAULT '',
  source text NOT NULL DEFAULT 'api',
  UNIQUE (ptype, v0, v1, v2, v3, v4, v5, v6)
);
CREATE INDEX casbin_rule_source ON authz.casbin_rule (source);

CREATE TABLE authz.policy_meta (
  id         integer PRIMARY KEY CHECK (id = 1),
  version    bigint NOT NULL,
  updated_ns bigint NOT NULL
);
INSERT INTO authz.policy_meta (id, version, updated_ns) VALUES (1, 0, 0);

-- Filter columns are copied out of the JSON record for indexing.
CREATE TABLE authz.decisions (
  seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id             text NOT NULL UNIQUE,
  kind           integer NOT NULL,
  time_ns        bigint NOT NULL,
  tenant         text NOT NULL,
  subject        text NOT NULL,
  resource       text NOT NULL,
  allow          boolean NOT NULL,
  policy_version bigint NOT NULL,
  record         jsonb NOT NULL
);
CREATE INDEX decisions_tenant_seq ON authz.decisions (tenant, seq);
CREATE INDEX decisions_time ON authz.decisions (time_ns);

-- +goose Down
DROP TABLE authz.decisions;
DROP TABLE authz.policy_meta;
DROP TABLE authz.casbin_rule;

-- The catalog's schema (services/catalog/catalogpg): the vector cache of
-- the remote embedder keyed by search.VectorKey (hex SHA-256 of model, NUL,
-- text); vec is dim float32 values, little-endian, as in catalogstore.
-- Server configuration, name assignments and pins join this schema in
-- later (expand-only) migrations (docs/decisions/0080-postgresql-stores.md).

-- +goose Up
CREATE TABLE catalog.vectors (
  key        text PRIMARY KEY,
  model      text NOT NULL,
  dim        integer NOT NULL,
  vec        bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX vectors_model ON catalog.vectors (model);

-- +goose Down
DROP TABLE catalog.vectors;

-- Embedding vectors of the remote embedder, keyed by search.VectorKey
-- (hex SHA-256 of model, NUL, text). vec is dim float32 values, little-endian.
CREATE TABLE vectors (
    key        TEXT PRIMARY KEY,
    model      TEXT NOT NULL,
    dim        INTEGER NOT NULL,
    vec        BLOB NOT NULL,
    created_at TEXT NOT NULL
);

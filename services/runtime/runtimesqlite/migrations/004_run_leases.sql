-- Run ownership (docs/decisions/0081-run-leases.md): the process executing
-- a RUNNING run, until when its lease holds, and the cancel flag; the same
-- columns as runtimepg's migration 00002.
ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_running_owner ON runs(owner) WHERE status = 1;

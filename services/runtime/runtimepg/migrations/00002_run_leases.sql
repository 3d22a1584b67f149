-- Run ownership across replicas (docs/decisions/0081-run-leases.md): the
-- replica executing a RUNNING run, until when its lease holds, and the
-- cancel flag another replica's CancelRun sets for the owner to poll.
-- Expand only: columns with defaults and an index; a run written by a
-- replica of the previous release has no lease and counts as expired.

-- +goose Up
ALTER TABLE runtime.runs ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE runtime.runs ADD COLUMN lease_ns bigint NOT NULL DEFAULT 0;
ALTER TABLE runtime.runs ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
CREATE INDEX runs_running_owner ON runtime.runs (owner) WHERE status = 1;

-- +goose Down
DROP INDEX runtime.runs_running_owner;
ALTER TABLE runtime.runs DROP COLUMN cancel_requested;
ALTER TABLE runtime.runs DROP COLUMN lease_ns;
ALTER TABLE runtime.runs DROP COLUMN owner;

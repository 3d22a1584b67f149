-- The sequence number of a run's last event (RunEvent.seq), recorded when
-- the run stops to wait for input, so a ResumeRun on another replica
-- continues the numbering (docs/decisions/0089-run-event-seq.md).
-- Expand only: a column with a default; a replica of the previous release
-- neither writes nor reads it.

-- +goose Up
ALTER TABLE runtime.runs ADD COLUMN event_seq bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE runtime.runs DROP COLUMN event_seq;

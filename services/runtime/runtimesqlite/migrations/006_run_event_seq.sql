-- The sequence number of a run's last event (docs/decisions/0089-run-event-seq.md);
-- the same column as runtimepg's migration 00004.
ALTER TABLE runs ADD COLUMN event_seq INTEGER NOT NULL DEFAULT 0;

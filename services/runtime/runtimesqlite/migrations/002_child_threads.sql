-- Subagent threads (runtimestore.Child): parent_id is '' for every other
-- thread, so ListThreads hides children with an indexed filter; child is the
-- JSON of the marker with the agent override.
ALTER TABLE threads ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE threads ADD COLUMN child TEXT NOT NULL DEFAULT '';
CREATE INDEX threads_parent ON threads(parent_id);

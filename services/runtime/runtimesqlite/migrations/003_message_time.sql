-- Message creation time and role as columns, for message retention by
-- whole turns (runtimestore.Store.PurgeMessagesBefore). -1 = not yet filled:
-- rows written before this migration are filled from their body at Open.
ALTER TABLE messages ADD COLUMN create_ns INTEGER NOT NULL DEFAULT -1;
ALTER TABLE messages ADD COLUMN role INTEGER NOT NULL DEFAULT -1;
CREATE INDEX messages_time ON messages(create_ns);

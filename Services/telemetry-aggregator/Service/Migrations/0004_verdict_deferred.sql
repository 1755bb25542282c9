-- A verdict read before its raw event is counted when the raw event is read, with its dimensions: the row
-- says the verdict waits for that. Rows already stored were counted when their verdict was read.
ALTER TABLE __SCHEMA__.attendance_events ADD COLUMN verdict_deferred boolean NOT NULL DEFAULT false;

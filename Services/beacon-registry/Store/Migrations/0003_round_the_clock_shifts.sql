-- A shift whose end equals its start runs 24 hours (round the clock), as the merger already reads
-- it (an end at or before the start ends the next day). The registry no longer refuses it.
ALTER TABLE __SCHEMA__.sites DROP CONSTRAINT IF EXISTS sites_shift_not_empty;

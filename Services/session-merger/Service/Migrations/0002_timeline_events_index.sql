-- Timelines are stored as their header only (clock, watermark, reported sessions); the events are
-- read back from __SCHEMA__.events when a timeline is not in the merger's memory. This index serves that
-- read: the accepted events of one (user, site) from the timeline's watermark on.
CREATE INDEX events_timeline_idx ON __SCHEMA__.events (user_id, site_id, event_time) WHERE outcome = 'accepted';

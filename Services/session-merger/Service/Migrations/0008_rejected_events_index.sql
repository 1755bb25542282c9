-- The admin API lists a user's events by event time (`GET /v1/admin/events`): accepted ones through
-- events_timeline_idx, refused ones through this index. Refused events are a small share of all, so
-- the merger's inserts rarely pay for it.
CREATE INDEX events_rejected_user_idx ON __SCHEMA__.events (user_id, event_time, idempotency_key) WHERE outcome = 'rejected';

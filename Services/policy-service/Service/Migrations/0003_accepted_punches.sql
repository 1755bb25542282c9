-- The punches the policy accepted, so that the rules which compare a punch with the user's earlier
-- ones (rate_limit, multi_device, impossible_travel, and the site a check-out without one is judged
-- under) see the punches decided before a restart, or by the instance that owned the user's
-- partition before a rebalance. Written once per polled batch, before the batch's offsets are
-- committed (PunchLedger); read when a user is first seen after the partitions were assigned;
-- pruned once the event time is older than the history's retention (15 days).
CREATE TABLE IF NOT EXISTS __SCHEMA__.accepted_punches (
    user_id         text NOT NULL,
    idempotency_key text NOT NULL,
    device_id       text NOT NULL,
    site_id         text,
    gate_id         text,
    type            text NOT NULL CHECK (type IN ('checkin', 'checkout')),
    event_time      timestamptz NOT NULL,
    PRIMARY KEY (user_id, idempotency_key)
);
CREATE INDEX IF NOT EXISTS accepted_punches_user_time_idx ON __SCHEMA__.accepted_punches (user_id, event_time);
CREATE INDEX IF NOT EXISTS accepted_punches_time_idx ON __SCHEMA__.accepted_punches (event_time);

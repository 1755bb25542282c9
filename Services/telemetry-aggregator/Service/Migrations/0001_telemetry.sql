-- Telemetry aggregator schema (DESIGN.md "Telemetry and SLO"). `__SCHEMA__` is replaced by the
-- schema name when the migrations load (`telemetry` in production; tests use a schema of their own).
--
-- One transaction per consumed batch writes the identities it counted, the rollup increments and the
-- consumer offsets: a message counted once stays counted once, whatever crashes or replays.

CREATE SCHEMA IF NOT EXISTS __SCHEMA__;

-- Next offset to read per (group, topic, partition): where a newly assigned partition resumes.
CREATE TABLE __SCHEMA__.consumer_offsets (
    group_id    text NOT NULL,
    topic       text NOT NULL,
    partition   integer NOT NULL,
    next_offset bigint NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic, partition)
);

-- Counters per minute (the minute of the event's own time) and dimension combination. `sum_micros`
-- is the sum of the counted values in millionths of their unit: integer, so adding is exact.
CREATE TABLE __SCHEMA__.rollup_minute (
    metric       text NOT NULL,
    minute       timestamptz NOT NULL,
    site         text NOT NULL,
    app_version  text NOT NULL,
    device_model text NOT NULL,
    count        bigint NOT NULL,
    sum_micros   bigint NOT NULL,
    PRIMARY KEY (metric, minute, site, app_version, device_model)
);

-- Latency histograms per minute: one row per occupied LogHistogram bucket, merged by adding counts.
CREATE TABLE __SCHEMA__.latency_minute (
    metric       text NOT NULL,
    minute       timestamptz NOT NULL,
    site         text NOT NULL,
    app_version  text NOT NULL,
    device_model text NOT NULL,
    bucket       integer NOT NULL,
    count        bigint NOT NULL,
    PRIMARY KEY (metric, minute, site, app_version, device_model, bucket)
);

-- Device telemetry events already counted (device id + the device's event id).
CREATE TABLE __SCHEMA__.seen_telemetry (
    device_id text NOT NULL,
    event_id  text NOT NULL,
    seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, event_id)
);
CREATE INDEX seen_telemetry_seen_at ON __SCHEMA__.seen_telemetry (seen_at);

-- Attendance events by idempotency key: the first receipt (raw topic) and the first verdict. A row
-- may start from either side: a verdict can be read before its raw event (different topics).
CREATE TABLE __SCHEMA__.attendance_events (
    idempotency_key text PRIMARY KEY,
    trigger_at      timestamptz NULL,
    received_at     timestamptz NULL,
    site            text NOT NULL,
    app_version     text NOT NULL,
    device_model    text NOT NULL,
    verdict_at      timestamptz NULL,
    verdict_outcome text NULL,
    seen_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX attendance_events_seen_at ON __SCHEMA__.attendance_events (seen_at);

-- Session changes already counted.
CREATE TABLE __SCHEMA__.seen_session_changes (
    session_id text NOT NULL,
    version    bigint NOT NULL,
    seen_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, version)
);

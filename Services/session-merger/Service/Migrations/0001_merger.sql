-- Session merger schema (DESIGN.md "The no-loss contract", "Sessions (merger)").
--
-- One transaction per consumed batch writes the events, the timelines, the sessions, the session
-- changes to publish (outbox) and the consumer offsets: exactly-once effect whatever crashes.
--
-- __SCHEMA__.events and __SCHEMA__.sessions are read (read-only) by the ingest gateway for
-- GET /v1/attendance/events/{key} and GET /v1/attendance/pending: their columns are a contract.

CREATE SCHEMA IF NOT EXISTS __SCHEMA__;

-- Every vetted event ever recorded, accepted or rejected: the dedupe of record (a retry with the same
-- key replays this outcome) and what the gateway answers lookups from.
CREATE TABLE __SCHEMA__.events (
    idempotency_key     text PRIMARY KEY,
    request_id          text NOT NULL,
    user_id             text NOT NULL,
    device_id           text NOT NULL,
    -- The site the event was attributed to (the envelope's, the body's, or the session key's).
    site_id             text NULL,
    -- RawEventKind raw value: event, check_in, check_out, heartbeat.
    kind                text NOT NULL,
    -- AttendanceEventType raw value: checkin, checkout, heartbeat.
    event_type          text NOT NULL,
    session_key         text NULL,
    event_time          timestamptz NOT NULL,
    -- The envelope's receivedAt (gateway receipt).
    received_at         timestamptz NOT NULL,
    -- When the merger's transaction recorded it.
    recorded_at         timestamptz NOT NULL,
    payload_fingerprint text NOT NULL,
    outcome             text NOT NULL CHECK (outcome IN ('accepted', 'rejected')),
    http_status         int NOT NULL CHECK (http_status IN (201, 409)),
    server_receipt_id   text NOT NULL UNIQUE,
    -- The session the event was placed in when recorded (a superseded id is rewritten to its survivor).
    session_id          text NULL,
    -- Why it was refused: a JSON array of strings (empty when accepted).
    reasons             jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(reasons) = 'array'),
    -- AppAction raw value.
    action              text NOT NULL,
    retry_after_seconds int NULL,
    policy_version      int NULL,
    risk_score          double precision NULL,
    -- The policy decision's time.
    decided_at          timestamptz NOT NULL,
    -- The RawEventEnvelope as ProtocolCodec wire JSON.
    envelope            jsonb NOT NULL,
    -- Beyond the contract: where it came from.
    gateway_instance    text NOT NULL,
    source_topic        text NULL,
    source_partition    int NULL,
    source_offset       bigint NULL
);
CREATE INDEX events_device_received_idx ON __SCHEMA__.events (device_id, received_at);
CREATE INDEX events_session_idx ON __SCHEMA__.events (session_id) WHERE session_id IS NOT NULL;

-- The latest state of every session (a row per session id; versions only grow).
CREATE TABLE __SCHEMA__.sessions (
    session_id   text PRIMARY KEY,
    user_id      text NOT NULL,
    site_id      text NOT NULL,
    status       text NOT NULL CHECK (status IN ('open', 'soft_exit', 'closed')),
    check_in_at  timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    check_out_at timestamptz NULL,
    -- check_out, presence_timeout, superseded (status closed), ...
    close_reason text NULL,
    session_keys jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(session_keys) = 'array'),
    version      int NOT NULL CHECK (version > 0),
    updated_at   timestamptz NOT NULL,
    -- Beyond the contract: the session a superseded id's events joined, and the event count.
    superseded_by text NULL,
    event_count  int NOT NULL DEFAULT 0
);
CREATE INDEX sessions_user_status_idx ON __SCHEMA__.sessions (user_id, status);
CREATE INDEX sessions_site_check_in_idx ON __SCHEMA__.sessions (site_id, check_in_at);
CREATE INDEX sessions_user_check_in_idx ON __SCHEMA__.sessions (user_id, check_in_at);

-- The SessionTimeline state of each (user, site): TimelineState as JSON, with an optimistic version
-- and the earliest time the idle sweep has something to do for it.
CREATE TABLE __SCHEMA__.timelines (
    user_id       text NOT NULL,
    site_id       text NOT NULL,
    state         text NOT NULL,
    version       bigint NOT NULL CHECK (version > 0),
    event_count   int NOT NULL,
    next_check_at timestamptz NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (user_id, site_id)
);
CREATE INDEX timelines_next_check_idx ON __SCHEMA__.timelines (next_check_at) WHERE next_check_at IS NOT NULL;

-- Which site a device session key belongs to (check-outs and heartbeats carry only the key).
CREATE TABLE __SCHEMA__.session_keys (
    user_id     text NOT NULL,
    session_key text NOT NULL,
    site_id     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, session_key)
);

-- The next offset to read per (group, topic, partition), written in the batch's transaction. The
-- source of truth on partition assignment; the broker's committed offsets are informational.
CREATE TABLE __SCHEMA__.consumer_offsets (
    group_id    text NOT NULL,
    topic       text NOT NULL,
    partition   int NOT NULL CHECK (partition >= 0),
    next_offset bigint NOT NULL CHECK (next_offset >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic, partition)
);

-- Session changes committed but not yet acknowledged by the broker (attendance.sessions). Written in
-- the batch's (or the idle sweep's) transaction; the publisher deletes rows after their delivery report.
CREATE TABLE __SCHEMA__.session_change_outbox (
    id         bigserial PRIMARY KEY,
    session_id text NOT NULL,
    user_id    text NOT NULL,
    version    bigint NOT NULL,
    -- The SessionChange as ProtocolCodec wire JSON.
    payload    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

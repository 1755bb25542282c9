-- The status page and /v1/metrics/summary read a window of minutes over every metric, and the pruning job
-- deletes minutes past the retention every 10 minutes: the primary keys lead with the metric, so both read
-- the whole 35 days of the rollups. Seen session changes are pruned by their seen_at, which no index held.
CREATE INDEX rollup_minute_minute_idx ON __SCHEMA__.rollup_minute (minute);
CREATE INDEX latency_minute_minute_idx ON __SCHEMA__.latency_minute (minute);
CREATE INDEX seen_session_changes_seen_at ON __SCHEMA__.seen_session_changes (seen_at);

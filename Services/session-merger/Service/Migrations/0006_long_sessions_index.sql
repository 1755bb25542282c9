-- Sessions longer than 31 days (a phone that never went 12 hours without a heartbeat): the daily
-- attendance query finds ordinary sessions by their check-in, at most 31 days before the range, and
-- these by their end. The index holds only them, so it stays small.
CREATE INDEX sessions_long_idx ON __SCHEMA__.sessions (site_id, (COALESCE(check_out_at, last_seen_at)))
    WHERE COALESCE(check_out_at, last_seen_at) - check_in_at > interval '31 days';

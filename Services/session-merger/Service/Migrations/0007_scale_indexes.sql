-- What a year of a large customer's data needs. The hourly retention job finds old events by their
-- receipt (received_at): without an index it read the whole events table, twice an hour. "Who is on site
-- now" (GET /v1/admin/sessions?siteId=...&status=open) pages through a site's sessions that are not
-- closed in check-in order: without an index it visited every session of the site's history first. The
-- second index holds only sessions not closed, so it stays small and closed sessions never touch it.
-- Both are built in this migration's transaction, which holds the tables' write lock while they build:
-- on a deployment that already holds years of events, see the RUNBOOK's "Upgrades".
CREATE INDEX events_received_at_idx ON __SCHEMA__.events (received_at);
CREATE INDEX sessions_site_unclosed_idx ON __SCHEMA__.sessions (site_id, status, check_in_at, session_id)
    WHERE status <> 'closed';

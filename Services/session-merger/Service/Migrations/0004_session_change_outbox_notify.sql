-- Every transaction that adds session changes wakes the outbox publisher at its commit, so a change
-- reaches attendance.sessions within milliseconds and an idle publisher does not poll: it polled
-- every 200 ms before, 300 transactions a minute on an idle merger. MERGER_OUTBOX_POLL_MS is now only
-- the fallback for a notification missed while the listening connection was being replaced.
CREATE FUNCTION __SCHEMA__.notify_session_change_outbox() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_notify('session_change_outbox', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER session_change_outbox_notify
    AFTER INSERT ON __SCHEMA__.session_change_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.notify_session_change_outbox();

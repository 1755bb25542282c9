-- Every transaction that adds session changes wakes the outbox publisher at its commit, so a change
-- reaches attendance.sessions within milliseconds and an idle publisher does not poll: it polled
-- every 200 ms before, 300 transactions a minute on an idle merger. MERGER_OUTBOX_POLL_MS is now only
-- the fallback for a notification missed while the listening connection was being replaced.
-- public.notify_outbox_relay is the migration runner's, shared by every outbox.
CREATE TRIGGER session_change_outbox_notify AFTER INSERT ON __SCHEMA__.session_change_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION public.notify_outbox_relay('session_change_outbox');

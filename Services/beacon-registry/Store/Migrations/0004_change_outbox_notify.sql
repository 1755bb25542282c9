-- Every transaction that adds registry changes wakes the feed publisher at its commit, so a change
-- reaches the feed's readers within milliseconds instead of at the publisher's next poll. Readers
-- that must not decide from a view older than an event wait for the feed as of that event (the
-- policy service), and that wait is as long as this delay.
CREATE FUNCTION __SCHEMA__.notify_change_outbox() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_notify('registry_change_outbox', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER change_outbox_notify
    AFTER INSERT ON __SCHEMA__.change_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.notify_change_outbox();

-- The change outbox's trigger runs the trigger function every outbox shares (public.notify_outbox_relay,
-- created by the migration runner) on the same channel; the registry's own copy of it goes.
DROP TRIGGER change_outbox_notify ON __SCHEMA__.change_outbox;
CREATE TRIGGER change_outbox_notify AFTER INSERT ON __SCHEMA__.change_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION public.notify_outbox_relay('registry_change_outbox');
DROP FUNCTION __SCHEMA__.notify_change_outbox();

-- When a user's sites last changed (assigned at creation, or replaced): the policy's site_assignment rule
-- does not refuse an event made before it (judged against sites that may have changed since). Unknown
-- for users before this migration: those are judged as before.
ALTER TABLE __SCHEMA__.users ADD COLUMN sites_changed_at timestamptz NULL;

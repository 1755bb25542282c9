-- A refill of a lost feed topic (RegistryFeedRepair) is framed by two rows of entity type 'feed':
-- 'refill-started' before the copies of every entity's latest change and 'refill-ended' after them
-- (its payload names the start's id), so a reader starting meanwhile knows its view is the whole
-- registry only once it has read the end. Readers ignore entity types they do not keep.
ALTER TABLE __SCHEMA__.change_outbox DROP CONSTRAINT change_outbox_entity_type_valid;
ALTER TABLE __SCHEMA__.change_outbox ADD CONSTRAINT change_outbox_entity_type_valid CHECK (entity_type IN (
    'organization', 'site', 'gate', 'namespace', 'minor', 'beacon', 'user', 'device', 'enrollment_code', 'api_key', 'feed'
));

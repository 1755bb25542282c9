-- The relay now deletes an entity's earlier published changes as it publishes a later one: the outbox
-- keeps, like the compacted feed, each entity's latest change. This removes the history written before.
DELETE FROM __SCHEMA__.change_outbox o
WHERE o.published_at IS NOT NULL
  AND EXISTS (
      SELECT 1 FROM __SCHEMA__.change_outbox n
      WHERE n.entity_type = o.entity_type AND n.entity_id = o.entity_id AND n.id > o.id AND n.published_at IS NOT NULL);

-- Sightings are pruned hourly by their time (two days kept); the only index led with the beacon's
-- identity, so the prune read the whole table.
CREATE INDEX beacon_sightings_seen_at_idx ON __SCHEMA__.beacon_sightings (seen_at);

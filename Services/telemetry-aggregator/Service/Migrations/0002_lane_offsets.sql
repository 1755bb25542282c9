-- The stored-offsets table every consumer that keeps its offsets with its results shares
-- (ServiceRuntime's StoredOffsetsTable) now has a row per write lane. The aggregator stores each
-- batch in one transaction: its rows are lane 0 of 1, as the existing ones become.
ALTER TABLE __SCHEMA__.consumer_offsets
    ADD COLUMN lane int NOT NULL DEFAULT 0 CHECK (lane >= 0),
    ADD COLUMN lanes int NOT NULL DEFAULT 1 CHECK (lanes >= 1),
    ADD CONSTRAINT consumer_offsets_lane_in_range CHECK (lane < lanes);
ALTER TABLE __SCHEMA__.consumer_offsets DROP CONSTRAINT consumer_offsets_pkey;
ALTER TABLE __SCHEMA__.consumer_offsets ADD PRIMARY KEY (group_id, topic, partition, lane);

-- Offsets per write lane. A batch stored as several concurrent transactions (MERGER_WRITE_LANES, users
-- split by a stable hash) stores each lane's offsets in that lane's own transaction: the row of lane i
-- says that every message of lane i's users below next_offset is stored. `lanes` is the lane count it
-- was written under (a lane means nothing under another count). Existing rows are lane 0 of 1.
ALTER TABLE __SCHEMA__.consumer_offsets
    ADD COLUMN lane int NOT NULL DEFAULT 0 CHECK (lane >= 0),
    ADD COLUMN lanes int NOT NULL DEFAULT 1 CHECK (lanes >= 1),
    ADD CONSTRAINT consumer_offsets_lane_in_range CHECK (lane < lanes);
ALTER TABLE __SCHEMA__.consumer_offsets DROP CONSTRAINT consumer_offsets_pkey;
ALTER TABLE __SCHEMA__.consumer_offsets ADD PRIMARY KEY (group_id, topic, partition, lane);

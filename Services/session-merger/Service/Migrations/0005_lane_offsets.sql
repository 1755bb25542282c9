-- Offsets per write lane. A batch stored as several concurrent transactions (MERGER_WRITE_LANES, users
-- split by a stable hash) stores each lane's offsets in that lane's own transaction: the row of lane i
-- says that every message of lane i's users below next_offset is stored. `lanes` is the lane count it
-- was written under (a lane means nothing under another count). Existing rows are lane 0 of 1.
__STORED_OFFSETS_BY_LANE__

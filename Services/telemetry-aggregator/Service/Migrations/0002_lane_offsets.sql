-- The stored-offsets table every consumer that keeps its offsets with its results shares
-- (ServiceRuntime's StoredOffsetsTable) now has a row per write lane. The aggregator stores each
-- batch in one transaction: its rows are lane 0 of 1, as the existing ones become.
__STORED_OFFSETS_BY_LANE__

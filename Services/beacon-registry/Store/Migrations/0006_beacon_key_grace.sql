-- A rotated GATT key keeps verifying for a grace period: the physical beacon answers challenges
-- with the key it holds until an installer writes the new one, and a refused check-in is final on
-- the phone. A rotation moves the current key here with the end of its grace (the rotate call's
-- graceHours, default a week); a rotation with graceHours=0 (a leaked key) leaves these empty.
-- All three are set together or not at all.
ALTER TABLE __SCHEMA__.beacon_keys
    ADD COLUMN previous_version integer,
    ADD COLUMN previous_sealed_key text,
    ADD COLUMN previous_valid_until timestamptz,
    ADD CONSTRAINT beacon_keys_previous_complete CHECK (
        (previous_version IS NULL) = (previous_sealed_key IS NULL)
        AND (previous_version IS NULL) = (previous_valid_until IS NULL)
    ),
    ADD CONSTRAINT beacon_keys_previous_older CHECK (previous_version IS NULL OR previous_version < version),
    ADD CONSTRAINT beacon_keys_previous_sealed_length CHECK (
        previous_sealed_key IS NULL OR char_length(previous_sealed_key) BETWEEN 16 AND 256
    );

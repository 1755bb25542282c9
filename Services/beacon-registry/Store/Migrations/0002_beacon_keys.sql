-- Each beacon's GATT challenge key (issue 6): a random 32-byte key created by the registry when the
-- beacon is registered, written into the physical beacon by the installer (provisioning plan), and
-- delivered to the policy service on __SCHEMA__.changes. Only the sealed form is stored
-- (ChaCha20-Poly1305 under BEACON_KEY_SEAL_KEY, bound to the beacon id and the version), so a dump
-- of this database does not reveal a key. SQL cannot seal, so beacons registered before this
-- migration get their key from the registry's start-up backfill
-- (PostgresRegistryRepository.backfillBeaconKeys), not from this file.
CREATE TABLE __SCHEMA__.beacon_keys (
    beacon_id __SCHEMA__.entity_id CONSTRAINT beacon_keys_pkey PRIMARY KEY
        CONSTRAINT beacon_keys_beacon_fkey REFERENCES __SCHEMA__.beacons (id) ON DELETE CASCADE,
    -- 1 when created; each rotation adds one (the policy applies the highest it has read).
    version integer NOT NULL CONSTRAINT beacon_keys_version_positive CHECK (version >= 1),
    -- Base64 of nonce | ciphertext | tag.
    sealed_key text NOT NULL CONSTRAINT beacon_keys_sealed_length CHECK (char_length(sealed_key) BETWEEN 16 AND 256),
    created_at timestamptz NOT NULL DEFAULT now(),
    rotated_at timestamptz NOT NULL DEFAULT now()
);

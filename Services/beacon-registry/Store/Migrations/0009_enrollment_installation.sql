-- The app installation that spent an enrollment code, as the SHA-256 of the id the app sent with it
-- (`installationId`): the same installation presenting the same code again within a day (its first
-- answer was lost) gets the device it enrolled, with a new token, instead of a 409. NULL for codes
-- spent without one, and before this column existed. No default: adding it rewrites nothing.
ALTER TABLE __SCHEMA__.enrollment_codes ADD COLUMN installation_sha256 text
    CONSTRAINT enrollment_codes_installation_sha256_hex CHECK (installation_sha256 ~ '^[0-9a-f]{64}$');

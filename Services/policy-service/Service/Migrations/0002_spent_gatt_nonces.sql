-- GATT challenge nonces already presented (issue 6): a nonce is single-use across restarts
-- and across every instance. Claimed per polled batch with INSERT ... ON CONFLICT DO
-- NOTHING (SpentNonceStore); rows are pruned a day after their nonce's expiry
-- (PolicyPipelineConfiguration.spentNonceRetention: expiry is judged at gateway
-- receipt, so a late-decided replay must still find its nonce spent).
CREATE TABLE IF NOT EXISTS __SCHEMA__.spent_gatt_nonces (
    nonce           text PRIMARY KEY CHECK (length(nonce) BETWEEN 1 AND 256),
    -- The event that presented it: a redelivery of that event is not a reuse.
    idempotency_key text NOT NULL,
    user_id         text NOT NULL,
    expires_at      timestamptz NOT NULL,
    spent_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS spent_gatt_nonces_expires_idx ON __SCHEMA__.spent_gatt_nonces (expires_at);
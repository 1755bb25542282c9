CREATE SCHEMA IF NOT EXISTS __SCHEMA__;

-- Every version of every policy; the highest version of a scope is the active one. Rows
-- are never updated or deleted: restoring an old version writes it again as a new one,
-- so the version on a verdict always names exactly the rules that decided it.
CREATE TABLE IF NOT EXISTS __SCHEMA__.site_policies (
    -- The site id, or '*' for the default policy of sites without their own.
    scope      text NOT NULL CHECK (length(scope) BETWEEN 1 AND 128),
    version    integer NOT NULL CHECK (version > 0),
    -- SitePolicy JSON (siteId, version, automaticAttendance, rules, settings).
    document   jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- The admin API key that wrote it.
    created_by text NOT NULL,
    PRIMARY KEY (scope, version)
);

-- One row: turns automatic attendance off everywhere (seed 000 sec. 16).
CREATE TABLE IF NOT EXISTS __SCHEMA__.global_switch (
    id                 boolean PRIMARY KEY DEFAULT true CHECK (id),
    global_kill_switch boolean NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    updated_by         text NOT NULL
);
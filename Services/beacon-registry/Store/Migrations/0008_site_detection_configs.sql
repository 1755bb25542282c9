-- A site's detection settings: the remote-config document its devices apply (GET /v1/devices/config).
-- The registry stores only documents PresenceKit's strict reader accepted, as sorted-key JSON text;
-- `version` grows by one with every change. Not published on the change feed: only devices read it.
CREATE TABLE __SCHEMA__.site_detection_configs (
    site_id __SCHEMA__.entity_id CONSTRAINT site_detection_configs_pkey PRIMARY KEY
        CONSTRAINT site_detection_configs_site_fkey REFERENCES __SCHEMA__.sites (id),
    document json NOT NULL CONSTRAINT site_detection_configs_document_object CHECK (json_typeof(document) = 'object'),
    version integer NOT NULL CONSTRAINT site_detection_configs_version_positive CHECK (version >= 1),
    updated_at timestamptz NOT NULL,
    -- The id of the API key that set it.
    updated_by text NOT NULL CONSTRAINT site_detection_configs_updated_by_length CHECK (char_length(updated_by) BETWEEN 1 AND 64)
);

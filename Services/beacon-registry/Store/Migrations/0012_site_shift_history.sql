-- A site's earlier shifts: each applied to the site's local days before `until` (and from the one
-- before's); `sites` holds the shift from the last `until` on. The daily attendance report judges each
-- day by the shift it had, so changing a shift (PUT /v1/admin/sites/{id}/shift) does not rewrite the past.
CREATE TABLE __SCHEMA__.site_shift_history (
    site_id __SCHEMA__.entity_id NOT NULL CONSTRAINT site_shift_history_site_fkey REFERENCES __SCHEMA__.sites (id),
    until date NOT NULL,
    shift_start time NOT NULL,
    shift_end time NOT NULL,
    check_in_before_start_min integer NOT NULL CHECK (check_in_before_start_min BETWEEN 0 AND 1440),
    check_out_after_end_min integer NOT NULL CHECK (check_out_after_end_min BETWEEN 0 AND 1440),
    late_entry_grace_min integer NOT NULL CHECK (late_entry_grace_min BETWEEN 0 AND 1440),
    early_exit_grace_min integer NOT NULL CHECK (early_exit_grace_min BETWEEN 0 AND 1440),
    changed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT site_shift_history_pkey PRIMARY KEY (site_id, until)
);

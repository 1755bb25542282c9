-- One site's figures over a window (the status page's per-site rows, /v1/slo?site=, /v1/metrics/summary?site=)
-- read one metric's minutes for one site: the primary keys lead with (metric, minute), so those reads walked
-- every site's rows of the window, a month of them at a deployment of hundreds of sites.
CREATE INDEX rollup_minute_site_idx ON __SCHEMA__.rollup_minute (metric, site, minute);
CREATE INDEX latency_minute_site_idx ON __SCHEMA__.latency_minute (metric, site, minute);

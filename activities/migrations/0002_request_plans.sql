-- Request plans: the ordered (item id, projection) list each model call rendered.
-- The workflow sends a plan as a delta against the previous version so that its
-- history grows by O(1) per turn; the model activity rebuilds the full plan here.
CREATE TABLE request_plans (
    session_id  text        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    lane        text        NOT NULL,
    version     integer     NOT NULL,
    entries     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, lane, version)
);

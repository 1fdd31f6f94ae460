-- External agents bring their own world (issue 14).
-- Tool sets: the agent's own tool definitions, stored once per session under a digest of
-- them (the workflow carries only the id); every request renders them after the catalog's.
CREATE TABLE tool_sets (
    session_id   text        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    tool_set_id  text        NOT NULL,
    definitions  jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, tool_set_id)
);

-- Client item ids: an external agent's own id of an item, unique in its session, with a
-- digest of what it held, so the same id sent again is recognised and other content under
-- it refused.
ALTER TABLE items ADD COLUMN client_id text, ADD COLUMN client_digest text;
CREATE UNIQUE INDEX items_client_id ON items (session_id, client_id) WHERE client_id IS NOT NULL;

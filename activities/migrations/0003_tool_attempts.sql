-- Tool attempts: a side-effecting tool call records that it started before it runs, so
-- that a retry after a worker crash knows an earlier attempt may have left partial
-- effects and does not run the command a second time.
CREATE TABLE tool_attempts (
    session_id  text        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    item_id     text        NOT NULL,  -- the result item the call produces
    started_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, item_id)
);

-- Context Lanes: initial schema.
-- Applied once by activities/store.py inside a transaction holding an advisory lock.
-- Every write path inserts with a caller-chosen id and ON CONFLICT DO NOTHING.

CREATE TABLE sessions (
    session_id  text PRIMARY KEY,
    tenant      text        NOT NULL DEFAULT 'default',
    created_at  timestamptz NOT NULL DEFAULT now(),
    config      jsonb       NOT NULL DEFAULT '{}'::jsonb
);

-- Exact content of every conversation item: {text, tool_calls, tool_call_id, tool_name, ...}.
CREATE TABLE items (
    session_id  text        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    item_id     text        NOT NULL,
    lane        text        NOT NULL,
    seq         bigint      NOT NULL,
    kind        text        NOT NULL,
    role        text        NOT NULL,
    content     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, item_id),
    UNIQUE (session_id, lane, seq)
);

-- Append-only event log. `id` orders events globally (and, per session, in commit
-- order: appends to one session are serialised by an advisory lock in the store).
CREATE TABLE events (
    id          bigserial   NOT NULL UNIQUE,
    session_id  text        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    lane        text        NOT NULL,
    seq         bigint      NOT NULL,
    event_id    text        NOT NULL,
    kind        text        NOT NULL,
    payload     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, lane, seq),
    UNIQUE (session_id, event_id)
);
CREATE INDEX events_session_id_idx ON events (session_id, id);

-- Exact tool output / oversized input. Text that PostgreSQL's text type cannot hold
-- (NUL characters, lone surrogates) is kept as bytes_content (UTF-8, surrogatepass).
CREATE TABLE observations (
    obs_id         text        PRIMARY KEY,
    session_id     text        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    item_id        text        NOT NULL,
    text_content   text        NULL,
    bytes_content  bytea       NULL,
    size_chars     integer     NOT NULL,
    size_bytes     integer     NOT NULL,
    sha256         text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((text_content IS NULL) <> (bytes_content IS NULL))
);
CREATE INDEX observations_session_id_idx ON observations (session_id);

CREATE TABLE checkpoints (
    checkpoint_id  text        PRIMARY KEY,
    session_id     text        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    lane           text        NOT NULL,
    state          jsonb       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX checkpoints_session_id_idx ON checkpoints (session_id, created_at);

-- The gateway (issue 25): which session holds which conversation. One row per turn an agent
-- sent through the gateway (and per answer the gateway returned), keyed by its position in
-- the agent's conversation; ``chain`` digests that turn and every turn before it, so the
-- longest stored prefix of a new call is found by its digests alone. A row is first a claim
-- (stored = false), written before the turn's items are appended, and marked stored after:
-- a second conversation that claims the same position of the same session sees the claim
-- and branches instead of mixing into it.
CREATE TABLE gateway_turns (
    session_id  text        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    position    integer     NOT NULL,
    tenant      text        NOT NULL,
    chain       text        NOT NULL,
    answer      jsonb,                 -- an answer row: what the agent was answered (replayed on a retry)
    stored      boolean     NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, position)
);
CREATE INDEX gateway_turns_chain ON gateway_turns (tenant, chain);

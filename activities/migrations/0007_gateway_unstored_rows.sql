-- A gateway call reads only the end of its conversation's rows and the rows before it that are
-- not stored yet (activities/gateway_turns.py, ``rows_from``): the second part is found here,
-- not by reading every row of a conversation thousands of turns long.
CREATE INDEX gateway_turns_unstored ON gateway_turns (session_id, position) WHERE NOT stored;

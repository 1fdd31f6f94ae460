-- The gateway's sweep (worker/api/gateway/answer_store.py): answer rows the agent has but whose
-- items are not in the session yet (their process died before its background write, or the
-- workflow could not be reached then) are stored by any API process once they are old enough.
-- ``unstorable`` says why a row never will be (its session ended); the sweep passes it over.
ALTER TABLE gateway_turns ADD COLUMN unstorable text;
CREATE INDEX gateway_turns_unstored_answers ON gateway_turns (created_at)
    WHERE answer IS NOT NULL AND NOT stored AND unstorable IS NULL;

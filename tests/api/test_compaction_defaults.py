"""Who condenses by default (issue 15, part 4): hosted sessions on a live model always;
replays never; external agents' sessions only when the operator named a condenser model
and the workers have a model endpoint. A body's own choice always wins."""

from __future__ import annotations

import pytest

from lanes_client.schemas import SessionCreate
from worker.api.session_config import compaction_config
from worker.settings import Settings

ENDPOINT = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
REPLAY = {"trajectory_path": "x.json", "trajectory_id": "x", "model_base_url": "http://127.0.0.1:9/v1"}


def settings(**env: str) -> Settings:
    return Settings.model_validate(env)


@pytest.mark.parametrize(("body", "env", "enabled", "condenser"), [
    ({"mode": "hosted"}, ENDPOINT, True, "agent-model"),
    ({"mode": "hosted"}, {**ENDPOINT, "LANES_CONDENSER_MODEL": "small"}, True, "small"),
    ({"mode": "external"}, ENDPOINT, False, None),
    ({"mode": "external"}, {"LANES_CONDENSER_MODEL": "small"}, False, None),
    ({"mode": "external"}, {**ENDPOINT, "LANES_CONDENSER_MODEL": "small"}, True, "small"),
    ({"mode": "external", "compaction": {"enabled": True}}, ENDPOINT, True, "agent-model"),
    ({"mode": "hosted", "compaction": {"enabled": False}}, ENDPOINT, False, None),
    ({"mode": "hosted", "replay": REPLAY}, ENDPOINT, False, None),
])
def test_who_condenses_by_default(body, env, enabled, condenser):
    values = compaction_config(SessionCreate.model_validate({"model": "agent-model", **body}), settings(**env),
                               "agent-model")
    assert values["enabled"] is enabled
    assert values.get("condenser_model") == condenser

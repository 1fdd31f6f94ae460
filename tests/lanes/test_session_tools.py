"""The tools a session offers: its own list, or the mode's default, plus spawn_subagent."""

from __future__ import annotations

from workflows.contract.session import ReplaySpec, SessionConfig, SubagentSettings, session_tools
from workflows.contract.tools import REPLAY_TOOLS, WORKSPACE_TOOLS

REPLAY = ReplaySpec(trajectory_path="/x.json", trajectory_id="x", model_base_url="http://127.0.0.1:1/v1")


def test_enabling_subagents_never_changes_the_default_lists_other_sessions_get():
    # a worker runs many sessions: one with subagents must not add the tool to the others
    on = SubagentSettings(enabled=True)
    assert session_tools(SessionConfig(session_id="a", replay=REPLAY, subagents=on)) == [*REPLAY_TOOLS, "spawn_subagent"]
    assert session_tools(SessionConfig(session_id="b", subagents=on)) == [*WORKSPACE_TOOLS, "spawn_subagent"]
    assert session_tools(SessionConfig(session_id="c", replay=REPLAY)) == list(REPLAY_TOOLS)
    assert session_tools(SessionConfig(session_id="d")) == list(WORKSPACE_TOOLS)


def test_a_configured_list_is_used_as_given():
    config = SessionConfig(session_id="e", tools=["bash"], subagents=SubagentSettings(enabled=True))
    assert session_tools(config) == ["bash", "spawn_subagent"]
    assert config.tools == ["bash"]
    assert session_tools(SessionConfig(session_id="f", tools=[])) == []

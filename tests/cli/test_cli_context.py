"""``lanes capability add``, ``lanes pin``, ``lanes session new --context-tool`` and the
compaction default, through the API: exit 0 when admitted or pinned, 1 with the reason when
refused, 2 for a usage error."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import env, lanes  # noqa: F401  (the module's fixtures)


@pytest.fixture(scope="module")
def external(env) -> str:  # noqa: F811
    created = lanes(env, "session", "new", "--mode", "external", "--budget", "2000", "-q")
    assert created.returncode == 0, created.stderr
    return created.stdout.strip()


def test_pin_and_capability_add(env, external):  # noqa: F811
    pinned = lanes(env, "pin", external, "Keep the public API stable.")
    assert pinned.returncode == 0, pinned.stderr
    assert pinned.stdout.strip().startswith("item-") or pinned.stdout.strip()
    refused = lanes(env, "pin", external, "word " * 3_000)
    assert refused.returncode == 1 and "note refused" in refused.stderr

    admitted = lanes(env, "capability", "add", external, "review", "--content", "Check twice.", "--json")
    assert admitted.returncode == 0, admitted.stderr
    assert json.loads(admitted.stdout)["status"] == "admitted"
    skipped = lanes(env, "capability", "add", external, "deploy", "--content", "-", "--kind", "manual_skill",
                    stdin="word " * 40_000)
    assert skipped.returncode == 1 and skipped.stderr.startswith("skipped: Skill deploy skipped")
    both = lanes(env, "capability", "add", external, "x")
    assert both.returncode == 2 and "--content" in both.stderr


def test_session_new_context_tools_and_compaction_default(env):  # noqa: F811
    created = lanes(env, "session", "new", "--mode", "external", "--context-tool", "episodes", "--context-tool",
                    "pin_note", "--json")
    assert created.returncode == 0, created.stderr
    config = json.loads(created.stdout)["config"]
    assert config["context_tools"] == ["begin_episode", "end_episode", "condense_context", "pin_note"]
    assert config["llm_compaction"] is False  # external: the agent's model may not be ours
    hosted = lanes(env, "session", "new", "--json")
    assert json.loads(hosted.stdout)["config"]["llm_compaction"] is True
    off = lanes(env, "session", "new", "--no-llm-compaction", "--json")
    assert json.loads(off.stdout)["config"]["llm_compaction"] is False
    bad = lanes(env, "session", "new", "--context-tool", "teleport")
    assert bad.returncode == 2 and "teleport" in bad.stderr

"""The README's client example, run as written (in its own process, as a user pastes it)
against the test API, with the token found the way the README says: the token file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def client_example() -> str:
    section = README.read_text(encoding="utf-8").split("\n## Client\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "the README's Client section has no python example"
    return blocks[0]


def test_the_readmes_client_example_runs_as_written(api_stack, tmp_path: Path):
    (tmp_path / "api-token").write_text(api_stack.token_a + "\n")  # where the local API writes it
    env = {k: v for k, v in os.environ.items() if k not in ("LANES_API_TOKEN", "LANES_API_URL")}
    env.update(LANES_DATA_DIR=str(tmp_path), LANES_API_URL=api_stack.base_url)
    done = subprocess.run([sys.executable, "-c", client_example()], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "messages to send: 1"  # the task (no system prompt was given)
    assert "0 user" in lines  # the raw history, as iter_items pages it
    assert lines[2:] == ["task.started", "item.added", "context.request"], lines  # its events, then the stream ends

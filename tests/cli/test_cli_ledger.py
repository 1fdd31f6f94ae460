"""``lanes context SESSION --all``, as a user runs it (a separate process talking HTTP to the
API on the real stack): every stored item with state, projection, tokens and reason, through
every page, with the counts; ``--state`` filters; ``--json``; readable at 80 columns."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
from typing import get_args

import pytest

from lanes_client.schemas import LedgerState
from tests.api.test_context_ledger import session_with_archived_items
from tests.cli.test_cli import REPO, env, lanes, lanes_command  # noqa: F401  (env: the module's fixture)
from worker.cli.inspection import LedgerState as CliLedgerState

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
async def archived(client_a) -> str:
    return await session_with_archived_items(client_a)


async def _ledger(client_a, sid: str, state: LedgerState | None = None) -> list:
    return [e async for e in client_a.iter_ledger(sid, state=state, page_size=1000)]


async def test_context_all_lists_every_stored_item_with_its_reason_and_the_counts(env, client_a, archived):  # noqa: F811
    entries = await _ledger(client_a, archived)
    assert any(e.state == "archived" for e in entries)
    shown = lanes(env, "context", archived, "--all", "--page-size", "4")  # several pages
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["item", "kind", "state", "projection", "tokens", "reason", "recall"]  # piped: wide
    rows = lines[1:1 + len(entries)]
    for entry, row in zip(entries, rows, strict=True):  # one row each, in order
        assert row.split()[:5] == [entry.item_id, entry.kind, entry.state, entry.projection, str(entry.tokens)], row
        address = f"observation://{entry.observation_id}" if entry.observation_id else ""
        assert row.split(maxsplit=5)[5].split() == [*entry.reason.split(), *([address] if address else [])], row
    assert lines[1 + len(entries)].startswith("stored ")  # no row more
    counts = (await client_a.context(archived, all=True, limit=1)).ledger.counts
    assert (f"stored {counts.history:,} (working set {counts.working_set:,}, archived {counts.archived:,}), "
            f"observations {counts.observations:,}") in shown.stdout
    assert re.search(r"^budget [█·]{50} ", shown.stdout, re.MULTILINE)  # the working set's totals follow


async def test_context_all_json_and_the_state_filter(env, client_a, archived):  # noqa: F811
    entries = await _ledger(client_a, archived)
    answer = json.loads(lanes(env, "context", archived, "--all", "--json", "--page-size", "3").stdout)
    assert [e["item_id"] for e in answer["ledger"]["items"]] == [e.item_id for e in entries]
    assert answer["ledger"]["next_cursor"] is None and answer["items"]  # every page in one answer, with the report
    assert "ledger" not in json.loads(lanes(env, "context", archived, "--json").stdout)

    only = json.loads(lanes(env, "context", archived, "--all", "--state", "archived", "--json").stdout)
    assert [e["item_id"] for e in only["ledger"]["items"]] == [e.item_id for e in entries if e.state == "archived"]
    assert set(get_args(CliLedgerState)) == set(get_args(LedgerState))  # the CLI's copy of the states

    alone = lanes(env, "context", archived, "--state", "archived")
    assert alone.returncode == 2 and "--all" in alone.stderr
    unknown = lanes(env, "context", archived, "--all", "--state", "evicted")
    assert unknown.returncode == 2 and "evicted" in unknown.stderr


async def test_context_all_fits_an_80_column_terminal(env, client_a, archived):  # noqa: F811
    entries = await _ledger(client_a, archived)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 80, 0, 0))
    try:
        child = subprocess.Popen(lanes_command("context", archived, "--all"), env={**env, "COLUMNS": "80"},
                                 stdout=follower, stderr=subprocess.PIPE, cwd=REPO)
        os.close(follower)  # the child holds it: reading ends (EIO) when the child exits
        chunks = []
        while True:  # read while it writes: a full terminal buffer would block it
            try:
                chunk = os.read(leader, 65_536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        stderr = child.stderr.read().decode() if child.stderr else ""
        returncode = child.wait(timeout=120)
    finally:
        os.close(leader)
    assert returncode == 0, stderr
    text = ANSI.sub("", b"".join(chunks).decode()).replace("\r", "")
    lines = text.splitlines()
    assert any(line.startswith("itm-") and "archived" in line for line in lines), text  # the table is there
    assert max(len(line) for line in lines) <= 80, text
    assert "…" not in text and any(line.startswith("budget ") and line.endswith("%)") for line in lines), text
    squeezed = "".join(text.split())
    assert all("".join(e.reason.split()) in squeezed for e in entries), text  # every reason whole, if folded

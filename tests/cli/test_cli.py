"""The ``lanes`` session commands run as a user runs them: separate processes talking HTTP to
the API (which runs, with a worker, in this test process on the real stack)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.api.stack import CHECKOUT_PYTHONPATH, replay_body

REPO = Path(__file__).resolve().parents[2]


def lanes_command(*args: str) -> list[str]:
    """``lanes ARGS`` from this checkout (the installed console script may import another one's code)."""
    return [sys.executable, "-m", "worker.cli", *args]


def interruptible() -> None:
    """``preexec_fn`` of a process a test stops with Ctrl-C (SIGINT): a suite started in the
    background inherits SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def env(api_stack, tmp_path_factory) -> dict[str, str]:
    return {
        **os.environ,
        "LANES_API_URL": api_stack.base_url,
        "LANES_API_TOKEN": api_stack.token_a,
        "LANES_DATA_DIR": str(tmp_path_factory.mktemp("cli-data")),
        "COLUMNS": "200",
        "PYTHONPATH": CHECKOUT_PYTHONPATH,
    }


def lanes(env: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 120) \
        -> subprocess.CompletedProcess:
    return subprocess.run(lanes_command(*args), env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


@pytest.fixture(scope="module")
async def hosted(client_a, trajectory, replay) -> str:
    """A hosted session replaying the recording (POST /v1/sessions: replay is not a CLI option)."""
    return (await client_a.create_session(**replay_body(trajectory, replay, budget_tokens=4000))).session_id


def test_session_new_list_show_cancel(env):
    created = lanes(env, "session", "new", "--mode", "external", "--budget", "9000", "--system", "Be brief.",
                    "--llm-compaction")
    assert created.returncode == 0, created.stderr
    sid = created.stdout.strip()  # the id alone on stdout, the human line on stderr
    assert re.fullmatch(r"ses-[0-9a-f]{12}", sid)
    assert "created external session" in created.stderr
    assert "budget: 9,000 tokens" in created.stderr  # the budget is said, chosen or not
    windowed = lanes(env, "session", "new", "--mode", "external", "--context-window", "128000", "--max-output", "4096")
    assert "budget: the model's usable window, 123,904 tokens" in windowed.stderr and "--budget" in windowed.stderr
    quiet = lanes(env, "session", "new", "-q")
    assert quiet.returncode == 0 and re.fullmatch(r"ses-[0-9a-f]{12}\n", quiet.stdout)
    as_json = json.loads(lanes(env, "session", "new", "--json", "--mode", "external").stdout)
    assert as_json["mode"] == "external"

    listed = lanes(env, "session", "list")
    assert listed.returncode == 0 and sid in listed.stdout and quiet.stdout.strip() in listed.stdout
    assert "turns" in listed.stdout and "first task" in listed.stdout  # what each session is
    assert sid in [s["session_id"] for s in json.loads(lanes(env, "session", "list", "--json").stdout)["sessions"]]

    shown = lanes(env, "session", "show", sid)
    assert shown.returncode == 0, shown.stderr
    assert "external mode" in shown.stdout and "RUNNING" in shown.stdout and "budget_tokens=9000" in shown.stdout
    assert "llm_compaction=True" in shown.stdout

    closing = lanes(env, "session", "cancel", sid)
    assert closing.returncode == 0 and "closing" in closing.stdout
    deadline = time.monotonic() + 30
    while "COMPLETED" not in lanes(env, "session", "show", sid).stdout:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    again = lanes(env, "session", "cancel", sid)
    assert again.returncode == 0 and "already ended (COMPLETED)" in again.stdout
    other = quiet.stdout.strip()
    terminated = lanes(env, "session", "cancel", other, "--terminate", "--reason", "cli test")
    assert terminated.returncode == 0 and "terminated" in terminated.stdout and "TERMINATED" in terminated.stdout


async def test_send_wait_exit_codes_say_what_happened(env, client_a, trajectory, replay):
    # a task that failed: 4, with its cause (the stack's model endpoint is a closed port)
    failing = (await client_a.create_session(mode="hosted", tools="none", give_up_seconds=4)).session_id
    failed = lanes(env, "send", failing, "hello?", "--wait")
    assert failed.returncode == 4, (failed.stdout, failed.stderr)
    assert "task-0000 failed" in failed.stdout and "Connection" in failed.stdout
    # a wait that ran out while the task runs (its first model answer is held): 5, and no
    # word of an unreachable API, which answered all along
    slow = (await client_a.create_session(**replay_body(trajectory, replay, budget_tokens=4000))).session_id
    replay.set_faults("timeout", count=1, delay_seconds=15)
    try:
        waited = lanes(env, "send", slow, trajectory.task, "--wait", "--timeout", "2")
    finally:
        replay.set_faults("none")
    assert waited.returncode == 5, (waited.stdout, waited.stderr)
    assert "did not end within 2s; it is still running" in waited.stderr
    assert f"lanes session show {slow}" in waited.stderr and "lanes dev" not in waited.stderr
    assert (await client_a.status(slow)).tasks[0].state in ("queued", "running")


def test_send_wait_then_inspect_context_events_and_recall(env, hosted, trajectory):
    sent = lanes(env, "send", hosted, trajectory.task, "--wait")
    assert sent.returncode == 0, sent.stderr
    assert f"task-0000 completed after {len(trajectory.turns) + 1} turns" in sent.stdout
    assert "Replay finished." in sent.stdout  # the final answer

    context = lanes(env, "context", hosted)
    assert context.returncode == 0, context.stderr
    assert "itm-000000" in context.stdout and "system" in context.stdout and "pinned" in context.stdout
    bar = next(line for line in context.stdout.splitlines() if line.startswith("budget "))
    assert re.search(r"[█·]{50} [\d,]+ / [\d,]+ tokens \(\d+\.\d%\)", bar), bar
    assert re.search(r"compactions [1-9]", context.stdout)
    report = json.loads(lanes(env, "context", hosted, "--json").stdout)
    shown_all = lanes(env, "context", hosted, "--all").stdout
    assert all(item["id"] in shown_all for item in report["items"])

    events = lanes(env, "events", hosted)
    assert events.returncode == 0
    assert "item.added" in events.stdout and "context.compaction.fallback" in events.stdout
    lines = [json.loads(line) for line in lanes(env, "events", hosted, "--json", "--after", "3",
                                                "--limit", "5").stdout.splitlines()]
    assert len(lines) == 5 and lines[0]["id"] > 3
    followed = lanes(env, "events", hosted, "--follow", "--timeout", "1", "--json")
    assert followed.returncode == 0
    assert [json.loads(line)["id"] for line in followed.stdout.splitlines()] == \
        [json.loads(line)["id"] for line in lanes(env, "events", hosted, "--json").stdout.splitlines()]

    everything = [json.loads(line) for line in lanes(env, "events", hosted, "--json").stdout.splitlines()]
    compactions = [json.loads(line) for line in lanes(env, "events", hosted, "--json", "--kind",
                                                      "context.compaction").stdout.splitlines()]
    assert compactions and compactions == [e for e in everything if e["kind"].startswith("context.compaction.")]
    two = lanes(env, "events", hosted, "--json", "--kind", "item.added", "--kind", "item.archived", "--limit", "3")
    assert [json.loads(line)["kind"] for line in two.stdout.splitlines()] == [
        e["kind"] for e in everything if e["kind"] in ("item.added", "item.archived")][:3]

    # the address of the first tool output, as `lanes context --all` lists it, recalled
    tool_item = next(e for e in everything if e["kind"] == "item.added" and e["payload"]["kind"] == "tool_result")
    first_output = trajectory.turns[0].results[0].output
    row = next(line for line in shown_all.splitlines() if tool_item["payload"]["item_id"] in line)
    listed = re.search(r"observation://(obs-\S+)", row)
    assert listed is not None, row
    obs = listed.group(1)
    recalled = lanes(env, "recall", f"observation://{obs}?offset=5&limit=40", "--session", hosted)
    assert recalled.returncode == 0, recalled.stderr
    assert recalled.stdout == first_output[5:45]
    assert f"of {len(first_output)}" in recalled.stderr
    override = lanes(env, "recall", obs, "--session", hosted, "--offset", "0", "--limit", "10")
    assert override.stdout == first_output[:10]
    alone = lanes(env, "recall", f"observation://{obs}?offset=5&limit=40", "-q")  # the id names its session
    assert alone.returncode == 0 and alone.stdout == first_output[5:45] and alone.stderr == ""


def test_chat_sends_messages_and_shows_the_agent_working(env, client_a, trajectory, replay):
    import asyncio

    sid = asyncio.run(_new_hosted(env, trajectory, replay))
    chat = lanes(env, "chat", sid, stdin=f"{json.dumps(trajectory.task)}\n/context\n/quit\n")
    assert chat.returncode == 0, chat.stderr
    out = chat.stdout
    assert "task-0000 queued" in out and "task-0000 completed" in out
    assert "→ bash" in out  # the agent's tool calls, live from the event stream
    assert "←" in out  # and their results
    assert "context.compaction" in out
    assert "budget " in out  # /context


async def _new_hosted(env, trajectory, replay) -> str:
    from lanes_client import AsyncLanesClient

    async with AsyncLanesClient(env["LANES_API_URL"], env["LANES_API_TOKEN"]) as client:
        created = await client.create_session(**replay_body(trajectory, replay, budget_tokens=4000))
        return created.session_id


def test_errors_are_clear_with_distinct_exit_codes(env, hosted):
    missing = lanes(env, "context", "ses-000000000000")
    assert missing.returncode == 1 and "HTTP 404" in missing.stderr and "not found" in missing.stderr
    bad_token = lanes({**env, "LANES_API_TOKEN": "nope-nope-nope"}, "session", "list")
    assert bad_token.returncode == 1 and "HTTP 401" in bad_token.stderr and "LANES_API_TOKEN" in bad_token.stderr
    unreachable = lanes({**env, "LANES_API_URL": "http://127.0.0.1:9"}, "session", "list")
    assert unreachable.returncode == 3 and "cannot reach" in unreachable.stderr
    usage = lanes(env, "session", "frobnicate")
    assert usage.returncode == 2
    assert lanes(env, "recall", "http://example.com", "--session", hosted).returncode == 2
    external = lanes(env, "session", "new", "-q", "--mode", "external").stdout.strip()
    wrong = lanes(env, "send", external, "hello")
    assert wrong.returncode == 1 and "external mode" in wrong.stderr
    empty = lanes(env, "send", hosted, "   ")
    assert empty.returncode == 1 and "empty" in empty.stderr
    chat_external = lanes(env, "chat", external, stdin="")
    assert chat_external.returncode == 2 and "hosted" in chat_external.stderr
    for out in (missing, bad_token, unreachable, wrong):
        assert "Traceback" not in out.stderr


def test_a_401_names_the_token_file(env, tmp_path):
    """From a folder without the token, or with a stale one: the hint says which file was read."""
    no_token = {k: v for k, v in env.items() if k != "LANES_API_TOKEN"} | {"LANES_DATA_DIR": str(tmp_path)}
    missing = lanes(no_token, "session", "list")
    assert missing.returncode == 1 and "HTTP 401" in missing.stderr
    assert f"the token file {tmp_path / 'api-token'} does not exist" in missing.stderr
    (tmp_path / "api-token").write_text("stale-token-0000\n")
    stale = lanes(no_token, "context", "ses-000000000000")
    assert stale.returncode == 1 and f"the token file {tmp_path / 'api-token'}" in stale.stderr
    assert "LANES_DATA_DIR" in stale.stderr and "Traceback" not in stale.stderr


def test_piped_output_is_not_wrapped(env):
    """No terminal and no COLUMNS: a long line stays one line (rich would wrap it at 80)."""
    piped = {k: v for k, v in env.items() if k != "COLUMNS"}
    sid = lanes(piped, "session", "new", "-q", "--mode", "external", "--system", "x" * 150).stdout.strip()
    shown = lanes(piped, "session", "show", sid)
    config = next(line for line in shown.stdout.splitlines() if line.startswith("config: "))
    assert len(config) > 80 and "system_prompt_chars=150" in config and "max_output_tokens=" in config


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_lanes_api_serves_with_a_generated_token(api_settings, tmp_path):
    """``lanes api`` in its own process; without LANES_API_TOKENS it writes a token file (0600)
    that the other commands use."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("LANES_API_TOKENS", "LANES_API_TOKEN")}
    env.update({
        "TEMPORAL_ADDRESS": api_settings.temporal_address, "DATABASE_URL": api_settings.database_url or "",
        "LANES_TASK_QUEUE": api_settings.task_queue, "LANES_DATA_DIR": str(tmp_path), "LANES_API_PORT": str(port),
        "LANES_API_URL": f"http://127.0.0.1:{port}", "PYTHONPATH": CHECKOUT_PYTHONPATH, "COLUMNS": "200",
    })
    server = subprocess.Popen(lanes_command("api", "--log-level", "warning"), env=env, cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "lanes api did not become ready"
            time.sleep(0.2)
        token_file = tmp_path / "api-token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        created = lanes(env, "session", "new", "-q", "--mode", "external")
        assert created.returncode == 0, created.stderr
        assert created.stdout.strip() in lanes(env, "session", "list").stdout
        bad = httpx.get(f"http://127.0.0.1:{port}/v1/sessions", headers={"Authorization": "Bearer x" * 3})
        assert bad.status_code == 401
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
    assert server.returncode == 0, output
    assert token_file.read_text().strip() not in output  # the token is never printed


def test_events_follow_shows_a_compaction_as_it_happens(env, trajectory, replay):
    """``lanes events --follow`` is started before the task: what it prints arrives live."""
    import asyncio

    sid = asyncio.run(_new_hosted(env, trajectory, replay))
    follower = subprocess.Popen(lanes_command("events", sid, "--follow", "--timeout", "60", "--json"), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                preexec_fn=interruptible)
    try:
        sent = lanes(env, "send", sid, trajectory.task, "--wait")
        assert sent.returncode == 0, sent.stderr
        seen: list[dict] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(e["kind"].startswith("context.compaction") for e in seen):
            line = follower.stdout.readline()
            if not line:
                break
            seen.append(json.loads(line))
        assert any(e["kind"].startswith("context.compaction") for e in seen), [e["kind"] for e in seen][-10:]
        assert any(e["kind"] == "item.added" for e in seen)
    finally:
        follower.send_signal(signal.SIGINT)
        try:
            # drain its output while it stops: a follower blocked writing to a full pipe
            # cannot act on Ctrl-C
            follower.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            follower.kill()
            raise

"""Live workspace tools on the real stack, driven by a scripted model as a real session.

- Confinement: from a live session, bash cannot read the worker's environment, the host's
  accounts, another session's workspace or the database, cannot write outside its
  workspace, and has no network.
- No wedges: every malformed call ends as a tool result the model reads; the task completes.
- At most once: a command with effects that a worker SIGKILL interrupts runs once; the
  retry answers that it was interrupted.
- Bounded memory: 300 MB of output leave the worker's peak RSS within 50 MB.
"""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from activities.items import read_whole
from activities.sandbox import sandbox_problem
from tests.integration.scripted_model import tool_call
from tests.integration.support import spawn_worker
from worker import sessions
from worker.local.stack import kill_process
from workflows.contract.session import SessionConfig
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no tool sandbox here: {sandbox_problem()}")

SECRET_KEY = "sk-test-not-a-secret"


def bash(call_id: str, command: str) -> dict:
    return tool_call(call_id, "bash", command=command)


def raw_call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def run_live(client, settings, scripted_model, store, script: list[dict], *, queue: str | None = None,
                   timeout: float = 180, **config):
    """A live session following ``script``: (handle, task status, tool outputs in order)."""
    session_id = sessions.new_session_id("tools")
    model = scripted_model.add(f"script-{session_id}", script)
    handle = await sessions.start_session(client, SessionConfig(session_id=session_id, model=model, **config),
                                          queue or settings.task_queue)
    task_id = await sessions.submit(handle, "Do as scripted.")
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=timeout)
    task = next(t for t in status.tasks if t.task_id == task_id)
    return handle, task, await tool_outputs(handle, store)


async def tool_outputs(handle, store) -> list[tuple[str, int | None]]:
    """(exact output, exit code) of every tool result of the session, in order."""
    rows = [r for r in await store.list_items(handle.id, lane="main", limit=1_000) if r.kind == "tool_result"]
    out = []
    for row in sorted(rows, key=lambda r: r.seq):
        meta = row.content["meta"]
        text = await read_whole(store, handle.id, meta["observation_id"])
        out.append((text, meta["exit_code"]))
    return out


def _port(address: str, default: int) -> int:
    parts = urlsplit(address if "://" in address else f"x://{address}")
    port = parts.port or parse_qs(parts.query).get("port", [str(default)])[0]
    return int(port)


@pytest.mark.usefixtures("worker")
async def test_bash_is_confined_to_its_workspace(temporal_client, settings, scripted_model, store, database_url,
                                                temporal_address, monkeypatch):
    # secrets in the worker's own environment: an ancestor of every sandbox
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("DATABASE_URL", database_url)
    other = settings.workspace_root / f"other-{uuid.uuid4().hex[:8]}"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("TOPSECRET-OF-ANOTHER-SESSION")
    marker = f"lanes-escape-{uuid.uuid4().hex[:8]}"
    pg_port, temporal_port = _port(database_url, 5432), _port(temporal_address, 7233)
    probe = "(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo CONNECTED-{port} || echo refused-{port}"
    script = [
        {"content": None, "tool_calls": [bash("e1", "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env; id -u")]},
        {"content": None, "tool_calls": [bash("e2", "cat /etc/passwd; cat /etc/shadow; ls /root /work /home")]},
        {"content": None, "tool_calls": [bash("e3", f"cat {other / 'secret.txt'}; cat ../{other.name}/secret.txt; "
                                                    f"ls -a ..; cat /proc/1/cmdline | tr '\\0' ' '")]},
        {"content": None, "tool_calls": [bash("e4", f"echo pwned > /tmp/{marker}; echo pwned > ../{marker}; "
                                                    f"touch /usr/{marker} /etc/{marker} /{marker}; echo in > mine.txt")]},
        {"content": None, "tool_calls": [bash("e5", f"{probe.format(port=pg_port)}; {probe.format(port=temporal_port)};"
                                                    " cat /proc/net/dev | tail -n +3 | cut -d: -f1")]},
        {"content": "Done."},
    ]
    handle, task, outputs = await run_live(temporal_client, settings, scripted_model, store, script)
    assert task.state == "completed", task.error
    environ, accounts, other_files, writes, network = (text for text, _ in outputs)
    for secret in (SECRET_KEY, database_url, urlsplit(database_url).password or SECRET_KEY):
        assert secret not in environ
    assert environ.strip().splitlines()[-1] == "1000"  # an unprivileged uid
    assert "root:x:0:0" not in accounts and "sandbox:x:1000" in accounts
    assert "TOPSECRET" not in other_files
    assert not Path(f"/tmp/{marker}").exists() and not (settings.workspace_root / marker).exists()
    assert not Path(f"/usr/{marker}").exists() and not Path(f"/etc/{marker}").exists() and not Path(f"/{marker}").exists()
    assert (settings.workspace_root / handle.id / "mine.txt").read_text() == "in\n"  # its own workspace is writable
    assert "CONNECTED" not in network and f"refused-{pg_port}" in network
    assert network.split()[-1] == "lo"  # no interface but loopback
    await handle.signal(SessionWorkflow.close)


WEDGES = [
    raw_call("w1", "write_file", json.dumps({"path": "a\u0000b", "content": "x"})),
    tool_call("w2", "write_file", path=".", content="x"),
    raw_call("w3", "bash", '{"command": "echo \\ud800"}'),  # a lone surrogate
    tool_call("w4", "write_file", path="f.txt", content="a file"),
    tool_call("w5", "write_file", path="f.txt/child.txt", content="x"),  # a file as parent directory
    tool_call("w6", "write_file", path="n" * 300, content="x"),
    raw_call("w7", "bash", json.dumps({"command": "echo a\u0000b"})),
    tool_call("w8", "read_file", path="."),
    raw_call("w9", "read_file", "not json at all"),
    raw_call("w10", "bash", "[1, 2, 3]"),
    tool_call("w11", "teleport", to="mars"),
    tool_call("w12", "list_files", path="f.txt"),
    tool_call("w13", "write_file", path="x.txt", content=42),
    tool_call("w14", "read_file", path="../../etc/passwd"),
    raw_call("w15", "bash", json.dumps({"command": "x" * 200_000})),  # longer than one exec argument
]


@pytest.mark.usefixtures("worker")
async def test_malformed_calls_end_as_tool_results(temporal_client, settings, scripted_model, store):
    script = [{"content": None, "tool_calls": [call]} for call in WEDGES] + [{"content": "Survived."}]
    handle, task, outputs = await run_live(temporal_client, settings, scripted_model, store, script)
    assert task.state == "completed", task.error
    assert len(outputs) == len(WEDGES)
    by_call = dict(zip([c["id"] for c in WEDGES], outputs, strict=True))
    assert by_call.pop("w4")[1] == 0  # the one good call
    assert all(code not in (0, None) for _, code in by_call.values()), by_call
    assert all(text.strip() for text, _ in by_call.values())  # each says what was wrong
    assert "NUL" in by_call["w1"][0] and "workspace directory" in by_call["w2"][0]
    assert "surrogate" in by_call["w3"][0] and "is a file" in by_call["w5"][0]
    assert "outside the workspace" in by_call["w14"][0] and "unknown tool" in by_call["w11"][0]
    await handle.signal(SessionWorkflow.close)


def _running_commands(needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def test_a_command_interrupted_by_a_worker_kill_runs_once(temporal_client, settings, scripted_model, store,
                                                                 stack_dir):
    own = settings.model_copy(update={"task_queue": f"lanes-once-{uuid.uuid4().hex[:8]}"})
    tag = uuid.uuid4().hex[:8]
    # appends, then reads: the read at the end must not make it count as re-runnable
    loop = "; ".join(f"echo {i} >> count.txt; sleep 0.25" for i in range(1, 61)) + f"; cat count.txt # {tag}"
    script = [{"content": None, "tool_calls": [bash("c1", loop)]}, {"content": "Counted."}]
    workers = [spawn_worker(own, stack_dir / "logs" / "once-worker-0.log")]
    try:
        session = asyncio.create_task(run_live(temporal_client, own, scripted_model, store, script, queue=own.task_queue))
        count = None
        for _ in range(400):  # the command is running when count.txt has a few lines
            await asyncio.sleep(0.1)
            files = list(settings.workspace_root.glob("tools-*/count.txt"))
            count = next((f for f in files if f.exists() and len(f.read_text().split()) >= 4), None)
            if count is not None and _running_commands(tag):
                break
        assert count is not None, "the command never started"
        kill_process(workers[0], signal.SIGKILL)
        await asyncio.sleep(1)
        assert _running_commands(tag) == []  # the sandbox died with its worker
        lines_at_kill = count.read_text().split()
        workers.append(spawn_worker(own, stack_dir / "logs" / "once-worker-1.log"))
        handle, task, outputs = await asyncio.wait_for(session, 240)
        assert task.state == "completed", task.error
        lines = count.read_text().split()
        assert lines == lines_at_kill == [str(n) for n in range(1, len(lines) + 1)]  # one run, never restarted
        assert len(lines) < 60
        text, code = outputs[0]
        assert code == 125 and "was interrupted" in text and "not run again" in text
        await handle.signal(SessionWorkflow.close)
    finally:
        for worker in workers:
            kill_process(worker, signal.SIGKILL)


def _peak_rss(pid: int) -> int:
    """Peak resident set of a process, bytes (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def test_300_mb_of_output_leave_the_worker_rss_within_50_mb(temporal_client, settings, scripted_model, store,
                                                                    stack_dir):
    own = settings.model_copy(update={"task_queue": f"lanes-flood-{uuid.uuid4().hex[:8]}"})
    worker = spawn_worker(own, stack_dir / "logs" / "flood-worker.log")
    try:
        warm = [{"content": None, "tool_calls": [bash("w1", "seq 1 10000")]}, {"content": "Warm."}]
        _, task, _ = await run_live(temporal_client, own, scripted_model, store, warm, queue=own.task_queue)
        assert task.state == "completed", task.error
        baseline = _peak_rss(worker.pid)
        flood = [{"content": None, "tool_calls": [bash("f1", "yes 0123456789 | head -c 300000000; echo end")]},
                 {"content": "Flooded."}]
        handle, task, outputs = await run_live(temporal_client, own, scripted_model, store, flood, queue=own.task_queue)
        assert task.state == "completed", task.error
        text, code = outputs[0]
        assert code == 0 and text.endswith("end\n") and "characters of output dropped" in text
        assert len(text) < 250_000
        grown = _peak_rss(worker.pid) - baseline
        assert grown < 50 * 1024 * 1024, f"peak RSS grew by {grown / 2**20:.0f} MiB"
        await handle.signal(SessionWorkflow.close)
    finally:
        kill_process(worker, signal.SIGKILL)

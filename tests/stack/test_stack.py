"""The local stack: Temporal dev server, embedded PostgreSQL, child processes, clean stops."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from activities.store import Store
from activities.store_errors import StoreUnavailable
from worker.local.stack import Stack, free_port, kill_process, popen_group, start_postgres, start_temporal

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (checked in /proc)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline and running(int(entry.name)):
                pids.append(int(entry.name))
    return pids


def wait_until(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


async def test_session_temporal_client(temporal_client: Client) -> None:
    request = DescribeNamespaceRequest(namespace=temporal_client.namespace)
    try:
        info = await temporal_client.workflow_service.describe_namespace(request, retry=True)
    except RPCError as error:
        # The session's client may have sat idle for minutes: the server closes a connection idle
        # for 2 minutes (frontend.keepAliveMaxConnectionIdle), a call racing that close is
        # CANCELLED, and the SDK's retry does not cover CANCELLED (the API treats it as
        # unsettled and retries too, worker/api/backend.py). A second call reconnects.
        if error.status != RPCStatusCode.CANCELLED:
            raise
        info = await temporal_client.workflow_service.describe_namespace(request, retry=True)
    assert info.namespace_info.name == temporal_client.namespace


async def test_temporal_starts_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    handle = start_temporal(tmp_path, port=port)
    try:
        assert handle.address == f"127.0.0.1:{port}" and running(handle.pid)
        client = await Client.connect(handle.address)
        assert (await client.service_client.check_health()) is True
        db = str((tmp_path / "temporal.db").resolve())
        assert processes_mentioning(db) == [handle.pid]
        with contextlib.closing(sqlite3.connect(db)) as sql:  # history written ahead, synced at checkpoints
            assert sql.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        # a second start on the same data dir reuses the running server
        again = start_temporal(tmp_path)
        assert again.address == handle.address and again.proc is None
        again.stop()
        assert running(handle.pid)
    finally:
        handle.stop()
    assert not running(handle.pid) and processes_mentioning(db) == []
    assert not (tmp_path / "temporal.owner").exists()
    assert (tmp_path / "logs" / "temporal.log").exists()


def test_port_taken_at_start_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import worker.local.stack as stack_module
    real_free_port = stack_module.free_port
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        ports = iter([busy.getsockname()[1]])  # the first HTTP port handed to the CLI is taken
        monkeypatch.setattr(stack_module, "free_port", lambda host="127.0.0.1": next(ports, None) or real_free_port())
        handle = start_temporal(tmp_path, port=real_free_port())
        try:
            log = (tmp_path / "logs" / "temporal.log").read_text()
            assert log.count("=== ") == 2 and "address already in use" in log
        finally:
            handle.stop()
    assert not running(handle.pid)


def test_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(RuntimeError, match="in use"):
            start_temporal(tmp_path, port=sock.getsockname()[1])


def test_kill_process_stops_the_whole_group(tmp_path: Path) -> None:
    # a shell that ignores SIGTERM and leaves a grandchild behind
    proc = popen_group(["bash", "-c", "trap '' TERM; sleep 300 & echo $! > child.pid; wait"], tmp_path / "x.log",
                       cwd=tmp_path)
    assert wait_until(lambda: (tmp_path / "child.pid").exists() and (tmp_path / "child.pid").read_text().strip())
    grandchild = int((tmp_path / "child.pid").read_text())
    started = time.monotonic()
    code = kill_process(proc, signal.SIGTERM, grace=0.5)
    assert code == -signal.SIGKILL and time.monotonic() - started < 5
    assert wait_until(lambda: not running(grandchild))
    # a process that exits on SIGTERM
    quick = popen_group(["sleep", "300"], tmp_path / "y.log")
    assert kill_process(quick) == -signal.SIGTERM
    # signal only, no waiting
    paused = popen_group(["sleep", "300"], tmp_path / "z.log")
    assert kill_process(paused, signal.SIGSTOP, grace=None) is None
    assert kill_process(paused, signal.SIGKILL) == -signal.SIGKILL


def test_stack_stops_children_in_reverse_order(tmp_path: Path) -> None:
    order = tmp_path / "order"
    with Stack(tmp_path, postgres=False, temporal=False) as stack:
        for name in ("first", "second"):
            stack.spawn(name, ["bash", "-c", f"trap 'echo {name} >> {order}; exit 0' TERM; "
                                             "while true; do sleep 0.05; done"])
        time.sleep(0.3)
        assert stack.env()["LANES_DATA_DIR"] == str(tmp_path.resolve())
        with pytest.raises(RuntimeError, match="already running"):
            stack.spawn("first", ["true"])
        pids = [p.pid for p in stack.procs.values()]
    assert order.read_text().split() == ["second", "first"]
    assert not any(running(pid) for pid in pids)
    assert (tmp_path / "logs" / "first.log").exists()


STACK_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from worker.local.stack import Stack
    stack = Stack(sys.argv[1], postgres=False, temporal_port=int(sys.argv[2])).start()
    child = stack.spawn("sleeper", ["sleep", "300"])
    print(json.dumps({"temporal": stack.temporal.pid, "sleeper": child.pid}), flush=True)
    time.sleep(300)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stack_owner_dying_leaves_no_process(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGTERM: the stack stops everything and exits 143. SIGKILL: children get SIGTERM (PDEATHSIG)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TEMPORAL_ADDRESS", None)
    owner = subprocess.Popen([sys.executable, "-c", STACK_SCRIPT, str(tmp_path), str(free_port())],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        pids = json.loads(owner.stdout.readline())
        assert all(running(pid) for pid in pids.values())
        owner.send_signal(sig)
        assert owner.wait(30) == (143 if sig == signal.SIGTERM else -signal.SIGKILL)
        assert wait_until(lambda: not any(running(pid) for pid in pids.values())), pids
    finally:
        owner.kill()
        owner.wait()


async def test_embedded_postgres_survives_a_restart(tmp_path: Path) -> None:
    """The embedded path even when DATABASE_URL is set; a store reconnects after a restart."""
    data_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"lanes-pg-{os.getpid()}"  # short socket path
    handle = start_postgres(data_dir, database="lanes", use_database_url=False)
    try:
        assert handle.embedded and handle.owned and "host=" in handle.dsn and "/lanes?" in handle.dsn
        store = await Store.open(handle.dsn, retry_for=1.0)
        await store.ensure_session("s")
        handle.stop()
        assert processes_mentioning(str(handle.pgdata)) == []
        with pytest.raises(StoreUnavailable):
            await store.count_items("s")
        handle = start_postgres(data_dir, use_database_url=False)  # same data, same socket
        assert await store.count_items("s") == 0 and await store.ping()
        await store.close()
    finally:
        handle.stop()
        import shutil
        shutil.rmtree(data_dir, ignore_errors=True)
    assert processes_mentioning(str(handle.pgdata)) == []

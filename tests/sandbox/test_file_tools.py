"""The file tools against a hostile model (issue 24, parts 2, 3 and 5): no race, link or
special file takes them outside the workspace or stalls the worker, and the workspace has a
size limit. Real files, real threads, the real sandbox where a test needs one.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.sandbox import QUOTA_POLL_MIN_SECONDS, QUOTA_POLL_SECONDS, next_quota_poll, sandbox_problem
from activities.workspace import Workspace

NEEDS_SANDBOX = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no tool sandbox here: {sandbox_problem()}")


@pytest.fixture
def host() -> Iterator[Path]:
    """A folder with a workspace and, beside it, the host's files the model is after."""
    path = Path(tempfile.mkdtemp(prefix="lanes-files-test-"))
    path.chmod(0o755)  # a root worker's sandbox runs as another uid: it must reach the workspace
    (path / "outside").mkdir()
    (path / "outside" / "secret").write_text("host secret\n")
    (path / "ws").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def call(workspace: Workspace, tool: str, **arguments) -> tuple[str, int]:
    out = await asyncio.wait_for(workspace.run(tool, json.dumps(arguments)), 30)  # a stall fails the test
    return out.text, out.exit_code


def outside_writes(host: Path) -> list[str]:
    return sorted(p.name for p in (host / "outside").iterdir() if p.name != "secret")


# Exchanges "d" (a real directory) and "other" (a link to the host folder) atomically, again
# and again (renameat2 RENAME_EXCHANGE): "d" always exists, half the time as each.
SWAPPER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
os.chdir(sys.argv[1])
swaps, end = 0, time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    swaps += libc.renameat2(AT_FDCWD, b"d", AT_FDCWD, b"other", RENAME_EXCHANGE) == 0
print(swaps)
"""


async def test_a_directory_swapped_for_a_link_never_takes_a_file_tool_outside(host: Path):
    """Another process swaps a real directory and a link to the host folder under one name as
    fast as it can; a thousand writes and reads through that name never touch the host folder
    (the check-then-open tools this replaced wrote there within a few hundred tries)."""
    ws = host / "ws"
    (ws / "d").mkdir()
    (ws / "d" / "secret").write_text("workspace file\n")
    (ws / "other").symlink_to(host / "outside")
    swapper = await asyncio.create_subprocess_exec(sys.executable, "-c", SWAPPER, str(ws), "600",
                                                   stdout=asyncio.subprocess.PIPE)
    workspace = Workspace(ws)
    outcomes = {"written": 0, "read": 0, "refused": 0}
    try:
        for n in range(1_000):
            text, code = await call(workspace, "write_file", path=f"d/x{n}.txt", content="pwned")
            outcomes["written" if code == 0 else "refused"] += 1
            text, code = await call(workspace, "read_file", path="d/secret")
            assert "host secret" not in text
            outcomes["read" if code == 0 else "refused"] += 1
    finally:
        swapper.terminate()
        await swapper.wait()
    assert outcomes["refused"] > 0 and outcomes["written"] + outcomes["read"] > 0, outcomes  # the race was on
    assert outside_writes(host) == []
    assert (host / "outside" / "secret").read_text() == "host secret\n"


@NEEDS_SANDBOX
async def test_a_sandboxed_swap_loop_beside_the_file_tools_writes_nothing_outside(host: Path):
    """The attack as a model runs it: bash (in the sandbox) swaps a directory and a link to
    the host folder in a loop while the file tools go through the name."""
    ws = host / "ws"
    workspace = Workspace(ws)
    target = host / "outside"
    loop = (f"mkdir -p real; ln -sfn {target} link; end=$((SECONDS+20)); while [ $SECONDS -lt $end ]; do "
            "mv -T real d; mv -T d real; mv -T link d; mv -T d link; done")
    swapping = asyncio.create_task(workspace.run("bash", json.dumps({"command": loop})))
    await asyncio.sleep(0.5)
    attempts = 0
    while not swapping.done() and attempts < 3_000:
        await call(workspace, "write_file", path=f"d/y{attempts}.txt", content="pwned")
        text, _ = await call(workspace, "read_file", path="d/secret")
        assert "host secret" not in text
        attempts += 1
    await swapping
    assert attempts > 200 and outside_writes(host) == []


async def test_links_dotdot_absolute_paths_and_hard_links_are_refused(host: Path):
    ws = host / "ws"
    workspace = Workspace(ws)
    (ws / "sub").mkdir()
    (ws / "sub" / "ok.txt").write_text("fine\n")
    (ws / "to-outside").symlink_to(host / "outside")
    (ws / "to-secret").symlink_to(host / "outside" / "secret")
    (ws / "to-sub").symlink_to(ws / "sub")  # a link inside the workspace is not followed either
    os.link(host / "outside" / "secret", ws / "hard")  # a host file linked in (as a host could)
    for tool, path, words in [
        ("read_file", "../outside/secret", "outside the workspace"),
        ("read_file", "sub/../../outside/secret", "outside the workspace"),
        ("read_file", str(host / "outside" / "secret"), "outside the workspace"),
        ("read_file", "to-outside/secret", "symbolic link"),
        ("read_file", "to-secret", "symbolic link"),
        ("read_file", "to-sub/ok.txt", "symbolic link"),
        ("read_file", "hard", "hard links"),
        ("write_file", "to-outside/new.txt", "symbolic link"),
        ("write_file", "to-secret", "symbolic link"),
        ("write_file", "hard", "hard links"),
        ("list_files", "to-outside", "symbolic link"),
    ]:
        arguments = {"path": path, "content": "x"} if tool == "write_file" else {"path": path}
        text, code = await call(workspace, tool, **arguments)
        assert code != 0 and words in text, (tool, path, text)
    assert (host / "outside" / "secret").read_text() == "host secret\n" and outside_writes(host) == []
    # what stays allowed: plain paths, and /workspace, the sandbox's name for the workspace
    assert await call(workspace, "read_file", path="/workspace/sub/ok.txt") == ("fine\n", 0)
    assert (await call(workspace, "write_file", path="new/deep/file.txt", content="made"))[1] == 0
    listed, _ = await call(workspace, "list_files", path=".")
    assert listed.splitlines() == ["new/deep/file.txt", "sub/ok.txt"]  # links and linked files not listed


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
async def test_special_files_are_refused_without_stalling_the_worker(host: Path, kind: str):
    ws = host / "ws"
    special = ws / "special"
    if kind == "fifo":
        os.mkfifo(special)
    elif kind == "socket":
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(special))
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(special, 0o600 | 0o020000, os.makedev(1, 3))  # a character device: /dev/null's numbers
    (ws / "via-link").symlink_to(special)
    workspace = Workspace(ws)
    loop = asyncio.get_running_loop()
    last_tick, longest_gap = loop.time(), 0.0

    async def ticker() -> None:  # the event loop keeps running while the tools work
        nonlocal last_tick, longest_gap
        while True:
            await asyncio.sleep(0.001)
            now = loop.time()
            longest_gap, last_tick = max(longest_gap, now - last_tick), now

    ticking = asyncio.create_task(ticker())
    try:
        for tool, path in [("read_file", "special"), ("write_file", "special"), ("read_file", "via-link"),
                           ("write_file", "via-link")]:
            arguments = {"path": path, "content": "x"} if tool == "write_file" else {"path": path}
            text, code = await call(workspace, tool, **arguments)
            assert code != 0, (tool, path, text)
            assert ("symbolic link" if path == "via-link" else "regular files only") in text, text
    finally:
        ticking.cancel()
    # the loop was never held: an open that blocks on a FIFO would hold it for good (tools that
    # answer before the ticker's first tick are fine: the gap since then counts too)
    longest_gap = max(longest_gap, loop.time() - last_tick)
    assert longest_gap < 5.0, longest_gap
    listed, _ = await call(workspace, "list_files", path=".")
    assert listed == ""  # neither the special file nor the link is a file to list


async def test_write_file_past_the_workspace_quota_is_refused(host: Path):
    workspace = Workspace(host / "ws", quota_bytes=256 * 1024)
    assert (await call(workspace, "write_file", path="a.txt", content="a" * 100_000))[1] == 0
    text, code = await call(workspace, "write_file", path="b.txt", content="b" * 200_000)
    assert code != 0 and "limited to" in text and "delete files" in text
    assert not (host / "ws" / "b.txt").exists()
    # replacing a file counts what it replaces
    assert (await call(workspace, "write_file", path="a.txt", content="c" * 150_000))[1] == 0


def test_a_fast_growing_workspace_is_measured_sooner():
    slow = next_quota_poll(room=30 << 20, growth_per_second=1 << 20, last_wait=QUOTA_POLL_SECONDS)
    fast = next_quota_poll(room=30 << 20, growth_per_second=1 << 30, last_wait=QUOTA_POLL_SECONDS)
    assert slow == QUOTA_POLL_SECONDS  # 30 s of room at 1 MiB/s: the slowest rate
    assert fast < 0.01  # at 1 GiB/s a quarter of the room is written in about 7 ms
    assert next_quota_poll(room=1, growth_per_second=1e12, last_wait=0.1) == QUOTA_POLL_MIN_SECONDS
    # a workspace that stopped growing is measured less and less often
    assert next_quota_poll(room=1 << 20, growth_per_second=0, last_wait=0.01) == 0.02
    assert next_quota_poll(room=1 << 20, growth_per_second=-5, last_wait=0.2) == QUOTA_POLL_SECONDS


@NEEDS_SANDBOX
async def test_a_command_filling_the_disk_is_stopped_at_the_quota(host: Path):
    quota = 32 << 20
    workspace = Workspace(host / "ws", quota_bytes=quota)
    text, code = await call(workspace, "bash",
                            command="n=0; while true; do head -c 1048576 /dev/zero > f$n; n=$((n+1)); done")
    assert code != 0 and "passed its limit" in text, text[-300:]
    used = sum(p.stat().st_blocks * 512 for p in (host / "ws").iterdir())
    # stopped while the overshoot is a fraction of the room the fast writer had when last measured
    assert quota < used < quota + (64 << 20), used
    text, code = await call(workspace, "bash", command="rm -f f*; echo freed")  # cleaning up still runs
    assert code == 0 and "freed" in text


@NEEDS_SANDBOX
async def test_the_sandbox_shows_no_host_path_of_the_workspace(host: Path):
    ws = host / "ws"
    text, code = await call(Workspace(ws), "bash", command="tr '\\0' ' ' < /proc/1/cmdline; echo; cat /proc/1/environ")
    assert code == 0 and "bwrap" in text
    assert str(host) not in text, text

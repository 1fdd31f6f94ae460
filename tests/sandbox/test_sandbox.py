"""The bubblewrap sandbox for the model's bash tool, against the real bwrap.

Every test runs real commands in the sandbox and checks what they could or could not do:
see the environment, the host's files, other workspaces, the network; how the output,
the clock and the resource limits are enforced; that nothing outlives a timeout, a
cancellation or the worker's death.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities import sandbox
from activities.sandbox import (
    MAX_COMMAND_BYTES,
    SandboxLimits,
    SandboxPolicy,
    SandboxUnavailable,
    run_sandboxed,
    sandbox_problem,
)

pytestmark = pytest.mark.skipif(sandbox_problem() is not None,
                                reason=f"no usable sandbox here: {sandbox_problem()}")

REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0


def policy(network: bool = False, **limits) -> SandboxPolicy:
    return SandboxPolicy(network=network, limits=SandboxLimits(**limits))


@pytest.fixture
def root() -> Iterator[Path]:
    # Not pytest's tmp_path: that is 0700, and a root worker's sandbox runs as an
    # unprivileged host uid that must be able to reach the workspace.
    path = Path(tempfile.mkdtemp(prefix="lanes-sandbox-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def workspace(root: Path) -> Path:
    return root / "session"


def running(*argv: str) -> list[int]:
    """Host pids whose command line is exactly ``argv``."""
    wanted = ("\0".join(argv) + "\0").encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == wanted:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def wait_until_gone(*argv: str, within: float = 5.0) -> list[int]:
    deadline = time.monotonic() + within
    while (left := running(*argv)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def rss_kib(field: str) -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M).group(1))


async def test_the_environment_of_the_worker_does_not_reach_the_sandbox(workspace, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-test")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:pw@127.0.0.1:5432/x")
    # /proc/1 is bwrap's pid-1 child: exec'd with an empty environment, its environ is empty
    for command in ("env", "cat /proc/1/environ", "cat /proc/*/environ",
                    "tr '\\0' '\\n' < /proc/$$/environ"):
        result = await run_sandboxed(workspace, command, policy())
        assert result.exit_code == 0, (command, result.text)
        assert ("HOME=/workspace" in result.text) == (command != "cat /proc/1/environ"), result.text
        for secret in ("sk-secret-test", "OPENAI_API_KEY", "pw@127.0.0.1", "DATABASE_URL"):
            assert secret not in result.text, (command, result.text)
    result = await run_sandboxed(workspace, "env | cut -d= -f1 | sort", policy())
    assert set(result.text.split()) <= {"HOME", "LANG", "LOGNAME", "PATH", "PWD", "SHLVL", "TMPDIR", "USER", "_"}


async def test_the_host_filesystem_is_hidden_or_read_only(workspace):
    passwd = await run_sandboxed(workspace, "cat /etc/passwd", policy())
    assert passwd.exit_code == 0
    assert {line.split(":")[0] for line in passwd.text.splitlines()} == {"sandbox", "nobody"}
    assert "root:x:0:0" not in passwd.text
    host_users = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines() if line}
    for user in host_users - {"nobody"}:
        assert not re.search(rf"^{re.escape(user)}:", passwd.text, re.M), user
    etc = await run_sandboxed(workspace, "ls /etc", policy())
    assert "shadow" not in etc.text and "os-release" not in etc.text
    for command in ("cat /etc/shadow", "echo x >> /etc/passwd", "touch /usr/x", "touch /etc/x", "touch /x",
                    "ls /work", "ls /root", "ls /home", "ls /var/run/postgresql", "ls /sys/class",
                    "mkdir /workspace/../escape"):
        result = await run_sandboxed(workspace, command, policy())
        assert result.exit_code != 0, (command, result.text)
    assert not Path("/usr/x").exists() and not Path("/x").exists()


async def test_other_workspaces_and_the_host_tmp_are_out_of_reach(root, workspace):
    other = root / "other-session"
    other.mkdir()
    (other / "secret.txt").write_text("other-session-secret-content")
    for command in (f"cat {other}/secret.txt", "cat ../other-session/secret.txt",
                    "cat /workspace/../other-session/secret.txt", f"ls {root}"):
        result = await run_sandboxed(workspace, command, policy())
        assert result.exit_code != 0 and "secret-content" not in result.text, (command, result.text)
    name = f"sandbox-test-{uuid.uuid4().hex}"
    result = await run_sandboxed(workspace, f"echo private > /tmp/{name} && cat /tmp/{name}", policy())
    assert result.exit_code == 0 and result.text == "private\n"
    assert not (Path(tempfile.gettempdir()) / name).exists() and not (Path("/tmp") / name).exists()


async def test_the_workspace_is_writable_and_shared_with_the_host(workspace):
    workspace.mkdir()
    (workspace / "by-worker.txt").write_text("from the worker\n")  # as the file tools do
    result = await run_sandboxed(
        workspace, "pwd; echo hello > out.txt; mkdir -p d/e && echo deep > d/e/f; "
                   "echo more >> by-worker.txt", policy())
    assert result.exit_code == 0, result.text
    assert result.text == "/workspace\n"
    assert (workspace / "out.txt").read_text() == "hello\n"
    assert (workspace / "d/e/f").read_text() == "deep\n"
    assert (workspace / "by-worker.txt").read_text() == "from the worker\nmore\n"


async def test_host_device_nodes_cannot_be_changed(workspace):
    # Run as host root, the sandbox user would own the real /dev/null inode (bwrap binds it)
    # and this chmod would succeed on the host.
    before = os.stat("/dev/null").st_mode
    try:
        result = await run_sandboxed(workspace, "chmod 000 /dev/null", policy())
        assert result.exit_code != 0, result.text
        assert os.stat("/dev/null").st_mode == before
    finally:
        if os.stat("/dev/null").st_mode != before and ROOT:
            os.chmod("/dev/null", stat.S_IMODE(before))


@pytest.mark.skipif(not ROOT, reason="the hand-over of the workspace happens for a root worker only")
async def test_a_root_worker_hands_over_the_workspace_but_not_hard_links_out_of_it(root, workspace):
    outside = root / "outside.txt"
    outside.write_text("host file\n")
    workspace.mkdir()
    os.link(outside, workspace / "link.txt")
    result = await run_sandboxed(workspace, "echo changed > link.txt", policy())
    assert result.exit_code != 0
    assert outside.read_text() == "host file\n" and outside.stat().st_uid == 0
    hidden = root / "private"
    hidden.mkdir(mode=0o700)
    with pytest.raises(SandboxUnavailable, match="not searchable"):
        await run_sandboxed(hidden / "session", "true", policy())


async def test_no_network_without_the_policy(workspace):
    result = await run_sandboxed(
        workspace, "exec 3<>/dev/tcp/127.0.0.1/5432 && echo CONNECTED", policy())
    assert result.exit_code != 0 and "CONNECTED" not in result.text
    interfaces = await run_sandboxed(workspace, "tail -n +3 /proc/net/dev | cut -d: -f1", policy())
    assert interfaces.text.split() == ["lo"]


async def test_network_with_the_policy(workspace):
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
    except OSError:
        pytest.skip("nothing listens on 127.0.0.1:5432 here")
    result = await run_sandboxed(
        workspace, "exec 3<>/dev/tcp/127.0.0.1/5432 && echo CONNECTED", policy(network=True))
    assert result.exit_code == 0 and result.text == "CONNECTED\n"


async def test_an_unprivileged_user_without_capabilities(workspace):
    result = await run_sandboxed(workspace, "id -u; id -g; id -un; hostname; grep Cap /proc/self/status",
                                 policy())
    lines = result.text.splitlines()
    assert lines[:4] == ["1000", "1000", "sandbox", "sandbox"]
    caps = dict(re.findall(r"^(Cap\w+):\s+([0-9a-f]+)$", result.text, re.M))
    assert set(caps) >= {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}
    assert all(int(value, 16) == 0 for value in caps.values()), caps
    nested = await run_sandboxed(workspace, "unshare --user --map-root-user id -u", policy())
    assert nested.exit_code != 0 and not nested.text.startswith("0")


async def test_output_is_capped_while_it_streams(workspace):
    try:  # reset the peak RSS (VmHWM) so it measures this call only
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    before = rss_kib("VmRSS")
    result = await run_sandboxed(workspace, "yes 0123456789 | head -c 300000000", policy())
    grown_mib = (rss_kib("VmHWM") - before) / 1024
    assert result.exit_code == 0
    assert result.output_chars == 300_000_000 and result.truncated
    limit = SandboxLimits().max_output_chars
    marker = f"\n[... {300_000_000 - limit} characters of output dropped ...]\n"
    head, tail = result.text.split(marker)
    line = "0123456789\n"
    assert head == (line * limit)[:limit * 6 // 10]
    tail_start = 300_000_000 - (limit - len(head))  # the output's last 40%, cut mid-line
    assert tail == (line * limit)[tail_start % len(line):][:limit - len(head)]
    assert grown_mib < 50, f"the worker grew by {grown_mib:.0f} MiB"


async def test_small_output_and_invalid_utf8(workspace):
    result = await run_sandboxed(workspace, "printf 'a\\xffb\\n'; echo err >&2", policy())
    assert result.text == "a\ufffdb\nerr\n" and not result.truncated and result.output_chars == 8


async def test_a_timeout_kills_the_whole_tree(workspace):
    started = time.monotonic()
    result = await run_sandboxed(workspace, "echo before; setsid sleep 1001 & sleep 1001",
                                 policy(timeout_seconds=2))
    assert time.monotonic() - started < 6
    assert result.exit_code == 124 and result.timed_out
    assert result.text.startswith("before\n") and "timed out after 2 s" in result.text
    assert wait_until_gone("sleep", "1001") == []


async def test_cancellation_kills_the_tree_and_propagates(workspace):
    task = asyncio.create_task(run_sandboxed(workspace, "setsid sleep 1002 & sleep 1002", policy()))
    deadline = time.monotonic() + 5
    while len(running("sleep", "1002")) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert len(running("sleep", "1002")) == 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wait_until_gone("sleep", "1002") == []


async def test_a_background_job_holding_stdout_does_not_hold_the_call(workspace):
    for command in ("(sleep 30 &) ; echo done", "sleep 30 & echo done", "nohup setsid sleep 30 & echo done"):
        started = time.monotonic()
        result = await run_sandboxed(workspace, command, policy())
        assert time.monotonic() - started < 5, command
        assert result.exit_code == 0 and "done" in result.text and not result.timed_out


def test_nothing_survives_the_worker_being_killed(workspace):
    script = ("import asyncio, sys\nfrom pathlib import Path\nfrom activities.sandbox import run_sandboxed\n"
              "asyncio.run(run_sandboxed(Path(sys.argv[1]), 'echo started > marker; exec sleep 1003'))\n")
    worker = subprocess.Popen([sys.executable, "-c", script, str(workspace)], cwd=REPO)
    try:
        deadline = time.monotonic() + 10
        while not running("sleep", "1003") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running("sleep", "1003"), "the sandboxed command did not start"
        worker.send_signal(signal.SIGKILL)
        worker.wait(5)
        assert wait_until_gone("sleep", "1003") == []
    finally:
        worker.kill()
        worker.wait()


async def test_the_process_limit(workspace):
    # Enforced here even though the tests run as root: a root worker starts bwrap as an
    # unprivileged host uid, and the kernel only exempts host root from RLIMIT_NPROC.
    count = ("python3 -c 'import os, time\nn = 0\ntry:\n    for _ in range(1000):\n"
             "        if os.fork() == 0:\n            time.sleep(5); os._exit(0)\n        n += 1\n"
             "except BlockingIOError:\n    print(\"stopped after\", n)'")
    # (a non-root worker's own threads count too, hence some room below the limit)
    result = await run_sandboxed(workspace, count, policy(max_processes=64))
    stopped = re.fullmatch(r"stopped after (\d+)\n", result.text)
    assert stopped and 1 <= int(stopped.group(1)) < 64, result.text
    bomb = await run_sandboxed(workspace, "for i in $(seq 1000); do sleep 5 & done",
                               policy(max_processes=64, timeout_seconds=2))
    assert "fork" in bomb.text and "Resource temporarily unavailable" in bomb.text, bomb.text


@pytest.mark.skipif(not ROOT, reason="per-session uids need a root worker (a non-root one's sandboxes share its uid)")
async def test_one_sessions_fork_bomb_leaves_another_sessions_bash_working(root: Path):
    bomber, neighbour = root / "ses-bomber", root / "ses-neighbour"
    assert sandbox.session_uid(bomber) != sandbox.session_uid(neighbour)
    assert sandbox.session_uid(bomber) == sandbox.session_uid(root / "elsewhere" / "ses-bomber")  # by session
    bomb = asyncio.create_task(run_sandboxed(bomber, "for i in $(seq 100000); do sleep 30 & done",
                                             policy(max_processes=64, timeout_seconds=8)))
    await asyncio.sleep(1.5)  # the bomb holds every process its uid may have
    answers = [await run_sandboxed(neighbour, f"echo ok {n} && (true | cat) && ls / > /dev/null",
                                   policy(max_processes=64)) for n in range(5)]
    exhausted = await bomb
    assert "Resource temporarily unavailable" in exhausted.text, exhausted.text[-500:]
    assert [(a.exit_code, a.text) for a in answers] == [(0, f"ok {n}\n") for n in range(5)]
    assert os.stat(neighbour).st_uid == sandbox.session_uid(neighbour)  # its workspace was handed to its uid


def test_a_failed_availability_probe_is_tried_again(monkeypatch):
    results = iter(["no processes left to start bwrap with", None])
    probes = []

    def probe() -> str | None:
        probes.append(1)
        return next(results)

    monkeypatch.setattr(sandbox, "_probe", probe)
    monkeypatch.setattr(sandbox, "_probed", None)
    monkeypatch.setattr(sandbox, "PROBE_RETRY_SECONDS", 0.0)
    assert sandbox.sandbox_problem() == "no processes left to start bwrap with"
    assert sandbox.sandbox_problem() is None  # probed again: the host recovered
    assert sandbox.sandbox_problem() is None and len(probes) == 2  # a success is kept


async def test_the_file_size_limit(workspace):
    result = await run_sandboxed(workspace, "head -c 2000000 /dev/zero > big",
                                 policy(max_file_bytes=1 << 20))
    assert result.exit_code != 0 and "File size limit exceeded" in result.text
    assert (workspace / "big").stat().st_size == 1 << 20


async def test_the_tmpfs_size(workspace):
    result = await run_sandboxed(workspace, "head -c 2000000 /dev/zero > /tmp/big",
                                 policy(tmp_bytes=1 << 20))
    assert result.exit_code != 0 and "No space left on device" in result.text


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no python3 in /usr/bin")
async def test_the_memory_limit(workspace):
    small = await run_sandboxed(workspace, "python3 -c 'x = bytearray(200 * 1024**2); print(len(x))'",
                                policy(memory_bytes=1 << 30))
    assert small.exit_code == 0 and small.text == f"{200 * 1024**2}\n"
    big = await run_sandboxed(workspace, "python3 -c 'x = bytearray(3 * 1024**3)'",
                              policy(memory_bytes=1 << 30))
    assert big.exit_code != 0 and "MemoryError" in big.text


async def test_the_cpu_and_open_file_limits(workspace):
    started = time.monotonic()
    spin = await run_sandboxed(workspace, "while :; do :; done", policy(cpu_seconds=1, timeout_seconds=20))
    assert spin.exit_code == 128 + signal.SIGXCPU and not spin.timed_out
    assert time.monotonic() - started < 10
    files = await run_sandboxed(workspace, "ulimit -Hn; ulimit -n 4096 || echo refused",
                                policy(max_open_files=64))
    assert files.text.splitlines()[0] == "64" and files.text.rstrip().endswith("refused")


async def test_exit_codes_and_unusual_commands(workspace):
    assert (await run_sandboxed(workspace, "exit 7", policy())).exit_code == 7
    assert (await run_sandboxed(workspace, "kill -9 $$", policy())).exit_code == 137
    text = "héllo wörld ✓ 🚀 日本語 'quotes' \"double\" $HOME `backticks` \\ \t tab"
    result = await run_sandboxed(workspace, f"cat <<'EOF'\n{text}\nEOF", policy())
    assert result.exit_code == 0 and result.text == text + "\n"
    long = "x" * 100_000
    result = await run_sandboxed(workspace, f"echo {long} | wc -c", policy())
    assert result.text == "100001\n"
    for bad in ("echo a\0b", "#" * (MAX_COMMAND_BYTES + 1)):
        with pytest.raises(ValueError):
            await run_sandboxed(workspace, bad, policy())


def test_a_missing_bwrap_is_reported_with_the_fix(monkeypatch):
    which = shutil.which
    monkeypatch.setattr(sandbox.shutil, "which",
                        lambda name, path=None: None if name == "bwrap" else which(name, path=path))
    problem = sandbox._probe()
    assert problem is not None and "bwrap" in problem and "bubblewrap" in problem
    assert "unprivileged_userns_clone" in problem and "max_user_namespaces" in problem


@pytest.fixture
def no_bwrap(monkeypatch) -> Iterator[None]:
    """A host without bubblewrap (the probe's result is kept per process: forgotten around the test)."""
    which = shutil.which
    monkeypatch.setattr(sandbox.shutil, "which",
                        lambda name, path=None: None if name == "bwrap" else which(name, path=path))
    monkeypatch.setattr(sandbox, "_probed", None)
    yield
    sandbox._probed = None


async def test_without_a_sandbox_live_bash_refuses_to_run_unless_unsafe_is_set(no_bwrap, workspace, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-secret")
    from temporalio.exceptions import ApplicationError

    from activities.workspace import Workspace, sandbox_status
    from workflows.contract.failures import SANDBOX_UNAVAILABLE

    marker = workspace / "ran"
    with pytest.raises(ApplicationError) as refused:
        await Workspace(workspace).run("bash", f'{{"command": "touch {marker}"}}')
    assert refused.value.type == SANDBOX_UNAVAILABLE and refused.value.non_retryable
    assert "cannot run confined" in str(refused.value) and "bwrap" in str(refused.value)
    assert not marker.exists()  # nothing ran
    assert sandbox_status(False, workspace.parent)[0] is False

    # the operator's explicit opt-out: it runs, in the workspace, with a scrubbed environment
    unsafe = Workspace(workspace, unsafe_unconfined=True)
    out = await unsafe.run("bash", '{"command": "pwd; env | sort; touch ran"}')
    assert out.exit_code == 0 and marker.exists()
    assert out.text.splitlines()[0] == str(workspace.resolve())
    names = {line.split("=", 1)[0] for line in out.text.splitlines()[1:] if "=" in line}
    assert names <= {"HOME", "LANG", "PATH", "PWD", "OLDPWD", "SHLVL", "_"}, names
    assert "sk-worker-secret" not in out.text
    assert "OFF" in sandbox_status(True, workspace.parent)[1]

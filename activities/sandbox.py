"""Run a model-written shell command inside a bubblewrap sandbox.

The command sees: read-only ``/usr`` (and the ``/bin``/``/lib*``/``/sbin`` links), a
handful of read-only ``/etc`` files plus a synthetic ``/etc/passwd``/``/etc/group``, a
fresh ``/proc`` and ``/dev``, a private size-capped ``/tmp``, and the session's workspace
read-write at ``/workspace``. Nothing else of the host: no environment (bwrap itself is
exec'd with an empty one, since ``/proc/1/environ`` in the sandbox is bwrap's), no network
unless the policy allows it, no other workspaces, no host processes (own pid namespace).

The process tree lives in its own pid namespace, whose init (bwrap's child) dies with
bwrap (``--die-with-parent``); when it dies the kernel kills everything left inside,
``setsid`` daemons included. bwrap exits as soon as the command itself does, so a
background job that keeps stdout open cannot hold the call, and a timeout, a cancellation
or the worker's death leaves nothing running. Limits: ``SandboxLimits``; threat model and
host requirements: deploy/README.md, "Tool sandbox".
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_UID = 1000  # the command's uid/gid inside the sandbox
# Host uid/gid a root worker's availability probe runs as. In a user namespace the sandbox's
# uid maps to the uid that started bwrap; mapped to host root it could chmod the host's
# /dev/null (a bind of the real inode, which it would own) and RLIMIT_NPROC would not apply
# (the kernel exempts root). No account should use these ids on the host.
ID_WHEN_ROOT = 64999
# A root worker runs each session's sandbox as a host uid of its own, drawn from this range
# by the session (its workspace's name): RLIMIT_NPROC counts a uid's processes across user
# namespaces, so one session's fork bomb exhausts only its own count. Two sessions share a
# uid (and so a process limit) only when their names hash alike: about 1 in 16 million.
SESSION_UIDS = range(1 << 20, (1 << 20) + (1 << 24))
# A running command's workspace is measured at least every QUOTA_POLL_SECONDS, and sooner the
# faster it grows: at its measured growth the next measurement comes when at most a quarter of
# the room left can have been written (but never more often than QUOTA_POLL_MIN_SECONDS).
QUOTA_POLL_SECONDS = 0.25
QUOTA_POLL_MIN_SECONDS = 0.005
MAX_MEASURED = 200_000  # entries a workspace measurement walks at most
PROBE_RETRY_SECONDS = 30.0  # a failed availability probe is tried again after this
# One execve argument is at most MAX_ARG_STRLEN (32 pages) bytes, or bash -c fails (E2BIG).
MAX_COMMAND_BYTES = 131_071
_PASSWD = f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/workspace:/bin/bash\n" \
          "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
_GROUP = f"sandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n"
_HOSTS = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost sandbox\n"
_ETC_ALWAYS = ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime")
_ETC_NETWORK = ("/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf",
                "/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates.conf")
_FIX = ("install the Debian package 'bubblewrap' (and 'util-linux' for prlimit), and allow "
        "unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 (Debian "
        "kernels) and user.max_user_namespaces > 0; in a container the seccomp/AppArmor "
        "profile must allow unshare/clone(CLONE_NEWUSER) (Docker's default seccomp profile "
        "blocks it). See deploy/README.md, 'Tool sandbox'.")


@dataclass(frozen=True)
class SandboxLimits:
    timeout_seconds: float = 120.0   # wall clock, whole call
    cpu_seconds: int = 120           # RLIMIT_CPU: per process, not per tree
    memory_bytes: int = 2 << 30      # RLIMIT_AS: virtual address space, per process
    max_file_bytes: int = 256 << 20  # RLIMIT_FSIZE: largest file a process may write
    max_processes: int = 256         # RLIMIT_NPROC: see _limits() for what it counts
    max_open_files: int = 1024       # RLIMIT_NOFILE: per process
    max_output_chars: int = 200_000  # output kept: first 60% and last 40%
    tmp_bytes: int = 256 << 20       # size of each tmpfs (/tmp, /dev/shm): RAM not in RLIMIT_AS


@dataclass(frozen=True)
class SandboxPolicy:
    network: bool = False
    limits: SandboxLimits = field(default_factory=SandboxLimits)


@dataclass(frozen=True)
class SandboxResult:
    text: str            # merged stdout+stderr, capped (plus a timeout note)
    exit_code: int       # the command's; 128+N when killed by signal N; 124 on timeout
    timed_out: bool
    output_chars: int    # characters the command wrote in total
    truncated: bool


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here."""


def _executable(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
    if found is None:
        raise SandboxUnavailable(f"'{name}' was not found on PATH; {_FIX}")
    return found


def session_uid(workspace: Path) -> int:
    """The host uid of a session's sandbox under a root worker (see SESSION_UIDS)."""
    digest = hashlib.sha256(workspace.name.encode("utf-8", "surrogatepass")).digest()
    return SESSION_UIDS[int.from_bytes(digest[:8], "big") % len(SESSION_UIDS)]


def _ids(workspace: Path | None = None) -> tuple[int, int] | None:
    """The host uid/gid to drop to before bwrap (the session's, or the probe's without a
    workspace), or None to keep the worker's own (it is not root: it cannot change uid)."""
    if os.geteuid() != 0:
        return None
    uid = ID_WHEN_ROOT if workspace is None else session_uid(workspace)
    return uid, uid


def _limits(limits: SandboxLimits, max_file_bytes: int | None = None) -> list[str]:
    # Set by prlimit(1) between the fork and bwrap's exec (no Python runs in the child),
    # inherited by every process in the sandbox; they cannot be raised (no capability in
    # the host's user namespace). RLIMIT_NPROC counts the processes of the *host* uid the
    # sandbox maps to, across user namespaces: a root worker gives each session a uid of its
    # own (session_uid); a non-root worker's sandboxes all share its uid, and so the limit,
    # with the worker's own threads. For host root it is not enforced at all.
    file_bytes = limits.max_file_bytes if max_file_bytes is None else min(limits.max_file_bytes, max_file_bytes)
    return [f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",  # SIGXCPU, then SIGKILL
            f"--as={limits.memory_bytes}", f"--fsize={file_bytes}",
            f"--nproc={limits.max_processes}", f"--nofile={limits.max_open_files}", "--core=0"]


def _bwrap_args(policy: SandboxPolicy, workspace: Path, data_fds: dict[str, int]) -> list[str]:
    args = ["--unshare-all", "--unshare-user",  # --unshare-all only *tries* the user namespace
            "--disable-userns",  # no nested user namespaces: a big kernel attack surface
            "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]
    if policy.network:
        args.append("--share-net")
    args += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{name}"  # merged-/usr hosts have links, older ones directories
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    args += ["--perms", "0755", "--dir", "/etc"]  # else bwrap makes it 0700
    for path in _ETC_ALWAYS + (_ETC_NETWORK if policy.network else ()):
        args += ["--ro-bind-try", path, path]
    for path, fd in data_fds.items():
        args += ["--perms", "0644", "--ro-bind-data", str(fd), path]
    size = str(policy.limits.tmp_bytes)
    args += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm",
             "--size", size, "--tmpfs", "/tmp", "--bind", str(workspace), "/workspace",
             "--remount-ro", "/",  # the root tmpfs holding the mount points
             "--chdir", "/workspace", "--clearenv"]
    for name, value in (("PATH", "/usr/local/bin:/usr/bin:/bin"), ("HOME", "/workspace"),
                        ("LANG", "C.UTF-8"), ("TMPDIR", "/tmp"), ("USER", "sandbox"),
                        ("LOGNAME", "sandbox")):
        args += ["--setenv", name, value]
    return args


def _argv(policy: SandboxPolicy, args_fd: int, command: str, max_file_bytes: int | None = None) -> list[str]:
    """prlimit, then bwrap reading its options from ``args_fd`` (see _args_file): inside, the
    sandbox's pid 1 is a copy of bwrap, whose /proc/1/cmdline would otherwise show every host
    path it binds. (bwrap takes the command itself only from its command line.)"""
    return [_executable("prlimit"), *_limits(policy.limits, max_file_bytes), "--", _executable("bwrap"),
            "--args", str(args_fd), "--", "bash", "-c", command]


def _args_file(policy: SandboxPolicy, workspace: Path, data_fds: dict[str, int]) -> int:
    """A memory file holding bwrap's options, NUL-separated, read from the start."""
    fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
    payload = b"".join(arg.encode("utf-8", "surrogateescape") + b"\0"
                       for arg in _bwrap_args(policy, workspace, data_fds))
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _data_pipes() -> dict[str, int]:
    """Read ends of pipes holding the synthetic /etc files (each far below a pipe's 64 KiB)."""
    fds = {}
    for path, text in (("/etc/passwd", _PASSWD), ("/etc/group", _GROUP), ("/etc/hosts", _HOSTS)):
        read, write = os.pipe()
        os.write(write, text.encode())
        os.close(write)
        fds[path] = read
    return fds


def _spawn_kwargs(ids: tuple[int, int] | None, fds: list[int]) -> dict:
    kwargs: dict = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT,
                    "env": {}, "cwd": "/", "pass_fds": fds,
                    "start_new_session": True}  # its own process group: one killpg reaches bwrap
    if ids is not None:
        kwargs.update(user=ids[0], group=ids[1], extra_groups=[])
    return kwargs


def workspace_problem(workspace: Path) -> str | None:
    """Why a root worker's sandbox could not reach ``workspace`` (None: it can, or not root)."""
    ids = _ids()
    if ids is None:
        return None
    for parent in workspace.resolve().parents:  # bwrap resolves the path as that uid: it must pass
        if parent.exists() and not parent.stat().st_mode & stat.S_IXOTH:
            return (f"{parent} is not searchable by uid {ids[0]}, the uid a root worker's sandbox "
                    f"runs as; use a workspace root under world-searchable directories (chmod o+x, "
                    f"or LANES_WORKSPACE_ROOT)")
    return None


def _hand_over(workspace: Path, ids: tuple[int, int] | None) -> None:
    """Make the workspace usable by the sandbox's host uid (only when the worker is root)."""
    if ids is None:
        return
    uid, gid = ids
    if (problem := workspace_problem(workspace)) is not None:
        raise SandboxUnavailable(problem)
    os.chown(workspace, uid, gid, follow_symlinks=False)
    # fwalk + dir_fd + no-follow: a symlink swapped in meanwhile cannot redirect a chown.
    for _, dirs, files, dir_fd in os.fwalk(workspace, follow_symlinks=False):
        for name in dirs + files:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if st.st_uid == uid or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                continue
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                continue  # may be a hard link to a file outside the workspace: never give it away
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)


class _Capped:
    """Keeps the first 60% and the last 40% of the text; counts all of it."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit * 6 // 10
        self.tail_limit = limit - self.head_limit
        self.head: list[str] = []
        self.head_len = 0
        self.tail = ""
        self.seen = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final)
        self.seen += len(text)
        room = self.head_limit - self.head_len
        if room > 0:
            self.head.append(text[:room])
            self.head_len += len(self.head[-1])
            text = text[room:]
        if text and self.tail_limit > 0:  # never join more than one chunk to the tail
            kept = self.tail if len(text) < self.tail_limit else ""
            self.tail = (kept + text)[-self.tail_limit:]

    def text(self) -> tuple[str, bool]:
        dropped = self.seen - self.head_len - len(self.tail)
        marker = f"\n[... {dropped} characters of output dropped ...]\n" if dropped else ""
        return "".join(self.head) + marker + self.tail, dropped > 0


def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the sandbox's pid 1: the kernel then kills every process in its namespace."""
    # bwrap's child, the namespace's init, runs in a session of its own (--new-session),
    # out of reach of a killpg on bwrap. It dies with bwrap anyway (--die-with-parent sets
    # PDEATHSIG), but not if bwrap is killed before the child has set that up, so kill it
    # by pid too, read from bwrap's children while bwrap still lives (and has not reaped it).
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except OSError:  # gone already, or a kernel without CONFIG_PROC_CHILDREN
        children = []
    for pid in children:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # bwrap's own group (start_new_session)
    except ProcessLookupError:
        pass


def _check_command(command: str) -> None:
    if "\0" in command or len(command.encode()) > MAX_COMMAND_BYTES:
        raise ValueError(f"a command must be free of NUL bytes and at most {MAX_COMMAND_BYTES} "
                         f"bytes (write long content with a file tool instead)")


async def run_sandboxed(workspace: Path, command: str, policy: SandboxPolicy = SandboxPolicy(), *,
                        quota_bytes: int | None = None) -> SandboxResult:
    """Run ``bash -c command`` in the sandbox with ``workspace`` at /workspace.

    A root worker first hands the workspace tree over to the session's uid (``session_uid``;
    chown, files with several hard links excepted), and its path must be searchable by that
    uid. ``quota_bytes``: the command is stopped once the workspace takes more than that on
    disk (or than it took before, when it was over already). Raises SandboxUnavailable when
    the sandbox cannot run here, ValueError for a command with a NUL byte or longer than
    MAX_COMMAND_BYTES.
    """
    _check_command(command)
    problem = sandbox_problem()
    if problem is not None:
        raise SandboxUnavailable(problem)
    workspace = workspace.resolve()
    workspace.mkdir(parents=True, exist_ok=True)
    ids = _ids(workspace)
    if ids is not None:
        await asyncio.to_thread(_hand_over, workspace, ids)
    before = 0 if quota_bytes is None else await asyncio.to_thread(_usage, workspace)
    limit = None if quota_bytes is None else max(quota_bytes, before)
    data = _data_pipes()
    args = _args_file(policy, workspace, data)
    try:
        proc = await asyncio.create_subprocess_exec(
            *_argv(policy, args, command, limit), **_spawn_kwargs(ids, [*data.values(), args]))
    finally:
        for fd in [*data.values(), args]:
            os.close(fd)
    over = asyncio.Event()
    watcher = None if limit is None else asyncio.create_task(_watch_quota(proc, workspace, limit, before, over))
    try:
        result = await _collect(proc, policy.limits)
    finally:
        if watcher is not None:
            watcher.cancel()
    if over.is_set():
        result = dataclasses.replace(result, text=result.text + (
            f"\n[the workspace passed its limit of {(quota_bytes or 0) / 2**20:.0f} MiB: the command and every process "
            "it started were stopped; delete files to make room]"))
    return result


def _usage(workspace: Path) -> int:
    from activities.beneath import Beneath  # the file tools' walker: never follows a link

    return Beneath(str(workspace)).usage(MAX_MEASURED)


async def _watch_quota(proc: asyncio.subprocess.Process, workspace: Path, limit: int, before: int,
                       over: asyncio.Event) -> None:
    """Kill the sandbox once the workspace takes more than ``limit`` bytes on disk. What it
    writes between two measurements still lands (RLIMIT_FSIZE bounds each file), so the next
    measurement is scheduled by the growth rate: a fast writer is measured often. ``before``:
    what the workspace took when the command started (its growth is counted from there)."""
    loop = asyncio.get_running_loop()
    used, at = before, loop.time()
    wait = QUOTA_POLL_MIN_SECONDS  # the rate is unknown until two measurements
    while proc.returncode is None:
        await asyncio.sleep(wait)
        try:
            now_used = await asyncio.to_thread(_usage, workspace)
        except OSError:
            continue  # a directory removed mid-walk: measured again next time
        if now_used > limit:
            over.set()
            _kill(proc)
            return
        now = loop.time()
        wait = next_quota_poll(limit - now_used, (now_used - used) / max(now - at, 1e-6), wait)
        used, at = now_used, now


def next_quota_poll(room: int, growth_per_second: float, last_wait: float) -> float:
    """Seconds until the next measurement: a quarter of the time the room left lasts at the
    measured growth, between QUOTA_POLL_MIN_SECONDS and QUOTA_POLL_SECONDS; a workspace not
    growing is measured half as often each time, up to the slowest rate."""
    if growth_per_second <= 0:
        return min(QUOTA_POLL_SECONDS, last_wait * 2)
    return max(QUOTA_POLL_MIN_SECONDS, min(QUOTA_POLL_SECONDS, room / growth_per_second / 4))


async def run_unconfined(workspace: Path, command: str, policy: SandboxPolicy = SandboxPolicy()) -> SandboxResult:
    """``bash -c command`` in ``workspace`` WITHOUT the sandbox, for hosts that cannot run it
    and whose operator explicitly allowed that (LANES_UNSAFE_NO_SANDBOX=1): the command runs
    as the worker's user and sees its files and network. Only the limits, the bounded output
    and the kill of its process group on timeout still apply (a ``setsid`` child escapes)."""
    _check_command(command)
    workspace = workspace.resolve()
    workspace.mkdir(parents=True, exist_ok=True)
    environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workspace), "LANG": "C.UTF-8"}
    proc = await asyncio.create_subprocess_exec(
        _executable("prlimit"), *_limits(policy.limits), "--", "bash", "-c", command,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment,
        cwd=workspace, start_new_session=True)
    return await _collect(proc, policy.limits)


async def _collect(proc: asyncio.subprocess.Process, limits: SandboxLimits) -> SandboxResult:
    """Stream the output (bounded), wait for the exit; on timeout or cancellation kill the tree."""
    out = _Capped(limits.max_output_chars)
    stdout = proc.stdout
    assert stdout is not None  # spawned with stdout=PIPE

    async def pump() -> int:
        # read() hands over what the stream buffered (<= 64 KiB + one pipe read); the
        # transport pauses when that buffer is full, so memory stays bounded.
        while chunk := await stdout.read(1 << 20):
            out.feed(chunk)
        return await proc.wait()

    timed_out = False
    try:
        exit_code = await asyncio.wait_for(pump(), limits.timeout_seconds)
    except TimeoutError:
        timed_out = True
        _kill(proc)
        try:  # what the pipe still holds; it closes once the namespace is gone
            await asyncio.wait_for(pump(), 10)
        except TimeoutError:
            pass
        exit_code = 124
    except BaseException:  # cancelled (or anything else): leave nothing running
        _kill(proc)
        raise
    out.feed(b"", final=True)
    text, truncated = out.text()
    if timed_out:
        text += (f"\n[command timed out after {limits.timeout_seconds:g} s; it and every "
                 f"process it started were killed]")
    return SandboxResult(text, exit_code, timed_out, out.seen, truncated)


_probed: tuple[float, str | None] | None = None  # (when, result) of the last availability probe


def sandbox_problem() -> str | None:
    """None when the sandbox works here, else why not. A success is kept for the process's
    life; a failure (a missing package, or a moment when no process could start) is probed
    again after PROBE_RETRY_SECONDS."""
    global _probed
    now = time.monotonic()
    if _probed is None or (_probed[1] is not None and now - _probed[0] >= PROBE_RETRY_SECONDS):
        _probed = (now, _probe())
    return _probed[1]


def _probe() -> str | None:
    try:
        _executable("prlimit"), _executable("bwrap")
    except SandboxUnavailable as error:
        return str(error)
    ids = _ids()
    with tempfile.TemporaryDirectory(prefix="lanes-sandbox-probe-") as tmp:
        workspace = Path(tmp)
        workspace.chmod(0o755)
        data = _data_pipes()
        args = -1
        try:
            _hand_over(workspace, ids)
            args = _args_file(SandboxPolicy(), workspace, data)
            done = subprocess.run(_argv(SandboxPolicy(), args, "echo sandbox-ok"),
                                  **_spawn_kwargs(ids, [*data.values(), args]), timeout=30)
        except (OSError, subprocess.SubprocessError, SandboxUnavailable) as error:
            return f"the sandbox could not start ({error}); {_FIX}"
        finally:
            for fd in [*data.values(), args]:
                if fd >= 0:
                    os.close(fd)
    output = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or output != "sandbox-ok":
        return f"bubblewrap failed (exit {done.returncode}: {output[-500:]!r}); {_FIX}"
    return None

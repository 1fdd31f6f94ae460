"""``lanes dev``, ``lanes demo``, ``lanes worker``, ``lanes api``: the processes of a stack.

Options are parsed here; the work is in :mod:`worker.local` and :mod:`worker.api.main`,
imported only when a command runs (``--help`` starts nothing and imports little).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from worker.cli.common import QuietOption, fail

DEFAULT_API_PORT = 8000  # worker.local.api_process.DEFAULT_API_PORT
DEFAULT_BUDGET = 12_000  # worker.local.replay_session.DEFAULT_REPLAY_BUDGET

LogLevel = Literal["critical", "error", "warning", "info", "debug"]
DataDirOption = Annotated[Path | None, typer.Option(help="where the stack keeps its files [default: $LANES_DATA_DIR "
                                                         "or ./.lanes]", show_default=False)]


def _local_errors(prog: str, action):
    """Run ``action``; a stack that cannot start is one line (or its log's tail), never a traceback."""
    from worker.local.api_process import LocalStackError
    from worker.local.replay_session import ReplayUnavailable
    from worker.tracing import TracingUnavailable

    try:
        return action()
    except (LocalStackError, ReplayUnavailable, TracingUnavailable) as exc:
        raise fail(prog, str(exc), 2 if "in use" in str(exc) else 1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except (RuntimeError, TimeoutError, OSError) as exc:  # a service that did not start: say which and why
        raise fail(prog, str(exc)) from None


def dev(
    trajectory: Annotated[str | None, typer.Argument(
        help="with --replay: the recording to replay, a file or a path under the recordings folder "
             "[default: the demo's]", show_default=False)] = None,
    replay: Annotated[bool, typer.Option("--replay",
        help="also start the bundled replay model and a session replaying a recording: watch it compact in "
             "the inspector, no API key needed")] = False,
    api_port: Annotated[int, typer.Option("--api-port", "--port", min=1, max=65535,
                                          help="the API's port (checked before anything starts)")] = DEFAULT_API_PORT,
    temporal_port: Annotated[int | None, typer.Option(
        min=1, max=65535, help="Temporal's port [default: 7233 when free, else any free port]",
        show_default=False)] = None,
    budget: Annotated[int | None, typer.Option(
        help=f"with --replay: the session's budget in tokens [default: {DEFAULT_BUDGET:,}]", show_default=False)] = None,
    data_dir: DataDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the addresses as one JSON line once ready")] = False,
    quiet: QuietOption = False,
) -> None:
    """Run the local stack in the foreground: Temporal, PostgreSQL, a worker and the HTTP API
    (inspector at /ui). Ctrl-C stops it all."""
    from worker.local.dev import DevOptions, run

    options = DevOptions(data_dir=data_dir, api_port=api_port, temporal_port=temporal_port,
                         replay=replay or trajectory is not None, trajectory=trajectory, budget=budget,
                         as_json=as_json, quiet=quiet)
    code = _local_errors("lanes dev", lambda: run(options))
    if code:
        raise typer.Exit(code)


def demo(
    trajectory: Annotated[str | None, typer.Option(help="recorded session to replay [default: a bundled one]",
                                                   show_default=False)] = None,
    kill_worker_at_step: Annotated[int | None, typer.Option(
        metavar="N", help="SIGKILL the worker at step N and start a fresh one: the session carries on")] = None,
    budget: Annotated[int, typer.Option(help="working-set budget in tokens (small enough to see compactions)")]
        = DEFAULT_BUDGET,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    data_dir: Annotated[Path | None, typer.Option(help="where the stack keeps its files [default: a temporary "
                                                       "folder, removed at the end]", show_default=False)] = None,
    keep_running: Annotated[bool, typer.Option(
        "--keep-running", "--ui", help="also start the API, print the inspector's address with its token, and keep "
                                       "the stack up after the demo (Ctrl-C stops it)")] = False,
    api_port: Annotated[int | None, typer.Option(
        "--api-port", "--port", min=1, max=65535,
        help=f"with --ui: the API's port [default: {DEFAULT_API_PORT} when free, else any free port]",
        show_default=False)] = None,
    quiet: QuietOption = False,
) -> None:
    """Replay a recorded agent session through the real stack, offline, and print a summary."""
    from worker.local.demo import DemoOptions, run

    options = DemoOptions(budget=budget, kill_worker_at_step=kill_worker_at_step, json=as_json,
                          data_dir=str(data_dir) if data_dir else None, keep_running=keep_running,
                          api_port=api_port, quiet=quiet)
    if trajectory:
        from worker.local.replay_session import resolve_trajectory

        options.trajectory = str(_local_errors("lanes demo", lambda: resolve_trajectory(trajectory)))
    code = _local_errors("lanes demo", lambda: run(options))
    if code:
        raise typer.Exit(code)


def worker() -> None:
    """Run one worker: Temporal and PostgreSQL from the environment (TEMPORAL_ADDRESS, DATABASE_URL)."""
    from worker.worker import main

    main()  # exits through os._exit (DESIGN §4)


def api(
    host: Annotated[str | None, typer.Option(help="[default: $LANES_API_HOST or 127.0.0.1]", show_default=False)] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="[default: $LANES_API_PORT or 8000]",
                                             show_default=False)] = None,
    log_level: Annotated[LogLevel | None, typer.Option(help="[default: $LANES_LOG_LEVEL or info]",
                                                       show_default=False)] = None,
) -> None:
    """Serve the HTTP API: sessions, external-agent mode, the inspector at /ui."""
    from worker.api.main import serve
    from worker.local.api_process import check_port
    from worker.settings import get_settings

    settings = get_settings()
    host, port = host or settings.api_host, port or settings.api_port
    _local_errors("lanes api", lambda: check_port(port, host, "the API", "--port or LANES_API_PORT"))
    code = serve(host, port, log_level)
    sys.stdout.flush()
    raise typer.Exit(code)

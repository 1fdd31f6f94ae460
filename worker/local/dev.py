"""``lanes dev``: the local stack for development, in the foreground.

Starts the Temporal dev server (its own SQLite file under the data directory),
PostgreSQL (``DATABASE_URL`` if set, else a throwaway embedded server), one worker
and the HTTP API; prints the addresses; Ctrl-C stops everything. With ``--replay`` it
also starts the bundled replay model and a session replaying a recording, to watch in
the inspector with no API key.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from worker import tracing
from worker.local.api_process import DEFAULT_API_PORT, LocalApi, LocalStackError, check_port, start_api
from worker.local.commands import installed_command
from worker.local.stack import Stack
from worker.settings import get_settings, redact_url


@dataclass
class DevOptions:
    data_dir: Path | None = None
    api_port: int = DEFAULT_API_PORT
    temporal_port: int | None = None
    replay: bool = False
    trajectory: str | None = None
    budget: int | None = None
    as_json: bool = False
    quiet: bool = False


@dataclass
class ReplayStarted:
    model_url: str
    session_id: str
    trajectory: str


def banner_console(as_json: bool, width: int | None = None) -> Console:
    """Where the banner goes: lines are never broken, so the URLs and the commands it prints
    copy whole from any terminal (the terminal wraps them on screen only)."""
    return Console(stderr=as_json, highlight=False, soft_wrap=True, width=width)


def run(options: DevOptions) -> int:
    from worker.local import replay_session as rs

    settings = get_settings()
    data_dir = (options.data_dir or settings.data_dir).resolve()
    out = banner_console(options.as_json)
    host = settings.api_host
    # Everything that can be refused is checked before anything starts.
    tracing.check(settings)
    check_port(options.api_port, host, "the API", "--api-port")
    if options.temporal_port is not None:
        check_port(options.temporal_port, "127.0.0.1", "Temporal", "--temporal-port")
    recording = None
    if options.replay:
        path = rs.resolve_trajectory(options.trajectory)
        recording = (path, rs.load(path))
    stack = Stack(data_dir, temporal_port=options.temporal_port)
    try:
        with out.status("starting PostgreSQL and Temporal…"):
            stack.start()
        return _serve(options, stack, data_dir, host, recording, out)
    finally:
        stack.stop()


def _serve(options: DevOptions, stack: Stack, data_dir: Path, host: str, recording, out: Console) -> int:
    from worker.local import replay_session as rs
    from worker.replay.model_server import ReplayModelServer

    settings = get_settings()
    server = None
    stack.spawn("worker", [sys.executable, "-m", "worker.worker"])
    roots = [root for root in settings.replay_roots if root.is_dir()]
    if recording is not None:
        path, trajectory = recording
        with out.status("starting the replay model…"):
            server = ReplayModelServer([*roots, trajectory]).start()
        rs.write_model_url(data_dir, server.base_url)
        if not any(root.resolve() in path.parents for root in roots):
            roots.append(path.parent)  # the API accepts recordings under its replay folders only
    try:
        with out.status("starting the API…"):
            api = start_api(stack, host, options.api_port, allow_replay=recording is not None, replay_roots=roots)
        replay = _start_replay(api, server.base_url, recording, options.budget) if server and recording else None
        _banner(out, options, stack, data_dir, api, replay)
        name, code = stack.wait_any()
        out.print(f"[red]{name} exited with code {code} (log {data_dir / 'logs' / (name + '.log')}); "
                  "stopping the stack")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        if server is not None:
            server.stop()
            (data_dir / rs.MODEL_FILE).unlink(missing_ok=True)


def _start_replay(api: LocalApi, model_url: str, recording, budget: int | None) -> ReplayStarted:
    from lanes_client import LanesClient
    from worker.local import replay_session as rs

    path, trajectory = recording
    with LanesClient(api.url, api.token) as lanes:
        body = rs.session_body(path, trajectory, model_url, budget_tokens=budget or rs.DEFAULT_REPLAY_BUDGET)
        created = lanes.create_session(**body)
        lanes.send_message(created.session_id, trajectory.task)
    return ReplayStarted(model_url, created.session_id, trajectory.id)


def _banner(out: Console, options: DevOptions, stack: Stack, data_dir: Path, api: LocalApi,
            replay: ReplayStarted | None) -> None:
    """What runs where. One line per service: add a line here for a new one."""
    if options.as_json:
        print(json.dumps({
            "api_url": api.url, "ui_url": api.ui_url(replay.session_id if replay else None),
            "token_file": api.token_source, "temporal_address": stack.temporal_address,
            "data_dir": str(data_dir), "logs": str(data_dir / "logs"), "model": get_settings().model_banner(),
            "replay_model_url": replay.model_url if replay else None,
            "session_id": replay.session_id if replay else None,
        }), flush=True)
        return
    if options.quiet:
        out.print(api.ui_url(replay.session_id if replay else None))
        return
    temporal = installed_command("temporal")
    out.print(f"[bold]Context Lanes local stack[/bold] (data in {data_dir})")
    out.print(f"  Temporal   {stack.temporal_address}  ({temporal} workflow list --address {stack.temporal_address})")
    out.print(f"  PostgreSQL {redact_url(stack.dsn)}")
    out.print(f"  API        {api.url}  (token in {api.token_source})")
    out.print(f"  worker     logs in {data_dir / 'logs'}")
    out.print(f"  model      {get_settings().model_banner()}")
    if replay is not None:
        out.print(f"  replay     model {replay.model_url}; session [bold]{replay.session_id}[/bold] replays "
                  f"{replay.trajectory}")
    out.print(f"  inspector  {api.ui_url(replay.session_id if replay else None)}")
    out.print(f"CLI from another folder: export LANES_API_URL={api.url} LANES_DATA_DIR={data_dir}"
              f"  (the CLI: {installed_command('lanes')})")
    out.print("Ctrl-C stops everything.")


def main(argv: list[str] | None = None) -> int:
    """``python -m worker.local.dev ARGS``: the same as ``lanes dev ARGS``."""
    from worker.cli import run as cli

    return cli(["dev", *(sys.argv[1:] if argv is None else argv)])


__all__ = ["DevOptions", "LocalStackError", "main", "run"]

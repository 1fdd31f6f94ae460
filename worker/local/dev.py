"""``lanes dev``: the local stack for development, in the foreground.

Starts the Temporal dev server (its own SQLite file under the data directory),
PostgreSQL (``DATABASE_URL`` if set, else a throwaway embedded server), one worker
and the HTTP API; prints the addresses; Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from worker.local.stack import Stack
from worker.settings import get_settings, redact_url


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lanes dev", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="default: $LANES_DATA_DIR or ./.lanes")
    args = parser.parse_args(argv)
    settings = get_settings()
    data_dir = Path(args.data_dir) if args.data_dir else settings.data_dir
    console = Console()
    with Stack(data_dir) as stack:
        stack.spawn("worker", [sys.executable, "-m", "worker.worker"])
        stack.spawn("api", [sys.executable, "-m", "worker.api.main"])
        console.print(f"[bold]Context Lanes local stack[/bold] (data in {data_dir})")
        console.print(f"  Temporal   {stack.temporal_address}  (temporal workflow list --address {stack.temporal_address})")
        console.print(f"  PostgreSQL {redact_url(stack.dsn)}")
        console.print(f"  API        http://{settings.api_host}:{settings.api_port}  (inspector: /ui; token in "
                      f"{data_dir / 'api-token'} unless LANES_API_TOKENS is set)")
        console.print(f"  worker     logs in {data_dir / 'logs'}")
        console.print(f"  model      {settings.model_banner()}")
        console.print("Ctrl-C stops everything.")
        try:
            name, code = stack.wait_any()
            console.print(f"[red]{name} exited with code {code}; stopping the stack")
            return 1
        except KeyboardInterrupt:
            return 0

"""What every ``lanes`` command shares: output, the API's address and token, errors.

Output: tables and messages go through :func:`console`, which never wraps when stdout is
not a terminal (piped output keeps whole lines); ``--json`` prints JSON on stdout;
informational lines go to stderr so that stdout stays machine-readable.

Exit codes: 0 done, 1 the API refused or failed (message on stderr), 2 usage error,
3 the API could not be reached, 4 a task the command waited for failed, 5 the wait ran out
while the task still runs.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from lanes_client import AsyncLanesClient

EXIT_API, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_TASK_FAILED, EXIT_STILL_RUNNING = 1, 2, 3, 4, 5
DEFAULT_API_URL = "http://127.0.0.1:8000"  # lanes_client.DEFAULT_URL, without importing httpx for --help
PIPED_WIDTH = 100_000  # "no terminal": lines as long as their content


class Usage(Exception):
    """A mistake in the command line the parser could not see (exit 2)."""


def console(stderr: bool = False) -> Console:
    """A rich console that wraps at the terminal's width, and not at all when piped."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else PIPED_WIDTH
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


def print_json(value: Any) -> None:
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def fail(prog: str, message: str, code: int = 1) -> typer.Exit:
    """Print ``prog: message`` on stderr; ``raise fail(...)`` ends the command with ``code``."""
    print(f"{prog}: {message}", file=sys.stderr)
    return typer.Exit(code)


# --- the API's address and token ---------------------------------------------------------------


# The token and data-dir rules are the client's (lanes_client.tokens), imported when used: the
# client package loads httpx, which `lanes --help` does not need.
def data_dir() -> Path:
    """``LANES_DATA_DIR`` or ``./.lanes``."""
    from lanes_client.tokens import data_dir as client_data_dir

    return client_data_dir()


@dataclass(frozen=True)
class Api:
    """``--url``/``--token``/``--json`` of an API command. Without ``--token`` the client finds
    the token as the CLI documents it (lanes_client.tokens), and a 401 says where it looked."""

    url: str | None
    token: str | None
    json: bool = False

    def client(self) -> AsyncLanesClient:
        from lanes_client import AsyncLanesClient

        return AsyncLanesClient(self.url, self.token)


def api(url: str | None, token: str | None, as_json: bool = False) -> Api:
    return Api(url, token or None, as_json)


UrlOption = Annotated[str | None, typer.Option("--url", help=f"API address [default: $LANES_API_URL or {DEFAULT_API_URL}]",
                                               show_default=False)]
TokenOption = Annotated[str | None, typer.Option(
    "--token", help="bearer token [default: $LANES_API_TOKEN, else <LANES_DATA_DIR or ./.lanes>/api-token]",
    show_default=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON on stdout")]
QuietOption = Annotated[bool, typer.Option("-q", "--quiet", help="print only what a script needs")]


async def _await(command: Callable[[], Awaitable[int | None]]) -> int | None:
    return await command()


def run_api(prog: str, api_: Api, command: Callable[[], Awaitable[int | None]]) -> None:
    """Run an API command; its errors become one line on stderr and an exit code."""
    from lanes_client import LanesAPIError, LanesError, TaskStillRunning

    try:
        code: int = asyncio.run(_await(command)) or 0
    except Usage as exc:
        raise fail(prog, str(exc), EXIT_USAGE) from None
    except TaskStillRunning as exc:  # the API answered all along: not "unreachable"
        raise fail(prog, f"{exc}; it is still running (see 'lanes session show {exc.session_id}')",
                   EXIT_STILL_RUNNING) from None
    except LanesAPIError as exc:
        print(f"{prog}: HTTP {exc.status} ({exc.code}): {exc.message}", file=sys.stderr)
        raise typer.Exit(EXIT_API) from None
    except LanesError as exc:  # no connection, or no answer in time (after the client's retries)
        raise fail(prog, f"{exc} ('lanes dev' starts a local API)", EXIT_UNREACHABLE) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if code:
        raise typer.Exit(code)

"""Where a client's bearer token comes from, as the ``lanes`` CLI finds it: the token given,
else ``$LANES_API_TOKEN``, else the file the API writes its token to when it makes one
(``<LANES_DATA_DIR or ./.lanes>/api-token``: what ``make run`` and ``lanes dev`` use)."""

from __future__ import annotations

import os
from pathlib import Path

TOKEN_FILE = "api-token"  # worker.api.main.TOKEN_FILE


def data_dir() -> Path:
    """``LANES_DATA_DIR`` or ``./.lanes`` (as worker.settings resolves it, without pydantic)."""
    configured = os.environ.get("LANES_DATA_DIR", "").strip()
    path = Path(configured).expanduser() if configured else Path(".lanes")
    return path if path.is_absolute() else Path.cwd() / path


def token_path() -> Path:
    return data_dir() / TOKEN_FILE


def resolve_token(token: str | None, given_as: str = "the token given (--token or the client's token)") -> tuple[
        str | None, str]:
    """(token, where it came from); where, also when none was found, for a 401's message."""
    if token:
        return token, given_as
    if os.environ.get("LANES_API_TOKEN"):
        return os.environ["LANES_API_TOKEN"], "$LANES_API_TOKEN"
    path = token_path()
    try:
        found = path.read_text(encoding="utf-8").strip() or None
    except OSError:
        found = None
    return found, f"the token file {path}" if found else f"no token: the token file {path} does not exist"


def token_hint(source: str) -> str:
    """What a 401 says about the token sent."""
    return (f"({source}; the API writes its token to <LANES_DATA_DIR or ./.lanes>/{TOKEN_FILE}: set "
            "LANES_DATA_DIR to the folder the API uses, or LANES_API_TOKEN, or pass a token)")

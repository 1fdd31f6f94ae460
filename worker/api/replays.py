"""What a replay session may point the worker at, when the server allows replays at all.

A replay names a recording on the worker's disk and the model server that replays it. A
tenant must not learn which files exist on the host nor send the worker's model calls
anywhere: the recording must lie under one of the server's replay folders (``LANES_REPLAY_ROOTS``)
and the model URL must match the allow-list (``LANES_REPLAY_MODEL_URLS``; by default the
loopback interface only, where ``lanes dev --replay`` and the tests run it).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from lanes_client.schemas import ReplayIn
from worker.api.errors import ApiError
from worker.settings import Settings

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def check_replay(replay: ReplayIn, settings: Settings) -> None:
    """Refuse (400) a recording outside the replay folder or a model URL off the allow-list."""
    roots = [root.resolve() for root in settings.replay_roots]
    for spec in (replay, *replay.subagents):
        path = Path(spec.trajectory_path)
        # relative paths name a recording of the first folder; symlinks are followed before the check
        resolved = path.resolve() if path.is_absolute() else (roots[0] / path).resolve() if roots else path
        # the same answer whether or not the path exists: nothing is revealed about the host
        if not any(root in resolved.parents for root in roots) or not resolved.is_file():
            raise ApiError(400, "rejected", "replay trajectory_path must name a recording under one of the "
                                            "server's replay folders (LANES_REPLAY_ROOTS)")
        if not model_url_allowed(spec.model_base_url, settings.replay_model_urls):
            raise ApiError(400, "rejected", "replay model_base_url is not on the server's allow-list "
                                            "(LANES_REPLAY_MODEL_URLS; by default loopback addresses only)")


def model_url_allowed(url: str, allowed_prefixes: list[str]) -> bool:
    if allowed_prefixes:
        return any(url.startswith(prefix) for prefix in allowed_prefixes)
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and parts.hostname in LOOPBACK_HOSTS

#!/usr/bin/env python3
"""Container health check of the Context Lanes image (installed as ``lanes-healthcheck``).

    lanes-healthcheck api       GET http://127.0.0.1:$LANES_API_PORT/healthz must answer 2xx
    lanes-healthcheck worker    a TCP connection to $TEMPORAL_ADDRESS must open
    lanes-healthcheck           the role of the container's main command (PID 1's
                                command line: `... worker` or `... api`); anything
                                else (a one-off `sh`, `temporal ...`) is healthy

Exit 0 when healthy, 1 when not (one line on stderr says why). Standard library only,
a few milliseconds of CPU, a 3-second timeout (inside Docker's/Kubernetes' own).

The worker check is deliberately shallow: it proves the worker's Temporal frontend is
reachable from the container, not that this process is polling. Use it for readiness
and for Docker's status; do not restart workers on it (a Temporal outage would restart
every worker at once while they would reconnect by themselves).
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.error
import urllib.request

ROLES = ("api", "worker")
TIMEOUT_SECONDS = 3.0


def detect_role(cmdline_path: str = "/proc/1/cmdline") -> str | None:
    """``api`` or ``worker`` if PID 1 runs ``lanes api``/``lanes worker`` (through tini
    and lanes-entrypoint or not), else None."""
    try:
        with open(cmdline_path, "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None
    names = [os.path.basename(a) for a in argv]
    # the first argument after a launcher we know that is not an option
    launchers = {"tini", "--", "lanes-entrypoint", "lanes", "python", "python3", "-m", "worker.cli"}
    for name in names:
        if name in launchers or name.startswith("-") or name.startswith("python"):
            continue
        return name if name in ROLES else None
    return "worker" if names else None  # the image's default command


def temporal_target(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"TEMPORAL_ADDRESS {address!r} is not host:port")
    return host.strip("[]") or "127.0.0.1", int(port)


def check_worker(timeout: float) -> str | None:
    address = os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233")
    try:
        host, port = temporal_target(address)
        socket.create_connection((host, port), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        return f"Temporal at {address} is not reachable: {exc}"
    return None


def check_api(timeout: float) -> str | None:
    port = os.environ.get("LANES_API_PORT", "8000")
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            if 200 <= resp.status < 300:
                return None
            return f"{url} answered {resp.status}"
    except (OSError, urllib.error.URLError) as exc:
        return f"{url} failed: {exc}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    timeout = TIMEOUT_SECONDS
    role = argv[0] if argv else detect_role()
    if role is None:
        return 0
    if role not in ROLES:
        print(f"lanes-healthcheck: unknown role {role!r} (expected one of {', '.join(ROLES)})", file=sys.stderr)
        return 1
    problem = check_api(timeout) if role == "api" else check_worker(timeout)
    if problem:
        print(f"lanes-healthcheck: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``lanes``: the command line of Context Lanes (one typer application).

Each command lives in a module of this package (one per group); heavy imports (the Temporal
client, the engine, matplotlib) happen inside the commands, so that ``--help`` and
``--version`` start nothing and stay fast. ``run(argv)`` returns the exit code;
``main()`` is the console script and exits hard (DESIGN §4: processes that used the
Temporal client exit with ``os._exit``).
"""

from __future__ import annotations

import os
import sys

# command -> (the module doing the work, one line of help); deploy tests read it
COMMANDS = {
    "dev": ("worker.local.dev", "start the local stack: Temporal, PostgreSQL, a worker, the API (--replay: a session to watch)"),
    "worker": ("worker.worker", "run one worker (Temporal + PostgreSQL from the environment)"),
    "demo": ("worker.local.demo", "replay a recorded session through the real stack, offline (--ui: keep it to inspect)"),
    "replay": ("worker.replay.command", "replay trajectories offline under context policies (--csv, --plot)"),
    "api": ("worker.api.main", "serve the HTTP API (sessions, external-agent mode, inspector at /ui)"),
    "session": ("worker.cli.sessions", "sessions through the API: new | list | show | cancel"),
    "send": ("worker.cli.messages", "send a user message to a hosted session (--wait for the answer)"),
    "chat": ("worker.cli.messages", "talk to a hosted session interactively, watching its events"),
    "context": ("worker.cli.inspection", "a session's working set: items and a budget bar (--all: every stored item)"),
    "events": ("worker.cli.inspection", "a session's event log (--follow streams it)"),
    "recall": ("worker.cli.inspection", "exact text of an observation://obs-... address"),
    "subagents": ("worker.cli.subagents", "a session's subagent lanes: list, --spawn, --lane context"),
    "capability": ("worker.cli.context", "capability context: add a tool schema or skill (step or task scope)"),
    "pin": ("worker.cli.context", "pin a note in a session (budget-checked)"),
}


def run(argv: list[str] | None = None) -> int:
    """Run ``lanes ARGV``; the exit code (usage errors 2, as click reports them)."""
    from worker.cli.app import build

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["help"]:
        argv = ["--help"]
    try:
        build()(args=argv, prog_name="lanes")
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def main(argv: list[str] | None = None) -> None:
    code = run(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

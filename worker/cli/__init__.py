"""``lanes``: the command line of Context Lanes.

Each subcommand is ``module`` (its ``main``) or ``module:function``, imported only when
used, so that ``lanes replay`` never pays for the Temporal client and ``lanes worker``
never for rich.
"""

from __future__ import annotations

import importlib
import os
import sys

COMMANDS = {
    "dev": ("worker.local.dev", "start the local stack: Temporal dev server, PostgreSQL, a worker"),
    "worker": ("worker.worker", "run one worker (Temporal + PostgreSQL from the environment)"),
    "demo": ("worker.local.demo", "replay a recorded session through the real stack, offline"),
    "replay": ("worker.replay.command", "replay trajectories offline under context policies"),
    "api": ("worker.api.main", "serve the HTTP API (sessions, external-agent mode, inspector at /ui)"),
    "session": ("worker.cli.sessions:session_main", "sessions through the API: new | list | show | cancel"),
    "send": ("worker.cli.sessions:send_main", "send a user message to a hosted session (--wait for the answer)"),
    "chat": ("worker.cli.sessions:chat_main", "talk to a hosted session interactively, watching its events"),
    "context": ("worker.cli.sessions:context_main", "a session's working set: items and a budget bar"),
    "events": ("worker.cli.sessions:events_main", "a session's event log (--follow streams it)"),
    "recall": ("worker.cli.sessions:recall_main", "exact text of an observation://obs-... address"),
    "subagents": ("worker.cli.subagents:subagents_main", "a session's subagent lanes: list, --spawn, --lane context"),
}


def usage() -> str:
    lines = ["usage: lanes COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<9} {help_text}" for name, (_, help_text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        sys.exit(0 if argv else 2)
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"lanes: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        sys.exit(2)
    module_name, _, function = COMMANDS[name][0].partition(":")
    module = importlib.import_module(module_name)
    if name == "worker":
        module.main()  # exits through os._exit
    code = getattr(module, function or "main")(rest)
    sys.stdout.flush()
    sys.stderr.flush()
    # Processes that used the Temporal client exit hard (DESIGN §4).
    os._exit(code or 0)

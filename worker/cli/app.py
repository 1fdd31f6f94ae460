"""The ``lanes`` typer application: global options and every command, each from its module."""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Annotated, Any

import typer

from worker.cli import COMMANDS, context, inspection, local, messages, replay, sessions, subagents

CONTEXT = {"help_option_names": ["-h", "--help"]}


def version() -> str:
    try:
        return metadata.version("context-lanes")
    except metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
        return "unknown"


def _version(value: bool) -> None:
    if value:
        print(f"lanes {version()}")
        raise typer.Exit(0)


def _root(
    show_version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_version,
                                               help="print the version and exit")] = False,
) -> None:
    """Context Lanes: a durable context engine for long-running LLM agents.

    Try it: lanes demo --ui, or lanes dev --replay, then open the inspector address it prints.
    """


def build() -> typer.Typer:
    app = typer.Typer(name="lanes", context_settings=CONTEXT, no_args_is_help=True, add_completion=False,
                      pretty_exceptions_enable=False, rich_markup_mode=None)
    app.callback()(_root)
    commands: dict[str, Callable[..., Any]] = {
        "dev": local.dev, "worker": local.worker, "demo": local.demo, "replay": replay.replay, "api": local.api,
        "send": messages.send, "chat": messages.chat, "context": inspection.context, "events": inspection.events,
        "recall": inspection.recall, "subagents": subagents.subagents, "pin": context.pin,
    }
    for name, (_, short) in COMMANDS.items():
        if name in ("session", "capability"):
            group = sessions.app if name == "session" else context.app
            app.add_typer(group, name=name, help=short.capitalize() + ".", short_help=short, context_settings=CONTEXT)
        else:
            app.command(name, short_help=short, context_settings=CONTEXT)(commands[name])
    return app

"""Scripted recordings for subagent tests: a parent that delegates, and its children.

Written as normalised trajectory files so the replay model server and the replay tool
executor serve them exactly like recorded sessions.
"""

from __future__ import annotations

import json
from pathlib import Path

from recordings import ToolResultRec, Trajectory, Turn, dump_trajectory, load_trajectory
from worker.replay.model_server import ReplayModelServer
from workflows.context import ToolCall
from workflows.contract.session import ReplaySpec, SessionConfig, SubagentSettings

TOOLS = ["bash", "recall_observation", "begin_episode", "end_episode"]


def _call(call_id: str, name: str, **arguments) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def _bash(call_id: str, command: str, output: str) -> tuple[ToolCall, ToolResultRec]:
    call = _call(call_id, "bash", command=command)
    return call, ToolResultRec(tool_call_id=call_id, tool_name="bash", output=output, exit_code=0, render_role="tool")


def parent_trajectory(briefs: list[str], extra_spawn_arguments: list[dict] | None = None) -> Trajectory:
    """Turn 0 spawns one subagent per brief (plus any extra, e.g. invalid, spawn calls),
    turn 1 runs a command, turn 2 answers."""
    spawns = [_call(f"spawn-{n}", "spawn_subagent", brief=brief) for n, brief in enumerate(briefs)]
    spawns += [ToolCall(id=f"spawn-x{n}", name="spawn_subagent", arguments=json.dumps(args))
               for n, args in enumerate(extra_spawn_arguments or [])]
    check, checked = _bash("p-check", "git status --short", " M src/auth.py\n")
    return Trajectory(
        id="parent", source_format="synthetic", system="You are the lead engineer.", task="Fix the auth bug.",
        tool_protocol="tool_calls",
        turns=[
            Turn(assistant_text="Delegating the investigation.", tool_calls=spawns, results=[]),
            Turn(assistant_text="", tool_calls=[check], results=[checked]),
            Turn(assistant_text="All subagents reported; the fix is in src/auth.py.", tool_calls=[], results=[]),
        ],
    )


def child_trajectory(n: int, nested_spawn: bool = False, reads: int = 1) -> Trajectory:
    """Explore in an episode, read files, conclude, then hand off as JSON."""
    turns = [Turn(assistant_text="", tool_calls=[_call(f"c{n}-begin", "begin_episode", episode_id=f"inspect-{n}",
                                                       kind="exploration", goal=f"read module {n}")], results=[])]
    for r in range(reads):
        read, output = _bash(f"c{n}-read{r}", f"cat src/module_{n}_{r}.py", f"def handler_{n}():\n    return {n}\n" * 40)
        turns.append(Turn(assistant_text="", tool_calls=[read], results=[output]))
    turns += [
        Turn(assistant_text="", tool_calls=[_call(f"c{n}-end", "end_episode", episode_id=f"inspect-{n}",
                                                  conclusion=f"module {n} returns {n}")], results=[]),
    ]
    if nested_spawn:
        turns.append(Turn(assistant_text="", tool_calls=[_call(f"c{n}-nested", "spawn_subagent", brief="help")],
                          results=[]))
    handoff = {"status": "completed", "findings": [f"module {n} returns {n}"], "decisions": [],
               "changed_files": [], "verification": [f"read src/module_{n}.py"], "unresolved": [],
               "artifacts": [f"src/module_{n}.py"]}
    turns.append(Turn(assistant_text=json.dumps(handoff), tool_calls=[], results=[]))
    return Trajectory(id=f"child-{n}", source_format="synthetic", system=None, task=f"inspect module {n}",
                      tool_protocol="tool_calls", turns=turns)


def busy_parent(turns: int = 3) -> Trajectory:
    """A task of a few commands and an answer (no subagents of its own)."""
    steps = []
    for n in range(turns):
        call, result = _bash(f"b-{n}", f"ls src/{n}", f"module_{n}.py\n")
        steps.append(Turn(assistant_text="", tool_calls=[call], results=[result]))
    steps.append(Turn(assistant_text="Listed everything.", tool_calls=[], results=[]))
    return Trajectory(id="parent", source_format="synthetic", system="You are the lead engineer.",
                      task="List the sources.", tool_protocol="tool_calls", turns=steps)


def write_recordings(folder: Path, parent: Trajectory, children: list[Trajectory]) -> tuple[
        tuple[Trajectory, Path], list[tuple[Trajectory, Path]]]:
    """Dump and reload (ids come from the file names, as for recorded sessions)."""
    folder.mkdir(parents=True, exist_ok=True)

    def dumped(traj: Trajectory) -> tuple[Trajectory, Path]:
        path = dump_trajectory(traj, folder / f"{traj.id}.json")
        return load_trajectory(path), path

    return dumped(parent), [dumped(c) for c in children]


def session_config(session_id: str, parent: tuple[Trajectory, Path], children: list[tuple[Trajectory, Path]],
                   server: ReplayModelServer, *, config: dict | None = None, **subagents) -> SessionConfig:
    def spec(traj: Trajectory, path: Path, subs: list[ReplaySpec] | None = None) -> ReplaySpec:
        return ReplaySpec(trajectory_path=str(path.resolve()), trajectory_id=traj.id,
                          model_base_url=server.base_url, subagents=subs or [])

    return SessionConfig(
        session_id=session_id, model="replay", system_prompt=parent[0].system or "", tools=TOOLS,
        replay=spec(*parent, [spec(*c) for c in children]),
        subagents=SubagentSettings(enabled=True, **subagents), **(config or {}),
    )


def replay_field(traj: Trajectory, path: Path, server: ReplayModelServer, subagents: list[dict] | None = None) -> dict:
    """The ``replay`` field of POST /v1/sessions for a recording (and its subagents' ones)."""
    return {"trajectory_path": str(path), "trajectory_id": traj.id, "model_base_url": server.base_url,
            "subagents": list(subagents or [])}

"""Shared pieces of the offline replay tests: a naive prompt builder and tiny trajectories."""

from __future__ import annotations

from pathlib import Path

import pytest

from recordings import DEFAULT_TRAJECTORY_ROOT, FORMAT_SYNTHETIC, ToolResultRec, Trajectory, Turn, trajectory_files
from workflows.context import ToolCall

ROOT = DEFAULT_TRAJECTORY_ROOT
FOLDERS = ("claude-code", "mini-swe-agent-deepseek", "mini-swe-agent-gemini")


def require_data() -> None:
    if not ROOT.is_dir():
        pytest.skip(f"trajectory data not found at {ROOT} (set LANES_TRAJECTORY_ROOT)")


def sample_files(per_folder: int = 2) -> list[str]:
    """A fixed rule, not a hand pick: per folder the first ``per_folder`` files in sorted
    order plus the largest file (the longest session)."""
    if not ROOT.is_dir():
        return []
    out: list[str] = []
    for folder in FOLDERS:
        files = [f for f, _ in trajectory_files([ROOT / folder])]
        chosen = files[:per_folder] + [max(files, key=lambda f: f.stat().st_size)]
        out += [str(f) for f in dict.fromkeys(chosen)]
    return out


def sample_params(per_folder: int = 2) -> list:
    """:func:`sample_files` as pytest parameters named by their path under the data root."""
    return [pytest.param(f, id=Path(f).relative_to(ROOT).as_posix()) for f in sample_files(per_folder)]


def naive_prompt(traj: Trajectory, k: int, observations: list[int] | None = None) -> list[dict]:
    """Everything the agent saw before recorded answer ``k``, as chat messages, verbatim.

    ``observations``, when given, receives the indices of the tool-output messages.
    """
    messages: list[dict] = []
    observations = [] if observations is None else observations
    if traj.system:
        messages.append({"role": "system", "content": traj.system})
    messages.append({"role": "user", "content": traj.task})
    for turn in traj.turns[:k]:
        if traj.tool_protocol == "tool_calls" and turn.tool_calls:
            calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                     for c in turn.tool_calls]
            messages.append({"role": "assistant", "content": turn.assistant_text or None, "tool_calls": calls})
        elif turn.assistant_text:
            messages.append({"role": "assistant", "content": turn.assistant_text})
        for result in turn.results:
            observations.append(len(messages))
            if result.render_role == "tool":
                messages.append({"role": "tool", "tool_call_id": result.tool_call_id, "content": result.output})
            else:
                messages.append({"role": "user", "content": result.output})
        messages += [{"role": "user", "content": text} for text in turn.user_after]
    return messages


def tiny_trajectory(system: str, turns: int = 4, output: str = "ok", protocol: str = "tool_calls") -> Trajectory:
    """``turns`` answers, each one bash call with a distinct small output, the last a final answer."""
    out: list[Turn] = []
    for j in range(turns - 1):
        cid = f"call-{j}"
        call = ToolCall(id=cid, name="bash", arguments=f'{{"command": "cat file{j}.txt"}}')
        role = "tool" if protocol == "tool_calls" else "user"
        out.append(Turn(assistant_text=f"Reading file {j}.", tool_calls=[call],
                        results=[ToolResultRec(tool_call_id=cid, tool_name="bash", output=f"{output} {j}",
                                               exit_code=0, render_role=role)]))
    out.append(Turn(assistant_text="Done.", tool_calls=[], results=[]))
    return Trajectory(id="tiny", source_format=FORMAT_SYNTHETIC, system=system, task="Read the files.",
                      turns=out, tool_protocol=protocol)

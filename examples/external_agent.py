"""An OpenAI-style agent whose loop runs here while Context Lanes keeps its context.

The whole integration is the loop in ``run_agent``: one call per step hands the API what
happened and gets the next request back (compacted when the working set needs it, the exact
messages rendered from PostgreSQL); send that to the model, run the tools, repeat. The agent
keeps its own world: its system prompt and tool definitions are declared once, at creation.

    export LANES_API_URL=http://127.0.0.1:8000 LANES_API_TOKEN=...      # lanes api
    export OPENAI_BASE_URL=... OPENAI_API_KEY=... LANES_MODEL=gpt-4o-mini
    python examples/external_agent.py --workdir ./project "Make the failing test pass"

The tools (read_file, write_file, list_files, bash, recall_observation) run in --workdir;
they are deliberately small: this is an example, not a sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from lanes_client import AsyncLanesClient, assistant_item, tool_result_item, user_item

OUTPUT_LIMIT = 200_000  # characters of one tool output; larger output is cut (the API stores it exactly)
SYSTEM_PROMPT = ("You are a careful coding agent working in a project directory. Use the tools; when the task "
                 "is done, answer without calling a tool.")


def _tool(name: str, description: str, **properties: str) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()},
                       "required": [k for k in properties if k not in ("offset", "limit")]}}}


TOOLS = [
    _tool("read_file", "Read a text file of the project.", path="string"),
    _tool("write_file", "Create or replace a text file of the project.", path="string", content="string"),
    _tool("list_files", "List the files under a directory of the project.", path="string"),
    _tool("bash", "Run a shell command in the project directory.", command="string"),
    # declared, so Lanes' placeholders of compacted output tell the model to call it
    _tool("recall_observation", "Read an exact range of an earlier, compacted tool output.",
          address="string", offset="integer", limit="integer"),
]


async def run_agent(task: str, lanes: AsyncLanesClient, model: openai.AsyncOpenAI, *, model_name: str,
                    workdir: Path, budget_tokens: int | None = None, max_turns: int = 50) -> tuple[str, str]:
    """Run ``task`` to its final answer; returns (session id, answer)."""
    session = await lanes.create_session(mode="external", model=model_name, budget_tokens=budget_tokens,
                                         system_prompt=SYSTEM_PROMPT, tool_definitions=TOOLS)
    sid = session.session_id
    happened = [user_item(task)]
    for turn in range(max_turns):
        # one round trip: store what happened since the last request, get the next one
        # (the step id makes a retried call safe: the items are stored once)
        request = (await lanes.step(sid, happened, step_id=f"turn-{turn}")).request
        reply = await model.chat.completions.create(model=request.model, messages=cast(Any, request.messages),
                                                    tools=cast(Any, request.tools))
        message = reply.choices[0].message
        calls = [c for c in message.tool_calls or () if c.type == "function"]
        results = [tool_result_item(call.id, call.function.name,
                                    *await run_tool(call.function.name, call.function.arguments, workdir, lanes, sid))
                   for call in calls]
        happened = [assistant_item(message), *results]
        if not message.tool_calls:
            await lanes.append_items(sid, happened)  # the answer belongs to the history too
            return sid, message.content or ""
    return sid, f"(stopped after {max_turns} turns)"


async def run_tool(name: str, arguments: str, workdir: Path, lanes: AsyncLanesClient, sid: str) -> tuple[str, int]:
    """(output, exit code) of one tool call; a failure is an answer for the model, not an exception."""
    try:
        args = json.loads(arguments or "{}")
        if name == "recall_observation":
            piece = await lanes.read_observation(sid, args["address"], offset=args.get("offset"),
                                                 limit=args.get("limit"))
            return piece.text, 0
        if name == "bash":
            done = await asyncio.to_thread(subprocess.run, args["command"], shell=True, cwd=workdir,
                                           capture_output=True, text=True, timeout=120)
            return (done.stdout + done.stderr)[:OUTPUT_LIMIT], done.returncode
        path = (workdir / args.get("path", ".")).resolve()
        if not path.is_relative_to(workdir.resolve()):
            return f"{name}: {args.get('path')!r} is outside the workspace", 2
        if name == "read_file":
            return path.read_text(encoding="utf-8", errors="replace")[:OUTPUT_LIMIT], 0
        if name == "write_file":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(args["content"], encoding="utf-8")
            return f"wrote {len(args['content'])} characters to {args['path']}", 0
        if name == "list_files":
            return "\n".join(sorted(str(p.relative_to(workdir)) for p in path.rglob("*") if p.is_file())), 0
        return f"unknown tool {name!r}", 2
    except Exception as exc:  # bad arguments, missing file, timeout...
        return f"{name} error: {type(exc).__name__}: {exc}", 1


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task")
    parser.add_argument("--workdir", default=".", type=Path)
    parser.add_argument("--model", default=os.environ.get("LANES_MODEL", "gpt-4o-mini"))
    parser.add_argument("--budget", type=int, default=None, help="working-set budget in tokens")
    args = parser.parse_args(argv)
    model = openai.AsyncOpenAI()  # OPENAI_BASE_URL / OPENAI_API_KEY
    async with AsyncLanesClient() as lanes:  # LANES_API_URL / LANES_API_TOKEN
        sid, answer = await run_agent(args.task, lanes, model, model_name=args.model, workdir=args.workdir,
                                      budget_tokens=args.budget)
    print(f"session {sid}\n{answer}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

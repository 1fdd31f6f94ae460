"""The hand-written durable agent that Context Lanes is compared with (``durable_compare.py``).

What a careful engineer writes first when asked for a durable agent on Temporal, and nothing
more: one workflow per session holding the full chat history in workflow state, one activity
per model call (the whole history sent every turn, as a naive agent does) and one per tool
call, retried like Context Lanes' model and tool activities (timeouts, backoff). It
replays a recording exactly as a hosted Context Lanes replay session does: the same replay
model server (headers ``X-Lanes-Trajectory`` / ``X-Lanes-Turn``), the same recorded tool
outputs (``activities.replay``) and the same user text recorded after a turn.

No PostgreSQL, no context management, no token counting: the history grows with every turn
(Temporal's history holds every message it sends and receives, many times over).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import openai

    from activities.replay import follow_ups, recorded_output

BASELINE_WORKFLOW = "DurableBaselineAgent"
RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=60))


class BaselineInput(BaseModel):
    trajectory_path: str
    trajectory_id: str
    model_base_url: str
    system_prompt: str
    task: str
    max_turns: int = 400


class ModelCall(BaseModel):
    base_url: str
    trajectory_path: str
    trajectory_id: str
    turn: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


class ModelAnswer(BaseModel):
    message: dict[str, Any]
    follow_ups: list[str]


class ToolCall(BaseModel):
    trajectory_path: str
    call_id: str


class BaselineResult(BaseModel):
    turns: int
    messages: int


# The one tool the recorded mini-swe-agent sessions use (what the hosted replay sends too).
BASH_TOOL = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command in the workspace.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


@functools.lru_cache(maxsize=4)
def _client(base_url: str) -> openai.AsyncOpenAI:  # one connection pool per endpoint, as any agent keeps
    return openai.AsyncOpenAI(base_url=base_url, api_key="replay", max_retries=0, timeout=300)


@activity.defn(name="baseline_call_model")
async def call_model(call: ModelCall) -> ModelAnswer:
    response = await _client(call.base_url).chat.completions.create(
        model="replay", messages=call.messages,  # type: ignore[arg-type]
        tools=call.tools or openai.omit,  # type: ignore[arg-type]
        extra_headers={"X-Lanes-Trajectory": call.trajectory_id, "X-Lanes-Turn": str(call.turn)})
    message = response.choices[0].message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})
    message.setdefault("content", None)
    return ModelAnswer(message=message, follow_ups=follow_ups(call.trajectory_path, call.turn))


@activity.defn(name="baseline_run_tool")
async def run_tool(call: ToolCall) -> str:
    record = recorded_output(call.trajectory_path, call.call_id)
    return record.output if record is not None else f"replay: no output for tool call {call.call_id}"


@workflow.defn(name=BASELINE_WORKFLOW)
class DurableBaselineAgent:
    @workflow.run
    async def run(self, inp: BaselineInput) -> BaselineResult:
        messages: list[dict[str, Any]] = [{"role": "system", "content": inp.system_prompt},
                                          {"role": "user", "content": inp.task}]
        turn = 0
        while turn < inp.max_turns:
            answer = await workflow.execute_activity(
                call_model, ModelCall(base_url=inp.model_base_url, trajectory_path=inp.trajectory_path,
                                      trajectory_id=inp.trajectory_id, turn=turn, messages=messages,
                                      tools=[BASH_TOOL]),
                start_to_close_timeout=timedelta(seconds=300),
                retry_policy=RETRY)
            messages.append(answer.message)
            calls = answer.message.get("tool_calls") or []
            for tool_call in calls:
                output = await workflow.execute_activity(
                    run_tool, ToolCall(trajectory_path=inp.trajectory_path, call_id=tool_call["id"]),
                    start_to_close_timeout=timedelta(seconds=300), retry_policy=RETRY)
                messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": output})
            messages.extend({"role": "user", "content": text} for text in answer.follow_ups)
            turn += 1
            if not calls and not answer.follow_ups:
                break
        return BaselineResult(turns=turn, messages=len(messages))


ACTIVITIES: list[Callable[..., Any]] = [call_model, run_tool]

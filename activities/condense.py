"""Bounded LLM condensation (automatic compaction with ``llm_condensation`` on).

The workflow asks ``workflows.context.condense.condensation_source`` what to condense and
calls :func:`condense_with_llm`. This activity

1. loads the source prefix, the anchors and the live memory from PostgreSQL and renders
   them as one compact transcript (every item at the COMPACT projection, so a large tool
   output or argument costs at most ``preview_chars`` characters and keeps its
   ``observation://`` address);
2. measures the request with tiktoken and returns ``oversized`` without any model call
   unless request + ``reserve_tokens`` fit ``condenser_window``;
3. asks the condenser model, with no tools, for the memory JSON and validates it with the
   schema of the explicit ``condense_context`` tool (``parse_memory`` + ``validate_memory``
   with the measured token count); invalid output is retried once with the errors fed
   back, invalid twice is ``invalid``.

It never writes to PostgreSQL: the workflow decides whether the memory is still current
(``plan_condense(mode="llm", expected_generation=...)``) and stores it itself. So a retry
of this activity is harmless, and a discarded result leaves no trace but metrics.

Provider errors follow DESIGN §4: SDK retries off; timeouts, connection errors, 408/409/429
and 5xx raise a retryable ``ApplicationError`` (``next_retry_delay`` from ``Retry-After``),
other 4xx raise a non-retryable ``CondenserRejected``. The workflow gives this activity a
small ``maximum_attempts`` and treats a final failure as ``failed`` (deterministic fallback).
"""

from __future__ import annotations

import re
import time
from datetime import timedelta
from typing import Any, cast

import openai
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import metrics
from activities.heartbeat import heartbeating
from activities.items import load_items
from activities.provider import RETRYABLE_STATUS, ModelClients, is_context_overflow, retry_after_seconds
from activities.runtime import ActivityGroup, ActivitySettings, Runtime, StoreSource
from activities.tokens import count_message_tokens, count_text_message_tokens, count_tokens
from workflows.context import (
    ENTRY_CHARS,
    SECTION_ENTRIES,
    SECTIONS,
    CallUsage,
    Item,
    ItemContent,
    MemoryDoc,
    ModelPrice,
    Projection,
    cost_units,
    is_tool_output,
    item_message,
    memory_text,
    normalized,
    observation_address,
    parse_memory,
    price_for,
    sanitized,
    validate_memory,
)
from workflows.contract.condense import CondensationInput, CondensationOutcome
from workflows.contract.failures import (
    CONDENSATION_INPUT_ERROR,
    CONDENSER_RATE_LIMITED,
    CONDENSER_REJECTED,
    CONDENSER_TIMEOUT,
    CONDENSER_UNAVAILABLE,
    CONTEXT_LENGTH_EXCEEDED,
)

MAX_ANCHORS = 12  # DESIGN §7
MAX_ATTEMPTS = 2  # one retry on invalid output (spec)
_ECHO_CHARS = 4000  # previous invalid answer fed back on the retry, at most
_ADDRESS = re.compile(r"observation://(obs-[A-Za-z0-9][A-Za-z0-9_.-]*)")
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL | re.IGNORECASE)


MEMORY_SHAPE = "{" + ", ".join(f'"{field}": [...]' for field, _ in SECTIONS) + "}"  # the engine's memory JSON
SYSTEM_PROMPT = """You condense the earlier history of a software agent's session into its long-term memory.
You have no tools. Answer with ONLY one JSON object, no prose and no code fence, of exactly this shape:
{shape}
Every field is a list of short strings (at most {entries} per field, {entry_chars} characters each); no other
fields are allowed.
- completed_work: what was done and verified, with results.
- strategies_and_outcomes: approaches tried and whether they worked (include failures, so they are not repeated).
- environment_changes: files created/edited/deleted, commands with lasting effects, installed packages.
- constraints: rules and decisions the user or the environment imposed that still apply.
- open_questions: what is unresolved or still to do.
- references: ONLY observation addresses listed under "Allowed observation addresses" (exactly as written,
  e.g. "observation://obs-..."), or workspace-relative file paths (no absolute paths, no "..", no URLs).
If an existing long-term memory is given, merge it: keep what is still true, update what changed.
The history after this memory is dropped from the agent's context (its exact tool output stays recallable
through the references), so keep every fact the agent still needs. Be concise: the memory must stay under
{max_tokens} tokens (about {max_chars} characters)."""


# --- rendering ------------------------------------------------------------------------

def _header(item: Item, content: ItemContent) -> str:
    """``[#<seq> ...]``: the item's lane position, its tool, exit code and address."""
    if is_tool_output(item):
        tool = item.tool_name or content.tool_name or "tool"
        parts = [f"#{item.seq} tool result: {tool}"]
        if item.exit_code not in (None, 0):
            parts.append(f"exit code {item.exit_code}")
        if item.observation_id:
            parts.append(observation_address(item.observation_id))
        return "[" + " · ".join(parts) + "]"
    head = f"#{item.seq} {item.kind}" if item.kind == item.role else f"#{item.seq} {item.role} ({item.kind})"
    if item.observation_id:
        head += f" · {observation_address(item.observation_id)}"
    return f"[{head}]"


def render_entry(item: Item, content: ItemContent, preview_chars: int) -> str:
    """One item as transcript text, at the COMPACT projection (bounded; address kept)."""
    message = item_message(item, content, Projection.COMPACT, preview_chars) or {}
    lines = [_header(item, content)]
    if message.get("content"):
        lines.append(message["content"])
    for call in message.get("tool_calls") or ():
        fn = call["function"]
        lines.append(f"-> call {fn['name']}({fn['arguments']})")
    return "\n".join(lines)


def render_transcript(ids: list[str], items: dict[str, Item], contents: dict[str, ItemContent],
                      preview_chars: int) -> str:
    return "\n\n".join(render_entry(items[i], contents[i], preview_chars) for i in ids)


def build_messages(inp: CondensationInput, items: dict[str, Item], contents: dict[str, ItemContent],
                   anchors: list[str], source_text: str, allowed: list[str]) -> list[dict]:
    max_chars = inp.max_memory_tokens * 3
    sections = []
    if anchors:
        ordered = sorted(anchors, key=lambda i: items[i].seq)  # oldest first, as the agent saw them
        sections.append("## Standing user instructions and notes (they stay in the agent's context; "
                        "use them to judge what matters)\n\n"
                        + render_transcript(ordered, items, contents, inp.preview_chars))
    if inp.live_memory_item_id:
        sections.append("## Existing long-term memory (merge it)\n\n" + contents[inp.live_memory_item_id].text)
    sections.append("## Allowed observation addresses\n\n"
                    + ("\n".join(observation_address(o) for o in allowed) if allowed else "(none)"))
    sections.append("## History to condense (oldest first; long outputs are shown as head and tail)\n\n"
                    + source_text)
    sections.append("Return the memory JSON object now.")
    return [
        {"role": "system", "content": SYSTEM_PROMPT.format(shape=MEMORY_SHAPE, max_tokens=inp.max_memory_tokens,
                                                           max_chars=max_chars, entries=SECTION_ENTRIES,
                                                           entry_chars=ENTRY_CHARS)},
        {"role": "user", "content": "\n\n".join(sections)},
    ]


# --- validation -------------------------------------------------------------------------

def measure_memory(text: str, model: str | None = None) -> int:
    """Tokens of the memory item, counted as the workflow's ``measure_texts`` counts it."""
    return count_text_message_tokens(text, model)


def _unfenced(raw: str) -> str:
    match = _FENCE.match(raw)
    return match.group(1) if match else raw


def check_answer(raw: str | None, known: set[str], max_tokens: int, model: str | None = None,
                 memory_contract: bool = True) -> tuple[MemoryDoc | None, str, int, list[str]]:
    """(doc, text, tokens, errors): the same checks ``plan_condense`` makes."""
    if not raw or not raw.strip():
        return None, "", 0, ["the answer is empty; return the memory JSON object"]
    doc, errors = parse_memory(_unfenced(raw.strip()))
    if doc is None:
        return None, "", 0, errors
    if memory_contract:
        doc = normalized(doc)
    text = memory_text(doc)
    tokens = measure_memory(text, model)
    errors = validate_memory(doc, known, tokens, max_tokens, bounded=memory_contract)
    return (None if errors else doc), text, tokens, errors


def _feedback(errors: list[str], truncated: bool, max_tokens: int) -> str:
    lines = ["Your answer was rejected:"] + [f"- {e}" for e in errors]
    if truncated:
        lines.append("- the answer was cut off at the output limit; write less")
    lines.append(f"Return ONLY the corrected JSON object with the fields {', '.join(f for f, _ in SECTIONS)} "
                 f"(lists of strings), under {max_tokens} tokens.")
    return "\n".join(lines)


# --- provider errors ------------------------------------------------------------------

def map_condenser_error(error: openai.APIError, max_retry_delay: float) -> ApplicationError:
    """What Temporal should do about a provider error."""
    if isinstance(error, openai.APITimeoutError):
        return ApplicationError(f"condenser call timed out: {error}", type=CONDENSER_TIMEOUT)
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        if 400 <= status < 500 and status not in RETRYABLE_STATUS:
            return ApplicationError(f"condenser rejected the request (HTTP {status}): {error.message}",
                                    type=CONDENSER_REJECTED, non_retryable=True)
        retry_after = retry_after_seconds(error)
        if retry_after is not None and retry_after > max_retry_delay:
            return ApplicationError(
                f"condenser busy (HTTP {status}); Retry-After {retry_after:.0f}s exceeds {max_retry_delay:.0f}s, "
                "falling back instead of waiting", type=CONDENSER_RATE_LIMITED, non_retryable=True)
        return ApplicationError(
            f"condenser error HTTP {status}: {error.message}", type=f"CondenserHTTP{status}",
            next_retry_delay=None if retry_after is None else timedelta(seconds=retry_after))
    return ApplicationError(f"condenser call failed: {type(error).__name__}: {error}", type=CONDENSER_UNAVAILABLE)


# --- usage ------------------------------------------------------------------------------

def _spent(spent: CallUsage, reported: Any, estimate: int, price: ModelPrice | None, model: str) -> CallUsage:
    """``spent`` plus one call's provider-reported usage (OpenAI's shape), costed; the call's
    usage is counted in the metrics. A call without a prompt count leaves no calibration sample."""
    details = getattr(reported, "prompt_tokens_details", None)
    prompt, cached, completion, ok = sanitized(getattr(reported, "prompt_tokens", None),
                                               getattr(details, "cached_tokens", None),
                                               getattr(reported, "completion_tokens", None))
    call = CallUsage(prompt=prompt, cached=cached, completion=completion, estimate=estimate, reported=ok,
                     cost=cost_units(price, prompt, cached, completion))
    metrics.observe_usage("condenser", model, call)
    return CallUsage(prompt=spent.prompt + prompt, cached=spent.cached + cached,
                     completion=spent.completion + completion, calls=spent.calls + 1,
                     estimate=spent.estimate + estimate, reported=spent.reported and ok,
                     cost=spent.cost + call.cost)


# --- the activity -----------------------------------------------------------------------


async def _condense(inp: CondensationInput, runtime: Runtime, clients: ModelClients) -> CondensationOutcome:
    settings = runtime.settings
    model = inp.model or settings.condenser_model
    if inp.base_url:
        # replay: never send the real key to another endpoint
        base_url: str | None = inp.base_url
        api_key: str | None = "replay"
        if inp.base_url == settings.openai_base_url and settings.openai_api_key:
            api_key = settings.openai_api_key.get_secret_value()
    else:
        base_url = settings.openai_base_url
        api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        if not model or (base_url is None and api_key is None):
            return CondensationOutcome(status="unavailable", model=model or "", errors=[
                "no condenser configured (OPENAI_BASE_URL / OPENAI_API_KEY unset)"])
        api_key = api_key or "unused"
    if not inp.source_item_ids:
        raise ApplicationError("nothing to condense: source_item_ids is empty", type=CONDENSATION_INPUT_ERROR,
                               non_retryable=True)

    anchors = [a for a in dict.fromkeys(inp.anchor_item_ids[:MAX_ANCHORS]) if a not in inp.source_item_ids]
    wanted = list(dict.fromkeys([*inp.source_item_ids, *anchors,
                                 *([inp.live_memory_item_id] if inp.live_memory_item_id else [])]))
    try:
        items, contents = await load_items(runtime.store, inp.session_id, wanted)
    except LookupError as error:
        raise ApplicationError(str(error), type=CONDENSATION_INPUT_ERROR, non_retryable=True) from None

    known = set(inp.known_observation_ids)
    source_text = render_transcript(inp.source_item_ids, items, contents, inp.preview_chars)
    # addresses the condenser has seen: the source's and those the live memory already cites
    seen = [items[i].observation_id for i in inp.source_item_ids]
    if inp.live_memory_item_id:
        seen += [m.group(1) for m in _ADDRESS.finditer(contents[inp.live_memory_item_id].text)]
    allowed = [o for o in dict.fromkeys(seen) if o and o in known]
    messages = build_messages(inp, items, contents, anchors, source_text, allowed)
    source_tokens = count_tokens(source_text, model)
    request_tokens = sum(count_message_tokens(m, model) for m in messages)
    base: dict[str, Any] = {"model": model, "source_tokens": source_tokens, "request_tokens": request_tokens}
    if request_tokens + inp.reserve_tokens > inp.condenser_window:
        return CondensationOutcome(status="oversized", **base, errors=[
            f"request {request_tokens} tokens (source {source_tokens}) + reserve {inp.reserve_tokens} "
            f"exceed the condenser window {inp.condenser_window}"])

    client = clients.client(base_url, api_key, inp.timeout_seconds)
    errors: list[str] = []
    conversation = list(messages)
    price = price_for(inp.prices or settings.prices, model)
    spent = CallUsage(calls=0)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        used = sum(count_message_tokens(m, model) for m in conversation)
        max_output = max(1, min(inp.reserve_tokens, inp.condenser_window - used)) if inp.reserve_tokens else None
        call_start = time.monotonic()
        try:
            response = await client.chat.completions.create(
                model=model,
                messages=cast(list[Any], conversation),  # chat messages, as dicts
                max_tokens=max_output if max_output else openai.omit,
                response_format={"type": "json_object"} if inp.json_mode else openai.omit,
            )
        except openai.APIStatusError as error:
            if is_context_overflow(error):
                metrics.observe_model_call("condenser", time.monotonic() - call_start, CONTEXT_LENGTH_EXCEEDED)
                return CondensationOutcome(status="oversized", attempts=attempt, **base,
                                           errors=[*errors, f"provider: {error.message}"])
            mapped = map_condenser_error(error, inp.max_retry_delay_seconds)
            metrics.observe_model_call("condenser", time.monotonic() - call_start, mapped)
            raise mapped from None
        except openai.APIError as error:
            mapped = map_condenser_error(error, inp.max_retry_delay_seconds)
            metrics.observe_model_call("condenser", time.monotonic() - call_start, mapped)
            raise mapped from None
        except ValueError as error:  # a body that is not JSON at all
            metrics.observe_model_call("condenser", time.monotonic() - call_start, CONDENSER_UNAVAILABLE)
            raise ApplicationError(f"condenser answered garbage: {error}", type=CONDENSER_UNAVAILABLE) from None
        metrics.observe_model_call("condenser", time.monotonic() - call_start)
        spent = _spent(spent, getattr(response, "usage", None), used, price, model)
        base["usage"] = spent

        choices = getattr(response, "choices", None) or []
        message = choices[0].message if choices and getattr(choices[0], "message", None) is not None else None
        raw = message.content if message is not None else None
        truncated = bool(choices) and choices[0].finish_reason == "length"
        doc, text, tokens, problems = check_answer(raw, known, inp.max_memory_tokens, model, inp.memory_contract)
        if doc is not None:
            return CondensationOutcome(status="succeeded", memory=doc.model_dump(mode="json"), memory_text=text,
                                       memory_tokens=tokens, attempts=attempt, errors=errors, **base)
        errors.extend(f"attempt {attempt}: {p}" for p in problems)
        if attempt == MAX_ATTEMPTS:
            break
        feedback = {"role": "user", "content": _feedback(problems, truncated, inp.max_memory_tokens)}
        echo = {"role": "assistant", "content": (raw or "")[:_ECHO_CHARS]}
        conversation = [*messages, echo, feedback]
        if sum(count_message_tokens(m, model) for m in conversation) + inp.reserve_tokens > inp.condenser_window:
            conversation = [*messages, feedback]  # no room to show the rejected answer
    return CondensationOutcome(status="invalid", attempts=MAX_ATTEMPTS, errors=errors, **base)


class CondenseActivities(ActivityGroup):
    """Bounded condensation with the condenser model (settings.condenser_model unless asked otherwise)."""

    def __init__(self, settings: ActivitySettings, stores: StoreSource, clients: ModelClients) -> None:
        super().__init__(settings, stores)
        self.clients = clients

    @activity.defn
    async def condense_with_llm(self, inp: CondensationInput) -> CondensationOutcome:
        start = time.monotonic()
        try:
            async with heartbeating():  # from the start: PostgreSQL may be waited for first
                outcome = await _condense(inp, await self.runtime(), self.clients)
        except Exception as error:
            metrics.observe_condensation_error(error, time.monotonic() - start)
            raise
        outcome.latency_ms = int((time.monotonic() - start) * 1000)
        metrics.observe_condensation(outcome)
        return outcome

"""Engine configuration and the budget figures derived from it (DESIGN §7)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from .checkpoint import POOL_LINES
from .observations import RecallStyle

GeneratedRole = Literal["system", "developer", "user"]


PREVIEW_FLOOR_CHARS = 4_000


class EngineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    context_window: int = Field(gt=0)
    max_output_tokens: int = Field(ge=0)
    tool_definition_tokens: int = Field(default=0, ge=0)
    llm_condensation: bool = False
    trigger_ratio: float = Field(default=0.8, gt=0, le=1)
    target_ratio: float = Field(default=0.6, gt=0, le=1)
    # Without LLM condensation the fallback runs once the working set exceeds this share of
    # the budget (1: only over the budget) and aims at target_ratio of that share: a lower
    # share keeps requests smaller, so cheaper, while the budget stays the hard limit.
    compact_at_ratio: float = Field(default=1.0, gt=0, le=1)
    # Which rules the engine follows: 1 for runs recorded before the budget guarantee (the
    # workflows set it from a workflow.patched id), 2 since: requests planned to fit before a
    # provider call, items bounded by a share of the budget, the memory contract's bounds,
    # strict episodes, the spec's task-assembly, condensation and stable-segment rules.
    rules_version: int = Field(default=2, ge=1, le=2)
    # The most of the conversation budget one item may take in full (rules 2); a larger one
    # enters bounded (head and tail, or a source reference), its exact text recallable.
    max_item_share: float = Field(default=0.5, gt=0, le=1)
    # Once the fallback passes met the target, also reduce (pass 1 references, pass 2
    # archiving) what the compaction re-bills anyway: every request entry from its first
    # change on, which the prompt cache cannot serve (passes.sweep_rebilled, prefix.py).
    cache_aware_sweep: bool = True
    # The sweep's archiving is undone when it would make the request larger (a checkpoint
    # line can outweigh an already-referenced group).
    sweep_never_grows: bool = True
    # The episode markers also list explorations that ended with a conclusion and are not
    # archived yet, so a conclusion never leaves the request between the end of its task
    # (which omits the exploration's traffic) and the compaction that archives it.
    concluded_in_markers: bool = True
    # The sweep's archiving is also undone when it would change the episode markers (an
    # archived exploration leaves their concluded list) while the first change of the
    # request lies after them: it would move the cache boundary into the stable segment.
    sweep_keeps_markers: bool = True
    # An active episode is never archived, but it is bounded (the spec's fallback "keeps bounded
    # active episode goals"): once passes 1-2 leave the working set over the target, its oldest
    # completed outputs outside the protected groups become references (passes.reference_active_outputs).
    # Without it an exploration outgrowing the budget sent every request on the overflow ladder.
    bound_active_episodes: bool = True
    # Pinned content alone over the budget: the final fallback rolls even the recent user messages
    # pass 3 keeps verbatim into the rolling summary, oldest first, all but the current submission,
    # before a request is refused as unfit (passes.roll_kept_user_messages).
    roll_kept_when_unfit: bool = True
    # The last rung of the overflow ladder, when even it does not fit, shows the newest turn's
    # own tool outputs as references (largest first, only as many as it takes), each recallable
    # at its address: eight parallel file reads whose previews together outgrow an 8,000-token
    # budget are sent, not refused (request_plan.py).
    shrink_newest_group: bool = True
    # The first compaction of each task adds a short notice at the end of the history telling
    # the model what was compacted, its budget and how to read archived output back
    # (notice.py): an agent that cannot see its own budget is surprised by compaction.
    budget_notice: bool = False
    # Pass 3 also keeps the current task's first user message verbatim (its statement), besides
    # the newest three: a task that is a whole conversation (an agent whose tool outputs arrive
    # as user messages, through the gateway) would otherwise roll its own statement first.
    keep_task_statement: bool = False
    # The checkpoint also lists the paths and code symbols archived items mentioned
    # (Item.names), most recent first: what the archived turns worked on stays in view.
    checkpoint_names: int = Field(default=0, ge=0)  # how many (0: none)
    # The checkpoint's line for an archived tool output also shows the call that produced it
    # (Item.calls of its assistant turn: ``Read src/app.py → <the output's digest>``): the
    # model sees which address holds which file or command's output, and recalls that one.
    checkpoint_calls: bool = False
    # The checkpoint also shows this many lines of archived items verbatim (Item.lines), picked
    # for the names they carry that nothing still in the request shows, the names archived lines
    # repeat most weighing most: content the model can act on (a signature, a grep hit, an error)
    # where a list of names says only that a file existed (0: none).
    checkpoint_lines: int = Field(default=0, ge=0)
    # A checkpoint reference to an archived output whose call is known shows the call and the
    # output's size, not its first characters: the call says what it holds, and the digest's
    # room goes to more addresses and lines (mini-swe-agent's digests read "<returncode>0...").
    checkpoint_brief_references: bool = False
    # Key lines of archived items the checkpoint keeps to choose the shown ones from (most recent
    # first; bounded because workflow state holds metadata only).
    checkpoint_pool_lines: int = Field(default=POOL_LINES, ge=0)
    # Previews of large tool outputs also show the lines of the omitted part that name the most
    # paths and symbols the head and tail do not (preview.py), in the same characters: a later
    # action's names are in a file's middle as often as at its ends. Items record the layout they
    # were measured with (Item.preview_lines), so a session's older items keep theirs.
    preview_lines: bool = False
    preview_chars: int | None = Field(default=None, ge=16)  # None: derived from the budget
    preview_share: float = Field(default=0.5, gt=0, le=1)  # the derived preview: chars = share × budget
    protected_groups: int = Field(default=4, ge=1)
    summary_tokens: int = Field(default=400, ge=50)
    memory_max_tokens: int = Field(default=2000, ge=50)
    checkpoint_tokens: int = Field(default=1200, ge=100)  # cap of the generated checkpoint
    model_known: bool = True
    # The session's budget_tokens, when it has one: replaces the usable input window. Read
    # under its old name too, which checkpoints and recorded histories hold.
    budget_tokens: int | None = Field(default=None, gt=0,
                                      validation_alias=AliasChoices("budget_tokens", "budget_override"))
    # Provider tokens per token we count for this model, learned from provider usage
    # (workflows/context/usage.py): the conversation budget is planned on usable_input /
    # token_ratio, so that requests fit by the provider's count too. Never below 1.
    token_ratio: float = Field(default=1.0, ge=1.0, le=2.0)
    capability_margin: int = 512
    unknown_model_ceiling: int = 8000
    condensation_reserve: int = 4096  # room the LLM condenser needs besides its source
    # Prefix of the ids of generated items: a child lane stores them in its parent's session,
    # so its "memory-3" must not collide with the parent's.
    id_prefix: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]*$", max_length=64)
    # How placeholders and the checkpoint tell the model to read archived text back: "tool"
    # (recall_observation) or "endpoint" (the API, for an agent that lacks the tool).
    recall: RecallStyle = "tool"
    # Role of the texts the engine writes (checkpoint, memory, summary, episode markers).
    # "user" until sessions could choose; new sessions default to "system" (contract.py) so
    # that a checkpoint does not read as a turn of the user.
    generated_role: GeneratedRole = "user"

    @property
    def usable_input(self) -> int:
        """Input tokens a request may use: the window minus the reserved output (DESIGN §7)."""
        if self.budget_tokens is not None:
            return self.budget_tokens
        return self.context_window - min(self.max_output_tokens, self.context_window // 2)

    @property
    def base_budget(self) -> int:
        """Conversation budget before admitted capability context is charged."""
        return max(0, self.usable_input - self.tool_definition_tokens)

    @property
    def calibrated_base_budget(self) -> int:
        """:attr:`base_budget` with the usable input divided by :attr:`token_ratio` (the tool
        definitions are our own count): what requests are planned and compacted against."""
        if self.token_ratio <= 1.0:
            return self.base_budget
        return max(0, int(self.usable_input / self.token_ratio) - self.tool_definition_tokens)

    @property
    def effective_preview_chars(self) -> int:
        """Characters of a large output shown as head + tail: share × budget, at least 4,000 (or
        half the budget, when that is less), at most 16,000. A recall returns at most this much,
        so the floor keeps recall chunks usable when the share is small."""
        if self.preview_chars is not None:
            return self.preview_chars
        floor = min(PREVIEW_FLOOR_CHARS, self.base_budget // 2)
        return min(16000, max(128, floor, int(self.base_budget * self.preview_share)))

    def compact_at(self, budget: int) -> int:
        """Working-set tokens above which the fallback compacts (without LLM condensation)."""
        return budget if self.compact_at_ratio >= 1 else int(budget * self.compact_at_ratio)

    def compaction_target(self, budget: int) -> int:
        """Working-set tokens a compaction aims for: target_ratio of :meth:`compact_at`."""
        return int(self.compact_at(budget) * self.target_ratio)

    @property
    def capability_ceiling(self) -> int:
        """Admission ceiling for capability context: the usable input, or the old 8,000 when the
        model is unknown, less the safety margin (rules 1 kept the 8,000 whole)."""
        if not self.model_known:
            return self.unknown_model_ceiling - (self.capability_margin if self.rules_version >= 2 else 0)
        return max(0, self.usable_input - self.capability_margin)

    @property
    def max_item_tokens(self) -> int:
        """The FULL cost above which an item enters bounded (rules 2)."""
        return max(1, int(self.base_budget * self.max_item_share))


# What new sessions run with (the workflows apply it behind workflow.patched("cost-profile"),
# so that sessions started before keep the values they were recorded with). Chosen with
# bench/engine_sensitivity.py on the recorded sessions for cost (issue 16).
CHECKPOINT_PROFILE: dict[str, int | float | bool] = {
    "checkpoint_tokens": 1600,  # a larger checkpoint: more addresses of archived outputs
    "preview_share": 0.25,  # a large output enters as a shorter head and tail
    "checkpoint_calls": True,  # each address with the call whose output it holds (issue 29)
}
# Sessions started between issue 16 and issue 29 (workflows/lane.py: patch checkpoint-content)
# listed up to 192 paths and symbols of archived items in the checkpoint instead, and showed
# no calls. A bare name is no content the model can act on, and the list took the room of
# observation addresses it could recall: without it the recorded sessions miss fewer names at
# every budget, at the same cost (bench/engine_sensitivity.py, bench/results/README.md).
NAMES_INDEX_PROFILE: dict[str, int | float | bool] = {"checkpoint_names": 192, "checkpoint_calls": False}
# Sessions started since show lines of archived items in the checkpoint, and brief references
# (workflows/lane.py: patch checkpoint-lines); chosen with bench/engine_sensitivity.py (bench/results/README.md).
LINES_PROFILE: dict[str, int | float | bool] = {"checkpoint_lines": 48, "checkpoint_brief_references": True}
# Sessions started since preview large outputs with lines of their middle, and keep twice the
# pool of archived lines (workflows/lane.py: patch preview-lines); chosen with a scratch grid on
# the recorded sessions (bench/results/README.md, issue 29).
PREVIEW_LINES_PROFILE: dict[str, int | float | bool] = {"preview_lines": True, "checkpoint_pool_lines": 192}
# Only without LLM condensation (a condensation has its own trigger and target).
FALLBACK_PROFILE: dict[str, int | float | bool] = {
    "compact_at_ratio": 0.75, "target_ratio": 0.3, "protected_groups": 2,
}


def cost_profile(llm_condensation: bool, names_index: bool = False, key_lines: bool = True,
                 preview_lines: bool = True) -> dict[str, int | float | bool]:
    """The EngineConfig values a new session runs with besides the field defaults
    (``names_index``: as sessions started before issue 29 ran, NAMES_INDEX_PROFILE;
    ``key_lines``: LINES_PROFILE, off for sessions started before it; ``preview_lines``:
    PREVIEW_LINES_PROFILE, only with key lines, off for sessions started before it)."""
    profile = dict(CHECKPOINT_PROFILE) if llm_condensation else {**CHECKPOINT_PROFILE, **FALLBACK_PROFILE}
    if names_index:
        return {**profile, **NAMES_INDEX_PROFILE}
    if not key_lines:
        return profile
    return {**profile, **LINES_PROFILE, **(PREVIEW_LINES_PROFILE if preview_lines else {})}


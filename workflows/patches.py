"""``workflow.patched`` for the workflows, with the patches settled so far taken under one marker.

Every ``workflow.patched`` that says yes records a marker, and Temporal's SDK core records with
each an upsert of the ``TemporalChangeVersion`` search attribute (the whole list so far): a new
session's run recorded 21 of each before it could answer its first call, about 12 ms of the
server's time on this machine and 42 history events, again in every run continued as new.

Runs that start on this code ask once, the newest marker of ``SETTLED``, and take every patch
in its set as on, recording nothing more. Runs recorded before it have no such marker,
so on replay the question answers no and each patch is asked as it was (their own markers).
Outside replay both ways answer yes, so a run that began on older code and goes on here decides
nothing differently. Patch ids must be asked only through :func:`patched`: a settled id asked
with ``workflow.patched`` directly would find no marker of its own in a run that settled it.
The marker is recorded where a run first asks a settled id (``SessionWorkflow.run``'s engine
options; a child lane's, after its start): moving that first question to another place moves
the marker among the commands, which recorded runs would not replay. A run that recorded it
cannot be replayed by a build older than this module (deploy/README.md, rollback).
Patches added later are asked on their own until a later generation settles them: a new entry
at the end of ``SETTLED``, whose set holds the previous one's and the new ids. The newest marker
is asked first, so a new run records only it, and a run recorded under an earlier marker finds
that one on replay.
"""

from __future__ import annotations

from temporalio import workflow

SETTLED_PATCHES = frozenset({
    "task-events", "model-usage", "usage-event-with-tool", "lane-after-system-prompt", "start-stores-system-prompt",
    "exhaustive-refusal-cap", "recovery-event-on-every-admission", "store-text-activity",
    "cache-aware-sweep", "sweep-never-grows", "concluded-episode-markers", "sweep-keeps-markers",
    "bound-active-episodes", "roll-kept-when-unfit", "shrink-newest-group", "engine-rules-2", "cost-profile",
    "checkpoint-content", "checkpoint-lines", "preview-lines", "budget-notice", "lane-episode-events",
    "one-write-compaction", "local-store-only-tools", "model-call-writes-generated", "continue-as-new-all-modes",
    "step-items-activity", "external-note-budget-check", "external-task-events", "step-writes-later",
})
SETTLED_MARKER = "settled-patches-1"
# (marker, the patch ids it settles), oldest first
SETTLED: tuple[tuple[str, frozenset[str]], ...] = ((SETTLED_MARKER, SETTLED_PATCHES),)


def patched(patch_id: str) -> bool:
    """Whether this run takes the change ``patch_id`` gates (``workflow.patched``'s answer)."""
    for marker, settled in reversed(SETTLED):
        if patch_id in settled and workflow.patched(marker):
            return True
    return workflow.patched(patch_id)

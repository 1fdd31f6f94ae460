"""Telemetry that explains cost (issue 27): each ``context.request`` event carries a digest of
the request's stable prefix (a cache break shows as a changed digest between two requests)
and the count of archived outputs parked at observation addresses, which the context report
carries too."""

from __future__ import annotations

from lanes_client import assistant_item, tool_result_item, user_item

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "


async def test_request_events_show_cache_breaks_and_parked_observations(client_a):
    sid = (await client_a.create_session(mode="external", budget_tokens=3_000)).session_id
    await client_a.append_items(sid, [user_item("read the modules")])
    for n in range(10):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": f'{{"command": "cat m{n}"}}'}}
        await client_a.append_items(sid, [assistant_item({"content": f"reading m{n}", "tool_calls": [call]}),
                                          tool_result_item(f"c{n}", "bash", f"m{n} " + WORDS * 20, 0)])
        await client_a.next_request(sid)
    events = [e for e in (await client_a.events(sid, limit=1000)).events if e.kind == "context.request"]
    compactions = [e for e in (await client_a.events(sid, limit=1000)).events
                   if e.kind.startswith("context.compaction")]
    assert len(events) == 10 and compactions
    digests = [e.payload["stable_prefix_digest"] for e in events]
    # requests between two compactions share their cached prefix; a compaction breaks it
    assert len(set(digests)) > 1 and any(a == b for a, b in zip(digests, digests[1:], strict=False))
    report = await client_a.context(sid)
    parked = report.counters.archived_observations
    assert parked > 0 and events[-1].payload["parked_observations"] == parked
    archived = [e for e in (await client_a.events(sid, limit=1000)).events if e.kind == "item.archived"]
    assert parked == sum(1 for e in archived if e.payload["metadata"].get("observation_id"))

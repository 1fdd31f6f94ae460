"""A deterministic synthetic agent session of any length, for long-session tests and
benches: mixed reads, writes and edits, test runs with failures, some large outputs.
Built from an explicitly seeded ``random.Random``, so the same arguments give the same
session everywhere.
"""

from __future__ import annotations

import json
import random

from recordings.model import FORMAT_SYNTHETIC, ToolResultRec, Trajectory, Turn
from workflows.context import ToolCall

_WORDS = ("cache", "ledger", "episode", "budget", "lane", "item", "token", "policy", "summary",
          "observation", "projection", "anchor", "window", "handoff", "capability", "recall")


def _code_lines(rng: random.Random, n: int, tag: str) -> list[str]:
    lines: list[str] = []
    for i in range(n):
        r = rng.random()
        w1, w2 = rng.choice(_WORDS), rng.choice(_WORDS)
        if r < 0.15:
            lines.append(f"def {w1}_{w2}_{tag}_{i}(value, limit={rng.randint(1, 4096)}):")
        elif r < 0.25:
            lines.append(f'    """Return the {w1} {w2} for step {i}."""')
        elif r < 0.8:
            lines.append(f"    {w1}_{i} = compute_{w2}(value, {rng.randint(0, 999)})  # {tag}")
        else:
            lines.append(f"    return {w1}_{i} if {w1}_{i} < limit else {rng.randint(0, 99)}")
    return lines


def _wrap_shell(rc: int, out: str) -> str:
    return f"<returncode>{rc}</returncode>\n<output>\n{out}\n</output>"


def synthetic_trajectory(turns: int, seed: int = 0) -> Trajectory:
    """A deterministic long synthetic session of ``turns`` model answers.

    Mixed ``read_file`` / ``write_file`` / ``edit_file`` / ``bash`` (tests, grep, ls) calls,
    test runs that fail with tracebacks, occasional parallel calls, rare user follow-ups and a
    few large outputs (20–120 k characters). Generated only from ``random.Random(seed)``: the
    same arguments always give the same trajectory. The last turn is a final text answer.
    """
    if turns < 1:
        raise ValueError("turns must be >= 1")
    rng = random.Random(seed)
    modules = [f"src/app/{rng.choice(_WORDS)}_{i:03d}.py" for i in range(48)]
    tests = [f"tests/test_{m.rsplit('/', 1)[1]}" for m in modules]
    out_turns: list[Turn] = []
    for k in range(turns - 1):
        n_calls = 1 if rng.random() < 0.88 else rng.randint(2, 3)
        calls: list[ToolCall] = []
        results: list[ToolResultRec] = []
        verbs: list[str] = []
        for j in range(n_calls):
            cid = f"call-{k}-{j}"
            large = rng.random() < 0.03
            kind = rng.choices(("read", "write", "edit", "test", "grep", "ls"),
                               weights=(34, 12, 10, 20, 16, 8))[0]
            mi = rng.randrange(len(modules))
            path = modules[mi]
            if kind == "read":
                n = rng.randint(300, 1500) if large else rng.randint(15, 160)
                lines = _code_lines(rng, n, f"r{k}")
                name, args = "read_file", {"path": path}
                output = "\n".join(f"{i + 1:6d}\t{line}" for i, line in enumerate(lines))
                rc: int | None = 0
                verbs.append(f"read {path}")
            elif kind == "write":
                body = "\n".join(_code_lines(rng, rng.randint(8, 60), f"w{k}"))
                name, args = "write_file", {"path": path, "content": body}
                output = f"Wrote {len(body.encode())} bytes to {path}"
                rc = 0
                verbs.append(f"write {path}")
            elif kind == "edit":
                old = f"compute_{rng.choice(_WORDS)}(value, {rng.randint(0, 999)})"
                new = f"compute_{rng.choice(_WORDS)}(value, {rng.randint(0, 999)})"
                name, args = "edit_file", {"path": path, "old": old, "new": new}
                if rng.random() < 0.2:
                    output, rc = f"Error: string to replace not found in {path}: {old}", 1
                else:
                    output, rc = f"Edited {path}: 1 replacement", 0
                verbs.append(f"edit {path}")
            elif kind == "test":
                test = tests[mi]
                name, args = "bash", {"command": f"python -m pytest {test} -q"}
                n_pass = rng.randint(1, 40)
                if rng.random() < 0.35:
                    n_fail = rng.randint(1, 5)
                    tb: list[str] = []
                    for f in range(n_fail):
                        tb += [f"_____ test_{rng.choice(_WORDS)}_{f} _____",
                               f"{test}:{rng.randint(5, 400)}: in test_{rng.choice(_WORDS)}_{f}",
                               f"    assert {rng.choice(_WORDS)}_{f} == {rng.randint(0, 99)}",
                               f"E   AssertionError: assert {rng.randint(100, 999)} == "
                               f"{rng.randint(0, 99)}"]
                    if large:  # a long captured log
                        tb += _code_lines(rng, rng.randint(300, 1500), f"t{k}")
                    tb.append(f"FAILED {n_fail} failed, {n_pass} passed in "
                              f"{rng.randint(1, 90) / 10:.1f}s")
                    output, rc = _wrap_shell(1, "\n".join(tb)), 1
                else:
                    output, rc = _wrap_shell(0, f"{'.' * n_pass}\n{n_pass} passed in "
                                                f"{rng.randint(1, 90) / 10:.1f}s"), 0
                verbs.append(f"test {test}")
            elif kind == "grep":
                word = rng.choice(_WORDS)
                name, args = "bash", {"command": f"grep -rn '{word}' src tests"}
                n = rng.randint(250, 1300) if large else rng.randint(0, 40)
                hits = [f"{rng.choice(modules)}:{rng.randint(1, 900)}:    {word}_{i} = "
                        f"compute_{rng.choice(_WORDS)}(value, {rng.randint(0, 999)})"
                        for i in range(n)]
                rc = 0 if hits else 1
                output = _wrap_shell(rc, "\n".join(hits))
                verbs.append(f"search for {word}")
            else:
                d = rng.choice(("src/app", "tests"))
                name, args = "bash", {"command": f"ls -la {d}"}
                pool = modules if d == "src/app" else tests
                listing = [f"-rw-r--r-- 1 dev dev {rng.randint(200, 90000):6d} Jan {rng.randint(1, 28):2d} "
                           f"{p.rsplit('/', 1)[1]}" for p in pool[: rng.randint(5, len(pool))]]
                output, rc = _wrap_shell(0, "\n".join(listing)), 0
                verbs.append(f"list {d}")
            calls.append(ToolCall(id=cid, name=name,
                                     arguments=json.dumps(args, ensure_ascii=False)))
            results.append(ToolResultRec(tool_call_id=cid, tool_name=name, output=output,
                                         exit_code=rc, render_role="tool"))
        text = f"Step {k}: next I {', then '.join(verbs)}."
        user_after: list[str] = []
        if rng.random() < 0.005:
            user_after.append(f"Also keep the {rng.choice(_WORDS)} module's public API stable.")
        out_turns.append(Turn(assistant_text=text, tool_calls=calls, results=results,
                              user_after=user_after))
    out_turns.append(Turn(assistant_text=f"Done after {turns - 1} steps: all modules updated and "
                                         "the test suite passes.", tool_calls=[], results=[]))
    return Trajectory(
        id=f"synthetic/seed-{seed}-turns-{turns}",
        source_format=FORMAT_SYNTHETIC,
        system="You are a careful software engineer working in a Python repository. Use the "
               "tools to read, edit and test code until the task is complete.",
        task=f"Refactor the app package (synthetic session, seed {seed}): update every module, "
             "keep the tests green and report what changed.",
        turns=out_turns,
        tool_protocol="tool_calls",
    )

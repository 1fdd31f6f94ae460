"""CPU the worker spends naming an item (its paths, symbols and key lines), against an earlier
revision of the name patterns, in one run.

    .venv/bin/python bench/item_names.py [--against 2b6ba72] [--stride 4] [--rounds 7]

Every stored answer and tool output gets ``names_of`` and ``key_lines_of``
(``activities/item_names.py``), on the worker, once per item: a profile of the scale bench at 64
sessions put about a tenth of the worker's Python time there. This driver runs both over the
answers and tool outputs of every ``--stride``-th recording, with the patterns of
``workflows/context/names.py`` as they are and as they were at ``--against`` (loaded from git),
alternating, ``--rounds`` times each; it reports the least CPU time of each (the machine's noise
only adds) and checks that both give the same names and lines. Writes
``bench/results/item-names.json`` and the ``item-names`` block of ``bench/results/README.md``.

What it cannot see: the rest of a turn (the scale bench measures the whole), and items unlike
the recordings' (a binary dump, a minified bundle).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import _results

from activities import item_names
from recordings import DEFAULT_TRAJECTORY_ROOT, load_trajectory, trajectory_files
from workflows.context import ItemContent
from workflows.context import names as current_names


def names_at(revision: str) -> ModuleType:
    """``workflows/context/names.py`` as it was at ``revision``, as a module of its own."""
    source = subprocess.run(["git", "show", f"{revision}:workflows/context/names.py"], cwd=_results.REPO,
                            capture_output=True, text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as file:
        file.write(source)
    spec = importlib.util.spec_from_file_location(f"names_at_{revision}", file.name)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    Path(file.name).unlink()
    return module


def recorded_items(stride: int) -> tuple[int, list[ItemContent]]:
    files = [path for path, _ in trajectory_files([str(DEFAULT_TRAJECTORY_ROOT)])][::stride]
    contents = []
    for path in files:
        for turn in load_trajectory(str(path)).turns:
            contents.append(ItemContent(text=turn.assistant_text, tool_calls=turn.tool_calls))
            contents.extend(ItemContent(text=r.output, tool_call_id=r.tool_call_id, tool_name=r.tool_name)
                            for r in turn.results)
    return len(files), contents


def named(patterns: ModuleType, contents: list[ItemContent]) -> tuple[float, list[Any]]:
    """CPU seconds to name every item with ``patterns``, and what they gave."""
    item_names.paths_in, item_names.symbols_in = patterns.paths_in, patterns.symbols_in
    item_names.line_names = patterns.line_names
    patterns.line_names.cache_clear()  # as a worker meeting new lines
    started = time.process_time()
    out = [(item_names.names_of(c), item_names.key_lines_of(c)) for c in contents]
    return time.process_time() - started, out


def run(args: argparse.Namespace) -> dict[str, Any]:
    files, contents = recorded_items(args.stride)
    variants = {"now": current_names, args.against: names_at(args.against)}
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    outputs: dict[str, list[Any]] = {}
    try:
        for _ in range(args.rounds):
            for name, patterns in variants.items():
                spent, outputs[name] = named(patterns, contents)
                seconds[name].append(spent)
    finally:
        named(current_names, [])  # the module's own functions back
    chars = sum(len(c.text) for c in contents)
    best = {name: min(times) for name, times in seconds.items()}
    return {
        "driver": "bench/item_names.py", "machine": _results.machine(), "sources": _results.sources_digest(),
        "against": args.against, "files": files, "items": len(contents), "chars": chars, "rounds": args.rounds,
        "cpu_seconds": {name: [round(s, 3) for s in times] for name, times in seconds.items()},
        "us_per_item": {name: round(1e6 * s / len(contents), 1) for name, s in best.items()},
        "ratio": round(best["now"] / best[args.against], 3),
        "same_names_and_lines": outputs["now"] == outputs[args.against],
    }


def readme_block(result: dict[str, Any]) -> str:
    now, then = result["us_per_item"]["now"], result["us_per_item"][result["against"]]
    return f"""## Naming an item: the worker's CPU for its paths, symbols and key lines (`bench/item_names.py`)

`.venv/bin/python bench/item_names.py --against {result['against']}`: `names_of` and `key_lines_of` over the
{result['items']:,} answers and tool outputs ({result['chars'] / 1e6:.1f} MB) of {result['files']} recordings, with the
name patterns of today and of `{result['against']}`, alternating, {result['rounds']} rounds, least CPU time of each.

| patterns | µs per item | CPU ×{result['against']} | same names and lines |
|---|---:|---:|:---:|
| `{result['against']}` | {then} | 1.000 | |
| now | {now} | {result['ratio']:.3f} | {"yes" if result['same_names_and_lines'] else "**no**"} |

Cannot see: the rest of a turn (`bench/scale.py` measures the whole), items unlike the recordings'.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="2b6ba72", help="the git revision whose name patterns are compared")
    parser.add_argument("--stride", type=int, default=4, help="every S-th recording")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, help="write the result here only (not the committed results)")
    args = parser.parse_args()
    result = run(args)
    if not result["same_names_and_lines"]:
        raise SystemExit("the two revisions' patterns name the items differently")
    _results.publish(result, args.out, "item-names.json", "item-names", readme_block(result))


if __name__ == "__main__":
    main()

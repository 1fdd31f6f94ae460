"""Shared helpers of the bench drivers: where results go and how the results README is kept.

``bench/results/README.md`` holds one generated block per driver between
``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` markers; a driver replaces only its own
block, so hand-written notes around the blocks survive re-runs.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
RESULTS_README = RESULTS / "README.md"

if str(REPO) not in sys.path:  # `python bench/x.py` puts bench/, not the repo, on the path
    sys.path.insert(0, str(REPO))


def write_json(name: str, data: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def machine() -> dict:
    import os

    return {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2)}


def sources_digest() -> dict:
    """Which code produced a figure: sha256 over the engine and replay sources (the tree may
    hold uncommitted work), plus the git commit."""
    import hashlib
    import subprocess

    digest = hashlib.sha256()
    files = sorted((REPO / "workflows" / "context").glob("*.py")) + [
        REPO / "activities" / name for name in ("items.py", "tokens.py")
    ] + sorted((REPO / "recordings").glob("*.py")) + sorted((REPO / "worker" / "replay").glob("*.py"))
    for path in files:
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                timeout=10).stdout.strip()
    except OSError:
        commit = ""
    return {"git_head": commit, "sources_sha256": digest.hexdigest()[:16], "files": len(files)}


def update_block(name: str, body: str) -> Path:
    """Replace (or append) the generated block ``name`` of the results README."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = RESULTS_README.read_text(encoding="utf-8") if RESULTS_README.exists() else "# Benchmark results\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{block}{tail}"
    else:
        text = f"{text.rstrip()}\n\n{block}\n"
    RESULTS_README.write_text(text, encoding="utf-8")
    return RESULTS_README


def publish(result: dict, out: Path | None, json_name: str, block_name: str, block: str) -> None:
    """A driver's result: to ``out`` only when given (a look, not the committed figures), else
    to ``results/<json_name>`` and its README block; the block printed either way."""
    if out is not None:
        out.write_text(json.dumps(result, indent=1) + "\n")
    else:
        write_json(json_name, result)
        update_block(block_name, block)
    print(block)

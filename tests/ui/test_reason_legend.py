"""The inspector's legend of reason codes (worker/api/static/reasons.json) names every code
the engine can set on an item, and nothing else.

The engine's codes are found in its source, not listed by hand: every string or f-string
that reaches an item's ``reason`` (an assignment to ``.reason`` or ``reason``, a ``reason=``
keyword, a ``"reason"`` key of a dict literal, a default of a ``reason`` parameter, the
argument in the ``reason`` position of a call to an engine function or of a class whose
fields include ``reason`` (``Change(lifecycle, projection, reason)``), or the values of a
table of codes named ``*_REASONS``).
Sentences with spaces are rejections' and results' reasons, not item codes; an f-string's
``{...}`` is a value the engine fills in.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENGINE = REPO / "workflows" / "context"
LEGEND = REPO / "worker" / "api" / "static" / "reasons.json"
PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def _template(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else
                       "{" + ast.unparse(v.value) + "}" if isinstance(v, ast.FormattedValue) else "{}"
                       for v in node.values)
    return None


def _reason_positions(trees: list[ast.Module]) -> dict[str, int]:
    """Engine functions with a ``reason`` parameter: its position in a call (methods without self)."""
    positions = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = [a.arg for a in node.args.args]
                if "reason" in names:
                    positions[node.name] = names.index("reason") - (1 if names[:1] == ["self"] else 0)
            elif isinstance(node, ast.ClassDef):  # a NamedTuple or dataclass: its fields in order
                fields = [b.target.id for b in node.body if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name)]
                if "reason" in fields:
                    positions[node.name] = fields.index("reason")
    return positions


def _reason_values(tree: ast.Module, positions: dict[str, int]) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = (list(zip(target.elts, node.value.elts, strict=False))
                         if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                         else [(target, node.value)])
                for name, value in pairs:
                    if (isinstance(name, ast.Attribute) and name.attr == "reason") or (
                            isinstance(name, ast.Name) and name.id == "reason"):
                        yield value
                    elif isinstance(name, ast.Name) and name.id.endswith("_REASONS") and isinstance(value, ast.DictComp):
                        yield value.value  # a table of precomputed codes
        elif isinstance(node, ast.Dict):
            yield from (value for key, value in zip(node.keys, node.values, strict=True)
                        if isinstance(key, ast.Constant) and key.value == "reason")
        elif isinstance(node, ast.Call):
            yield from (kw.value for kw in node.keywords if kw.arg == "reason")
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if called in positions and len(node.args) > positions[called]:
                yield node.args[positions[called]]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + list(node.args.defaults) + list(
                node.args.kw_defaults)
            yield from (default for arg, default in zip(args, defaults, strict=True)
                        if arg.arg == "reason" and default is not None)


def engine_reason_codes() -> set[str]:
    """Every reason code the engine can set, placeholders written ``{}``."""
    trees = [ast.parse(path.read_text(), str(path)) for path in sorted(ENGINE.rglob("*.py"))]
    positions = _reason_positions(trees)
    codes = set()
    for tree in trees:
        for value in _reason_values(tree, positions):
            template = _template(value)
            for part in (template or "").split(";"):
                code = PLACEHOLDER.sub("{}", part)
                if code and code != "{}" and " " not in code:
                    codes.add(code)
    return codes


def legend_codes() -> list[str]:
    return [PLACEHOLDER.sub("{}", entry["code"]) for entry in json.loads(LEGEND.read_text())["codes"]]


def test_the_enumeration_finds_the_codes_of_every_kind_of_transition():
    codes = engine_reason_codes()
    # one of each way a code is set: a tuple assignment, an f-string, a keyword, a default, a call position
    for code in ("pinned:{}", "pass1:{}→reference", "{}:retired", "pass2:group-archived", "{}:replaced-by-{}",
                 "pass3:rolled-into-summary", "entry:large-output-compact", "added"):
        assert code in codes, (code, sorted(codes))
    assert not any(" " in c for c in codes)


def test_the_legend_names_every_engine_reason_code_and_nothing_else():
    legend = legend_codes()
    assert len(legend) == len(set(legend)), "a code is listed twice"
    engine = engine_reason_codes()
    assert sorted(engine - set(legend)) == [], "codes the engine sets that the legend does not explain"
    assert sorted(set(legend) - engine) == [], "legend entries the engine no longer sets"
    entries = json.loads(LEGEND.read_text())["codes"]
    assert all(entry["meaning"].strip() and entry["group"] for entry in entries)

"""The layout the README's table promises, checked on the code.

Every folder the table names exists, every code folder is named there, and each holds only
what its row says: the imports between them follow the rules below. The activity calls of
the workflows are tied to what the worker registers.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from temporalio import activity, workflow

from workflows import activity_calls

ROOT = Path(__file__).resolve().parents[1]
ORCHESTRATION = {"workflows.session", "workflows.lane", "workflows.lane_workflow", "workflows.agent_loop",
                 "workflows.subagents", "workflows.activity_calls", "workflows.recovery",
                 "workflows.external_tasks", "workflows.capability_admission", "workflows.pinned_notes",
                 "workflows.exhaustive", "workflows.task_events", "workflows.usage", "workflows.patches",
                 "workflows.session_start"}
IO_LIBRARIES = {"asyncpg", "openai", "httpx", "tiktoken", "subprocess", "socket", "os", "time", "random", "pathlib"}
SERVER_LIBRARIES = {"temporalio", "asyncpg", "openai", "fastapi", "uvicorn", "tiktoken", "prometheus_client"}
# What each folder of the table may not import (absolute module prefixes).
FORBIDDEN: dict[str, set[str]] = {
    "workflows/context": {"workflows.contract.session", "workflows.contract.tools", "workflows.session", "activities", "worker",
                          "recordings", "lanes_client", "temporalio", *IO_LIBRARIES},
    "workflows": {"worker", "lanes_client", "recordings", *IO_LIBRARIES},
    "activities": {"worker", "lanes_client", *ORCHESTRATION},
    "recordings": {"activities", "worker", "lanes_client", "temporalio", *ORCHESTRATION},
    # the client is its own distribution: nothing of the server, not even the engine's models
    "client": {"workflows", "activities", "worker", "recordings", *(SERVER_LIBRARIES - {"httpx"})},
    "worker": set(),
}


def _table_paths() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return [m.group(1).rstrip("/") for m in re.finditer(r"^\| `([^`]+)` \|", section, re.MULTILINE)]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _modules_of(folder: str) -> list[Path]:
    base = ROOT / folder
    # a folder's own rule covers its files; a nested folder with a row of its own has its own rule
    nested = {ROOT / p for p in FORBIDDEN if p != folder and p.startswith(folder + "/")}
    return [p for p in sorted(base.rglob("*.py")) if not any(n in p.parents for n in nested)]


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_table_names_every_code_folder_and_each_exists():
    listed = _table_paths()
    assert all((ROOT / path).is_dir() for path in listed), listed
    code_folders = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".") and any(p.rglob("*.py"))
                    and p.name not in ("build",) and not p.name.endswith(".egg-info")}
    assert code_folders <= {path.split("/")[0] for path in listed}, code_folders - set(listed)
    assert set(FORBIDDEN) <= set(listed)


def test_importing_the_workflows_loads_no_io_library_and_no_activity():
    """Workflow code runs in Temporal's sandbox on every replay: what it imports is loaded
    there. Payloads come from the contract, activities are called by name."""
    probe = ("import sys, workflows.session, workflows.lane_workflow; "
             "print(sorted({m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(out.stdout.strip()))
    assert loaded & {"asyncpg", "openai", "tiktoken", "httpx", "activities", "worker", "fastapi"} == set()


# Outside code reaches the engine through its front door (workflows/context/__init__.py); these
# reach behind it, each for a reason: the shell classifier's helpers (the command-effects
# check extends them), and the request formats' enum values (the client's wire models).
BEHIND_THE_FRONT_DOOR = {("activities/command_effects.py", "workflows.context.classify"),
                         # the name patterns the engine's checkpoint and the item activity share
                         ("activities/item_names.py", "workflows.context.names"),
                         ("tests/client/test_wire_drift.py", "workflows.context.formats")}


def test_outside_code_imports_the_engine_through_its_front_door():
    behind = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        # hidden folders hold installed third-party code (.venv, .tools), not ours
        if rel.startswith(("workflows/context/", "tests/engine/", "build/")) or any(
                part.startswith(".") for part in path.relative_to(ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("workflows.context."):
                behind.add((rel, node.module))
    assert behind == BEHIND_THE_FRONT_DOOR


def test_each_folder_imports_only_what_its_row_allows():
    problems = []
    for folder, forbidden in FORBIDDEN.items():
        for path in _modules_of(folder):
            for name in _imports(path):
                if any(_matches(name, prefix) for prefix in forbidden):
                    problems.append(f"{path.relative_to(ROOT)} imports {name}")
    assert problems == []


def test_one_request_renderer():
    """Requests are rendered by the materialiser (and by the offline simulator, which has no
    store); nothing else, so an external agent gets the request a hosted session sends. The
    incremental renderer (render_cache.py) renders through the same render_turns and is proven
    equal to render_messages by tests/engine/test_incremental_plan.py."""
    users = {p.relative_to(ROOT).as_posix() for folder in ("workflows", "activities", "worker", "client")
             for p in (ROOT / folder).rglob("*.py") if "render_messages(" in p.read_text()}
    assert users == {"workflows/context/render.py", "activities/requests.py", "worker/replay/policies.py",
                     "workflows/context/render_cache.py"}


def _called_activities() -> dict[str, list[str]]:
    """helper name -> names of the activities its execute_activity call may run (literal
    names, or both arms of a patch's ``"new" if workflow.patched(...) else "old"``)."""
    tree = ast.parse(Path(activity_calls.__file__).read_text())
    called: dict[str, list[str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.AsyncFunctionDef):
            continue
        names: list[str] = []
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call) and getattr(inner.func, "attr", "") in ("execute_activity",
                                                                                  "execute_local_activity"):
                first = inner.args[0]
                if isinstance(first, ast.Constant):
                    names.append(first.value)
            elif isinstance(inner, ast.IfExp) and isinstance(inner.body, ast.Constant):
                names += [inner.body.value, inner.orelse.value]  # type: ignore[attr-defined]
        called[node.name] = list(dict.fromkeys(names))
    return called


def test_every_helper_calls_the_activity_of_its_name_and_the_worker_registers_it():
    from worker.settings import Settings
    from worker.worker import activity_methods, activity_objects, store_source

    settings = Settings()
    methods = activity_methods(activity_objects(None, settings, store_source(settings)))
    names = [str(activity._Definition.must_from_callable(fn).name) for fn in methods]
    registered = set(names)
    assert len(names) == len(registered) and registered == activity_calls.ACTIVITY_NAMES
    called = _called_activities()
    assert called, "no helpers found"
    for helper, names in called.items():
        assert names and names[0] == helper, (helper, names)
        assert set(names) <= registered, (helper, set(names) - registered)
    defined = set()
    for path in (ROOT / "activities").glob("*.py"):
        defined |= {node.name for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.AsyncFunctionDef)
                    and any("activity.defn" in ast.unparse(d) for d in node.decorator_list)}
    assert defined <= registered, f"defined but never registered: {defined - registered}"


def test_a_user_message_crosses_each_layer_once_as_the_readme_says():
    """The README's path of a user message, checked against the code it names: the API's
    route sends the workflow's submit update, the agent loop calls the model activity, and
    that activity materialises the plan with the same function as GET /request."""
    import inspect

    from activities import model, requests
    from worker.api import external_routes, routes
    from workflows.agent_loop import AgentLoop
    from workflows.session import SessionWorkflow

    readme = (ROOT / "README.md").read_text()
    path = readme[readme.index("A user message crosses each layer once"):]
    path = path[:path.index("\n\n")]
    for named in ("worker/api", "workflows/session.py", "workflows/agent_loop.py", "workflows/context",
                  "activities/model.py", "activities/requests.py"):
        assert f"`{named}`" in path, named
    assert "SessionWorkflow.submit" in inspect.getsource(routes.send_message)
    assert "submit" in workflow._Definition.must_from_class(SessionWorkflow).updates
    loop = inspect.getsource(AgentLoop.call_model)
    assert "lane.plan_within_budget(" in loop and "calls.call_model(" in loop
    assert external_routes.materialise is requests.materialise
    assert model.model_request is requests.model_request and "materialise(" in inspect.getsource(requests.model_request)
    assert "materialise(" in inspect.getsource(external_routes.request_out)


def test_patches_are_asked_only_through_workflows_patches():
    """A settled patch asked with ``workflow.patched`` directly finds no marker of its own in a
    run that settled it (workflows/patches.py), so nothing else asks Temporal directly; and each
    settled id is one the code asks (a misspelt id would settle nothing)."""
    from workflows.patches import SETTLED

    direct, literals = [], set()
    for path in (ROOT / "workflows").rglob("*.py"):
        tree = ast.parse(path.read_text())
        if path.name != "patches.py":
            literals |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        direct += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree)
                   if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "patched"
                   and isinstance(n.func.value, ast.Name) and n.func.value.id == "workflow"
                   and path.name != "patches.py"]
    assert direct == []
    settled = set().union(*(ids for _, ids in SETTLED))
    assert not settled - literals, sorted(settled - literals)

"""The client is its own distribution: it imports without any server module, and installs
into a fresh virtualenv that holds nothing but its declared dependencies."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "client"
SERVER_MODULES = ("temporalio", "fastapi", "asyncpg", "tiktoken", "openai", "uvicorn", "workflows", "activities",
                  "worker", "recordings")
# Every module but the framework integrations (an extra each: they import their framework, which
# may bring openai and the like; lanes_client itself must not).
IMPORT_ALL = ("import pkgutil, sys, lanes_client; "
              "[__import__(m.name) for m in pkgutil.walk_packages(lanes_client.__path__, 'lanes_client.') "
              "if not m.name.startswith('lanes_client.integrations')]; "
              f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(SERVER_MODULES)!r})); "
              "print(lanes_client.__file__)")


def test_the_client_imports_in_a_clean_interpreter_without_server_modules(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(CLIENT)}
    out = subprocess.run([sys.executable, "-c", IMPORT_ALL], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    loaded, origin = out.stdout.splitlines()
    assert loaded == "[]" and origin.startswith(str(CLIENT))


def _closure(requirements: list[str]) -> set[str]:
    """The installed distributions these requirements need, transitively (extras ignored)."""
    found: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        dist = metadata.distribution(req.name)
        if dist.metadata["Name"] in found:
            continue
        found.add(dist.metadata["Name"])
        todo.extend(Requirement(r) for r in dist.requires or ())
    return found


def _link_distribution(name: str, site: Path) -> None:
    """Make an installed distribution (its packages and its metadata) visible in ``site``."""
    dist = metadata.distribution(name)
    for top in {f.parts[0] for f in dist.files or () if not f.parts[0].startswith("..") and f.parts[0] != "__pycache__"}:
        source = Path(str(dist.locate_file(top)))
        if source.exists() and not (site / top).exists():
            (site / top).symlink_to(source)


def _offline_build_backend() -> bool:
    """setuptools builds a wheel by itself from 70.1 on; older ones need the ``wheel`` package."""
    try:
        return Version(metadata.version("setuptools")) >= Version("70.1") or find_spec("wheel") is not None
    except metadata.PackageNotFoundError:
        return False


@pytest.mark.timeout(120)
@pytest.mark.skipif(not _offline_build_backend(), reason="no build backend to build a wheel offline with "
                                                         "(the test extra installs setuptools>=70.1)")
def test_pip_installs_the_client_into_a_fresh_virtualenv(tmp_path):
    """No network: pip builds the wheel with this environment's setuptools (--no-build-isolation),
    installs it with --no-deps into a venv without pip; the fresh venv then sees only the client's dependency
    closure, linked from this environment, and ``pip check`` agrees nothing is missing."""
    source = tmp_path / "client"  # a copy: building in place would leave build/ and egg-info in the checkout
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir",
                    str(tmp_path / "wheels"), str(source)], check=True, timeout=90, cwd=tmp_path, capture_output=True)
    (wheel,) = (tmp_path / "wheels").glob("context_lanes_client-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=90, cwd=tmp_path, capture_output=True)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    requires = metadata.Distribution.at(next(site.glob("context_lanes_client-*.dist-info"))).requires or []
    required = [Requirement(r) for r in requires]  # the extras (framework integrations) aside
    assert sorted(r.name for r in required if r.marker is None or r.marker.evaluate({"extra": ""})) == [
        "httpx", "httpx-sse", "pydantic"]
    for name in _closure(requires):
        _link_distribution(name, site)
    check = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "check"], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run([str(python), "-c", IMPORT_ALL], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    loaded, origin = out.stdout.splitlines()
    assert loaded == "[]" and origin.startswith(str(site))
    for module in ("temporalio", "fastapi", "workflows"):  # really absent, not merely unused
        absent = subprocess.run([str(python), "-c", f"import {module}"], cwd=tmp_path, env=env, capture_output=True)
        assert absent.returncode != 0, module

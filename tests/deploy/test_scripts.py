"""The scripts the image and the compose stack run, and the dependency lock."""

from __future__ import annotations

import http.server
import importlib.util
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest

from tests.deploy._support import DEPLOY, ROOT

SHELL_SCRIPTS = sorted(DEPLOY.rglob("*.sh"))


# --- shell scripts ------------------------------------------------------------------------

@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=[p.name for p in SHELL_SCRIPTS])
def test_shell_script_is_posix_sh_and_executable(script):
    assert script.read_text().startswith("#!/bin/sh\n")
    assert script.stat().st_mode & stat.S_IXUSR, f"chmod +x {script}"
    out = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=[p.name for p in SHELL_SCRIPTS])
def test_shellcheck(script):
    out = subprocess.run(["shellcheck", "-s", "sh", str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


@pytest.fixture()
def fake_lanes(tmp_path: Path) -> Path:
    """A `lanes` on PATH that prints its arguments and the secrets it sees."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "lanes"
    script.write_text('#!/bin/sh\necho "lanes $* key=[${OPENAI_API_KEY-unset}] db=[${DATABASE_URL-unset}]'
                      ' file=[${OPENAI_API_KEY_FILE-unset}]"\n')
    script.chmod(0o755)
    return bin_dir


def _entrypoint(bin_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    return subprocess.run(["sh", str(DEPLOY / "docker-entrypoint.sh"), *args], env={**base, **env},
                          capture_output=True, text=True, timeout=30)


def test_entrypoint_defaults_to_the_worker(fake_lanes):
    out = _entrypoint(fake_lanes)
    assert out.stdout.strip() == "lanes worker key=[unset] db=[unset] file=[unset]"


def test_entrypoint_reads_secret_files(fake_lanes, tmp_path):
    key, dsn = tmp_path / "key", tmp_path / "dsn"
    key.write_text("sk-test\n")
    dsn.write_text("postgresql://u:p@db/lanes")
    out = _entrypoint(fake_lanes, "api", OPENAI_API_KEY_FILE=str(key), DATABASE_URL_FILE=str(dsn))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "lanes api key=[sk-test] db=[postgresql://u:p@db/lanes] file=[unset]"


def test_entrypoint_prefers_a_set_variable_and_fails_on_unreadable_files(fake_lanes, tmp_path):
    key = tmp_path / "key"
    key.write_text("from-file")
    out = _entrypoint(fake_lanes, "worker", OPENAI_API_KEY="from-env", OPENAI_API_KEY_FILE=str(key))
    assert "key=[from-env]" in out.stdout and "using OPENAI_API_KEY" in out.stderr
    out = _entrypoint(fake_lanes, "worker", DATABASE_URL_FILE=str(tmp_path / "missing"))
    assert out.returncode == 1 and "not readable" in out.stderr


def test_entrypoint_runs_programs_as_is(fake_lanes):
    out = _entrypoint(fake_lanes, "echo", "hello")
    assert out.stdout.strip() == "hello"


def test_entrypoint_empty_secret_file_means_unset(fake_lanes, tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("")
    out = _entrypoint(fake_lanes, "worker", OPENAI_API_KEY_FILE=str(empty))
    assert "key=[]" in out.stdout  # worker/settings.py treats "" as unset
    from worker.settings import Settings

    assert Settings(_env_file=None, openai_api_key="").openai_api_key is None


# --- the health check -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def healthcheck():
    spec = importlib.util.spec_from_file_location("lanes_healthcheck", DEPLOY / "healthcheck.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv,role", [
    (["tini", "--", "lanes-entrypoint", "worker"], "worker"),
    (["tini", "--", "lanes-entrypoint", "api"], "api"),
    (["/opt/lanes/bin/python", "/opt/lanes/bin/lanes", "api"], "api"),
    (["tini", "--", "lanes-entrypoint"], "worker"),
    (["tini", "--", "lanes-entrypoint", "sh"], None),
    (["tini", "--", "lanes-entrypoint", "temporal", "workflow", "list"], None),
])
def test_healthcheck_detects_the_role(healthcheck, tmp_path, argv, role):
    cmdline = tmp_path / "cmdline"
    cmdline.write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    assert healthcheck.detect_role(str(cmdline)) == role


def test_healthcheck_worker_checks_the_temporal_address(healthcheck, monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("TEMPORAL_ADDRESS", f"127.0.0.1:{server.getsockname()[1]}")
        assert healthcheck.main(["worker"]) == 0
    monkeypatch.setenv("TEMPORAL_ADDRESS", "not-an-address")
    assert healthcheck.main(["worker"]) == 1


def test_healthcheck_api_checks_healthz(healthcheck, monkeypatch):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("LANES_API_PORT", str(server.server_address[1]))
        assert healthcheck.main(["api"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    assert healthcheck.main(["api"]) == 1  # nothing listens any more
    assert healthcheck.main(["nonsense"]) == 1


def test_healthcheck_is_standard_library_only():
    imports = re.findall(r"^(?:from|import)\s+([\w.]+)", (DEPLOY / "healthcheck.py").read_text(), re.M)
    assert {i.split(".")[0] for i in imports} <= set(sys.stdlib_module_names) | {"__future__"}


# --- the lock -------------------------------------------------------------------------------

def _lock() -> dict[str, str]:
    pins = {}
    for line in (DEPLOY / "requirements.lock").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([a-z0-9][a-z0-9.-]*)==([0-9][0-9a-z.+!-]*)", line)
        assert m, f"not a canonical `name==version` pin: {line!r}"
        assert m.group(1) not in pins, f"{m.group(1)} pinned twice"
        pins[m.group(1)] = m.group(2)
    assert list(pins) == sorted(pins)
    return pins


# extras the image carries (deploy/lock.py's IMAGE_EXTRAS): tracing is switched on by the environment
IMAGE_EXTRAS = ("tracing",)


def test_lock_pins_every_runtime_dependency_within_its_range():
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = _lock()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]
    local = canonicalize_name(client["name"])  # built from client/ into the image, not pinned
    assert local not in pins
    image_extras = [d for extra in IMAGE_EXTRAS for d in project["optional-dependencies"][extra]]
    for dep in project["dependencies"] + client["dependencies"] + image_extras:
        req = Requirement(dep)
        name = canonicalize_name(req.name)
        if name == local:
            continue
        assert name in pins, f"{name} is a dependency but not in deploy/requirements.lock (run deploy/lock.py)"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} outside {req.specifier}"
    extras_only = {canonicalize_name(Requirement(d).name) for deps in project.get("optional-dependencies", {}).values()
                   for d in deps}
    runtime = {canonicalize_name(Requirement(d).name) for d in project["dependencies"] + image_extras}
    assert not (extras_only - runtime) & set(pins), "test/local extras do not belong in the image"


def test_lock_is_generated_by_lock_py():
    text = (DEPLOY / "requirements.lock").read_text()
    assert "deploy/lock.py" in text.splitlines()[1] + text.splitlines()[2]
    source = (DEPLOY / "lock.py").read_text()
    assert "--check" in source
    assert "IMAGE_EXTRAS = (\"tracing\",)" in source, "keep IMAGE_EXTRAS equal to deploy/lock.py's"


@pytest.mark.skipif(os.environ.get("LANES_CHECK_LOCK") != "1",
                    reason="set LANES_CHECK_LOCK=1 to compare the lock with this virtualenv")
def test_lock_matches_this_virtualenv():
    out = subprocess.run([sys.executable, str(DEPLOY / "lock.py"), "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_entrypoint_reads_the_gateway_keys_from_secret_files(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "lanes").write_text('#!/bin/sh\necho "openai=[${LANES_GATEWAY_OPENAI_API_KEY-unset}] '
                                   'anthropic=[${LANES_GATEWAY_ANTHROPIC_API_KEY-unset}] '
                                   'file=[${LANES_GATEWAY_ANTHROPIC_API_KEY_FILE-unset}]"\n')
    (bin_dir / "lanes").chmod(0o755)
    openai_key, anthropic_key = tmp_path / "openai", tmp_path / "anthropic"
    openai_key.write_text("sk-gateway\n")
    anthropic_key.write_text("ak-gateway")
    out = _entrypoint(bin_dir, "api", LANES_GATEWAY_OPENAI_API_KEY_FILE=str(openai_key),
                      LANES_GATEWAY_ANTHROPIC_API_KEY_FILE=str(anthropic_key))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "openai=[sk-gateway] anthropic=[ak-gateway] file=[unset]"

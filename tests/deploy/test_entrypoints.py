"""The image's commands, as the Dockerfile, compose and Kubernetes run them, exist in the CLI."""

from __future__ import annotations

import importlib
import inspect

import pytest

from tests.deploy._support import (
    DEPLOY,
    K8S,
    cli_commands,
    interpolate,
    load_yaml,
    load_yaml_docs,
    need_yaml_and_jsonschema,
    parse_dockerfile,
)

need_yaml_and_jsonschema()

IMAGE_NAMES = ("context-lanes",)


def _uses_lanes_image(image: str) -> bool:
    return image.rsplit("/", 1)[-1].split(":")[0].split("@")[0] in IMAGE_NAMES


def _commands() -> list[tuple[str, str]]:
    """(where, subcommand) for every place that starts the image."""
    found = []
    dockerfile = parse_dockerfile(DEPLOY / "Dockerfile")
    (cmd,) = dockerfile.final.all("CMD")
    found.append(("Dockerfile CMD", cmd.exec_form()[0]))
    compose = interpolate(load_yaml(DEPLOY / "compose.yaml"), {})
    for name, service in compose["services"].items():
        if _uses_lanes_image(service["image"]):
            assert "entrypoint" not in service, f"compose {name}: keep the image's entry point"
            found.append((f"compose {name}", service["command"][0]))
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in load_yaml_docs(path):
            if doc.get("kind") != "Deployment":
                continue
            for container in doc["spec"]["template"]["spec"]["containers"]:
                if _uses_lanes_image(container["image"]):
                    assert "command" not in container, f"{path.name}: keep the image's entry point (use args)"
                    found.append((f"{path.relative_to(K8S)} {container['name']}", container["args"][0]))
    return found


COMMANDS = _commands()


def test_every_deployment_starts_the_image():
    where = {w.split()[0] for w, _ in COMMANDS}
    assert {"Dockerfile", "compose"} <= where and any(w.endswith(".yaml") for w in where)
    assert {c for _, c in COMMANDS} == {"worker", "api"}


@pytest.mark.parametrize("where,command", COMMANDS, ids=[f"{w}:{c}" for w, c in COMMANDS])
def test_command_exists_in_the_cli(where, command):
    commands = cli_commands()
    if command == "api" and "api" not in commands:
        pytest.xfail("`lanes api` is not registered in worker.cli.COMMANDS yet (the deployment needs it)")
    assert command in commands, f"{where} runs `lanes {command}`; worker.cli.COMMANDS has {sorted(commands)}"
    module = importlib.import_module(commands[command][0])
    assert callable(getattr(module, "main", None)), f"{commands[command][0]} has no main()"


def test_api_serves_healthz():
    commands = cli_commands()
    if "api" not in commands:
        pytest.xfail("`lanes api` is not registered in worker.cli.COMMANDS yet: /healthz cannot be checked")
    module = importlib.import_module(commands["api"][0])
    apps = [v for v in vars(module).values() if hasattr(v, "routes") and hasattr(v, "router")]
    if apps:
        paths = {getattr(r, "path", None) for app in apps for r in app.routes}
        assert "/healthz" in paths, f"the API app has no /healthz route ({sorted(p for p in paths if p)})"
    else:  # the app is built by a factory: look for the route in the module's source
        assert "/healthz" in inspect.getsource(module), "the API module defines no /healthz route"

"""deploy/compose.yaml: schema, interpolation defaults, wiring, settings, secrets."""

from __future__ import annotations

import pytest

from tests.deploy._support import (
    DEPLOY,
    FILE_SECRETS,
    compose_schema,
    compose_variables,
    image_tag,
    interpolate,
    load_yaml,
    need_yaml_and_jsonschema,
    parse_duration,
    parse_env_file,
    settings_env_names,
    validate,
)

need_yaml_and_jsonschema()

COMPOSE = DEPLOY / "compose.yaml"
LANES_SERVICES = ("worker", "api")
ONE_SHOT = ("temporal-schema", "temporal-namespace")


@pytest.fixture(scope="module")
def raw() -> dict:
    return load_yaml(COMPOSE)


@pytest.fixture(scope="module")
def compose(raw) -> dict:
    """The file as `docker compose` sees it with no variable set: every default applied."""
    return interpolate(raw, {})


def test_raw_file_validates_against_the_compose_spec(raw):
    assert validate(raw, compose_schema()) == []


def test_interpolated_file_validates_against_the_compose_spec(compose):
    assert validate(compose, compose_schema()) == []


def test_every_variable_has_a_default(raw):
    missing = sorted(name for name, default in compose_variables(raw).items() if default is None)
    assert missing == [], f"use ${{VAR:-default}} for {missing}"


def test_env_example_lists_every_variable_with_the_compose_default(raw):
    example = parse_env_file(DEPLOY / ".env.example")
    used = compose_variables(raw)
    assert sorted(set(used) - set(example)) == [], "document these in deploy/.env.example"
    assert sorted(set(example) - set(used)) == [], "deploy/.env.example lists variables compose does not use"
    differ = {k: (example[k], used[k]) for k in used if example[k] != used[k]}
    assert differ == {}, "deploy/.env.example value != compose default (example, compose)"


def test_images_are_pinned(compose):
    for name, service in compose["services"].items():
        image = service.get("image")
        assert image, f"{name}: no image"
        _, tag, digest = image_tag(image)
        assert tag or digest, f"{name}: {image} has no tag"
        assert tag != "latest", f"{name}: {image} uses latest"


def test_depends_on_names_existing_services_and_waits_for_health(compose):
    services = compose["services"]
    for name, service in services.items():
        for dep, spec in (service.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            wanted = "service_completed_successfully" if dep in ONE_SHOT else "service_healthy"
            assert spec["condition"] == wanted, f"{name} -> {dep}"
            if wanted == "service_healthy":
                assert "healthcheck" in services[dep], f"{dep} has no healthcheck to wait for"


def test_long_running_services_have_healthchecks_and_restart_policies(compose):
    for name, service in compose["services"].items():
        if name in ONE_SHOT:
            assert service["restart"].startswith("on-failure"), name
            continue
        assert service.get("restart") in ("unless-stopped", "always"), name
        assert service.get("healthcheck", {}).get("test"), f"{name}: no healthcheck"


def test_state_lives_in_named_volumes(compose):
    declared = set(compose.get("volumes") or {})
    for name in ("temporal-db", "lanes-db"):
        mounts = compose["services"][name]["volumes"]
        assert any(m.split(":")[1] == "/var/lib/postgresql/data" and m.split(":")[0] in declared for m in mounts), name
    for name, service in compose["services"].items():
        for mount in service.get("volumes") or []:
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).is_file(), f"{name}: bind mount {source} does not exist"
            else:
                assert source in declared, f"{name}: volume {source} not declared"


def test_workers_are_replicated_and_share_the_workspace_volume(compose):
    worker = compose["services"]["worker"]
    assert int(worker["deploy"]["replicas"]) >= 2
    assert "container_name" not in worker, "replicas need generated container names"
    assert any(m.startswith("lanes-data:") for m in worker["volumes"])
    env = worker["environment"]
    assert env["LANES_WORKSPACE_ROOT"].startswith("/var/lib/lanes")


@pytest.mark.parametrize("service", LANES_SERVICES)
def test_lanes_services_read_every_setting(compose, service):
    env = compose["services"][service]["environment"]
    missing = [
        name for name in settings_env_names()
        if name not in env and not (name in FILE_SECRETS and f"{name}_FILE" in env)
    ]
    assert missing == []


@pytest.mark.parametrize("service", LANES_SERVICES)
def test_secrets_come_from_compose_secrets(raw, compose, service):
    svc = compose["services"][service]
    env = svc["environment"]
    mounted = set(svc.get("secrets") or [])
    assert mounted <= set(compose["secrets"]), "undeclared secret"
    for name in FILE_SECRETS:
        assert name not in env, f"{name} must not be a plain environment variable"
        path = env[f"{name}_FILE"]
        assert path.startswith("/run/secrets/") and path.rsplit("/", 1)[1] in mounted, path
    for secret in compose["secrets"].values():
        assert secret["file"].startswith("./secrets/")
    assert (DEPLOY / "secrets" / ".gitignore").read_text().splitlines()[-2:] == ["*", "!.gitignore"]


def test_shutdown_grace_fits_in_the_stop_grace_period(compose):
    for service in LANES_SERVICES:
        svc = compose["services"][service]
        grace = float(svc["environment"]["LANES_SHUTDOWN_GRACE_SECONDS"])
        stop = parse_duration(svc["stop_grace_period"])
        assert stop >= grace + 15, f"{service}: stop_grace_period {stop}s < shutdown grace {grace}s + 15s"


def test_lanes_healthchecks_match_the_role(compose):
    for service in LANES_SERVICES:
        svc = compose["services"][service]
        assert svc["healthcheck"]["test"] == ["CMD", "lanes-healthcheck", svc["command"][0]]


def test_temporal_uses_postgres_and_the_dynamic_config(compose):
    temporal = compose["services"]["temporal"]
    env = temporal["environment"]
    assert env["DB"] == "postgres12" and env["POSTGRES_SEEDS"] == "temporal-db"
    mount = next(m for m in temporal["volumes"] if m.startswith("./temporal/dynamicconfig.yaml:"))
    target = mount.split(":")[1]
    assert target == "/etc/temporal/" + env["DYNAMIC_CONFIG_FILE_PATH"]
    # the schema job and the server agree on the databases and the password
    schema = compose["services"]["temporal-schema"]["environment"]
    assert (schema["DBNAME"], schema["VISIBILITY_DBNAME"]) == (env["DBNAME"], env["VISIBILITY_DBNAME"])
    assert schema["SQL_PASSWORD"] == env["POSTGRES_PWD"] == compose["services"]["temporal-db"]["environment"][
        "POSTGRES_PASSWORD"]


def test_workers_use_the_namespace_compose_creates(compose):
    created = compose["services"]["temporal-namespace"]["environment"]["NAMESPACE"]
    for service in LANES_SERVICES:
        assert compose["services"][service]["environment"]["TEMPORAL_NAMESPACE"] == created


def test_lanes_database_is_separate_from_temporals(compose):
    lanes, temporal = compose["services"]["lanes-db"], compose["services"]["temporal-db"]
    assert lanes["volumes"] != temporal["volumes"]
    assert lanes["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/lanes_db_password"


def test_published_ports_bind_to_localhost_by_default(compose):
    for name, service in compose["services"].items():
        for port in service.get("ports") or []:
            assert str(port).startswith("127.0.0.1:"), f"{name}: {port}"
    assert not compose["services"]["lanes-db"].get("ports")
    assert not compose["services"]["temporal-db"].get("ports")


def test_dynamic_config_is_well_formed():
    config = load_yaml(DEPLOY / "temporal" / "dynamicconfig.yaml")
    assert isinstance(config, dict) and config
    for key, values in config.items():
        assert isinstance(key, str) and "." in key, key
        assert isinstance(values, list) and values, key
        for entry in values:
            assert set(entry) <= {"value", "constraints"} and "value" in entry, key
            assert set(entry.get("constraints") or {}) <= {"namespace", "taskQueueName", "taskType"}, key
    # what DESIGN.md §7 relies on
    assert config["limit.blobSize.error"][0]["value"] == 2 * 1024 * 1024
    assert config["limit.historyCount.suggestContinueAsNew"][0]["value"] == 4096
    assert config["history.maxInFlightUpdates"][0]["value"] == 10
    assert config["history.transferProcessorMaxPollRPS"][0]["value"] >= 100  # a turn's latency (above)

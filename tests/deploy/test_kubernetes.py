"""deploy/k8s: schemas, kustomizations, wiring, settings, shutdown grace, probes."""

from __future__ import annotations

import copy
import shutil
import subprocess

import pytest

from tests.deploy._support import (
    DEPLOY,
    FILE_SECRETS,
    K8S,
    load_yaml,
    load_yaml_docs,
    need_yaml_and_jsonschema,
    parse_dockerfile,
    parse_env_file,
    settings_env_names,
    validate_k8s,
    yaml,
)

need_yaml_and_jsonschema()

BASE = K8S / "base"
KEDA = K8S / "keda"
MANIFESTS = sorted(p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml")
SECRET_NAME = "context-lanes-secrets"
CONFIG_NAME = "context-lanes-config"


def _docs() -> list[tuple[str, dict]]:
    return [(f"{p.relative_to(K8S)}#{i}", d) for p in MANIFESTS for i, d in enumerate(load_yaml_docs(p))]


def _base_objects() -> dict[tuple[str, str], dict]:
    """The base as kustomize would emit it, minus name hashing: resources + generated ConfigMap."""
    kustomization = load_yaml(BASE / "kustomization.yaml")
    objects = {}
    for resource in kustomization["resources"]:
        for doc in load_yaml_docs(BASE / resource):
            objects[(doc["kind"], doc["metadata"]["name"])] = doc
    objects[("ConfigMap", CONFIG_NAME)] = generated_configmap()
    return objects


def generated_configmap() -> dict:
    kustomization = load_yaml(BASE / "kustomization.yaml")
    (generator,) = [g for g in kustomization["configMapGenerator"] if g["name"] == CONFIG_NAME]
    data: dict[str, str] = {}
    for env_file in generator["envs"]:
        data.update(parse_env_file(BASE / env_file))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIG_NAME}, "data": data}


def settings_env() -> dict[str, str]:
    return generated_configmap()["data"]


def _deployments() -> dict[str, dict]:
    return {name: obj for (kind, name), obj in _base_objects().items() if kind == "Deployment"}


def _container(deployment: dict) -> dict:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


# --- schemas --------------------------------------------------------------------------

@pytest.mark.parametrize("where,doc", _docs(), ids=[w for w, _ in _docs()])
def test_manifest_validates_against_its_schema(where, doc):
    assert validate_k8s(doc) == []


def test_generated_configmap_validates():
    assert validate_k8s(generated_configmap()) == []


def test_strict_schemas_reject_a_misspelt_field():
    deployment = copy.deepcopy(_deployments()["context-lanes-worker"])
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    deployment["spec"]["replicas"] = "two"
    errors = validate_k8s(deployment)
    assert any("livenesProbe" in e for e in errors) and any("replicas" in e for e in errors)


# --- kustomize --------------------------------------------------------------------------

def test_base_kustomization_lists_every_manifest():
    kustomization = load_yaml(BASE / "kustomization.yaml")
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert listed == on_disk
    for image in kustomization["images"]:
        assert image["newTag"] and image["newTag"] != "latest"


def test_keda_overlay_replaces_the_cpu_hpa():
    kustomization = load_yaml(KEDA / "kustomization.yaml")
    assert "../base" in kustomization["resources"]
    for resource in kustomization["resources"]:
        if resource != "../base":
            assert (KEDA / resource).is_file()
    (patch,) = kustomization["patches"]
    deleted = yaml.safe_load(patch["patch"])
    assert deleted["$patch"] == "delete" and deleted["kind"] == "HorizontalPodAutoscaler"
    assert ("HorizontalPodAutoscaler", deleted["metadata"]["name"]) in _base_objects()


kubectl = shutil.which("kubectl")


@pytest.mark.skipif(kubectl is None, reason="kubectl not installed: kustomize builds not checked")
@pytest.mark.parametrize("overlay", ["base", "keda"])
def test_kustomize_build_is_valid(overlay):
    out = subprocess.run([kubectl, "kustomize", str(K8S / overlay)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    kinds = sorted(d["kind"] for d in docs)
    for doc in docs:
        assert validate_k8s(doc) == [], doc["metadata"]["name"]
    assert kinds.count("Deployment") == 2 and "ConfigMap" in kinds
    assert ("HorizontalPodAutoscaler" in kinds) == (overlay == "base")
    assert ("ScaledObject" in kinds) == (overlay == "keda")
    # the generated ConfigMap's hashed name is what the Deployments reference
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        refs = [e["configMapRef"]["name"] for e in _container(dep)["envFrom"]]
        assert refs == [cm["metadata"]["name"]]
        assert _container(dep)["image"] == "context-lanes:0.1.0"


# --- wiring -----------------------------------------------------------------------------

def _labels_match(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_selectors_match_their_pods():
    objects = _base_objects()
    deployments = _deployments()
    for dep in deployments.values():
        assert _labels_match(dep["spec"]["selector"]["matchLabels"], dep["spec"]["template"]["metadata"]["labels"])
    for (kind, _name), obj in objects.items():
        if kind == "PodDisruptionBudget":
            sel = obj["spec"]["selector"]["matchLabels"]
            assert sum(_labels_match(sel, d["spec"]["template"]["metadata"]["labels"]) for d in deployments.values()) == 1
        if kind == "Service":
            sel = obj["spec"]["selector"]
            (target,) = [d for d in deployments.values() if _labels_match(sel, d["spec"]["template"]["metadata"]["labels"])]
            ports = {p["name"] for p in _container(target).get("ports", [])}
            assert all(p["targetPort"] in ports for p in obj["spec"]["ports"])


def test_autoscaled_deployments_leave_replicas_to_the_autoscaler():
    objects = _base_objects()
    scaled = {o["spec"]["scaleTargetRef"]["name"] for (k, _), o in objects.items() if k == "HorizontalPodAutoscaler"}
    keda = load_yaml(KEDA / "worker-scaledobject.yaml")
    scaled.add(keda["spec"]["scaleTargetRef"]["name"])
    deployments = _deployments()
    assert scaled <= set(deployments)
    for name in scaled:
        assert "replicas" not in deployments[name]["spec"], f"{name}: spec.replicas fights the autoscaler"
    hpa = objects[("HorizontalPodAutoscaler", "context-lanes-worker")]
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert hpa["spec"]["minReplicas"] >= 2


def test_worker_termination_grace_covers_the_shutdown_grace():
    grace = float(settings_env()["LANES_SHUTDOWN_GRACE_SECONDS"])
    model_timeout = float(settings_env()["LANES_MODEL_TIMEOUT_SECONDS"])
    worker = _deployments()["context-lanes-worker"]["spec"]["template"]["spec"]
    assert worker["terminationGracePeriodSeconds"] >= grace + 15
    # an in-flight model call (the expensive activity) may finish during a rollout
    assert grace >= model_timeout
    strategy = _deployments()["context-lanes-worker"]["spec"]["strategy"]["rollingUpdate"]
    assert strategy["maxUnavailable"] == 0


@pytest.mark.parametrize("name", ["context-lanes-worker", "context-lanes-api"])
def test_pods_get_every_setting(name):
    dep = _deployments()[name]
    container = _container(dep)
    keys: set[str] = set()
    for source in container.get("envFrom", []):
        assert source["configMapRef"]["name"] == CONFIG_NAME
        keys |= set(settings_env())
    env = {e["name"]: e for e in container.get("env", [])}
    keys |= set(env)
    assert sorted(set(settings_env_names()) - keys) == []
    for secret in FILE_SECRETS:
        ref = env[secret]["valueFrom"]["secretKeyRef"]
        assert ref["name"] == SECRET_NAME and ref["key"] == secret
        assert secret not in settings_env(), f"{secret} belongs in the Secret, not the ConfigMap"


def test_example_secret_holds_the_secret_settings():
    (secret,) = load_yaml_docs(K8S / "secret.example.yaml")
    assert secret["metadata"]["name"] == SECRET_NAME
    assert set(secret["stringData"]) == set(FILE_SECRETS)


@pytest.mark.parametrize("name", ["context-lanes-worker", "context-lanes-api"])
def test_pods_are_hardened_and_sized(name):
    dockerfile = parse_dockerfile(DEPLOY / "Dockerfile")
    uid = dockerfile.final.all("USER")[-1].args.split(":")[0]
    pod = _deployments()[name]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert str(pod["securityContext"]["runAsUser"]) == uid
    assert pod["automountServiceAccountToken"] is False
    pod_owner = _deployments()[name]
    container = _container(pod_owner)
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    res = container["resources"]
    assert {"cpu", "memory"} <= set(res["requests"]) and "memory" in res["limits"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/tmp", settings_env()["LANES_DATA_DIR"]} <= mounts, "read-only root needs writable dirs"
    assert pod_owner["spec"]["template"]["spec"]["serviceAccountName"] == "context-lanes"


def test_worker_mounts_the_shared_workspaces():
    pod = _deployments()["context-lanes-worker"]["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in _container(_deployments()["context-lanes-worker"])["volumeMounts"]}
    assert mounts["workspaces"] == settings_env()["LANES_WORKSPACE_ROOT"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "workspaces"]
    claim = _base_objects()[("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_probes_use_what_the_image_provides():
    dockerfile = parse_dockerfile(DEPLOY / "Dockerfile")
    installed = {ins.words()[-1].rsplit("/", 1)[-1] for ins in dockerfile.final.all("COPY")}
    worker = _container(_deployments()["context-lanes-worker"])
    for probe in ("startupProbe", "readinessProbe"):
        command = worker[probe]["exec"]["command"]
        assert command[0] in installed and command[1:] == ["worker"]
    api = _container(_deployments()["context-lanes-api"])
    ports = {p["name"]: p["containerPort"] for p in api["ports"]}
    assert ports["http"] == int(settings_env()["LANES_API_PORT"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert api[probe]["httpGet"] == {"path": "/healthz", "port": "http"}


def test_scaledobject_watches_the_workers_task_queue():
    scaled = load_yaml(KEDA / "worker-scaledobject.yaml")
    env = settings_env()
    (temporal,) = [t for t in scaled["spec"]["triggers"] if t["type"] == "temporal"]
    meta = temporal["metadata"]
    assert meta["endpoint"] == env["TEMPORAL_ADDRESS"]
    assert meta["namespace"] == env["TEMPORAL_NAMESPACE"]
    assert meta["taskQueue"] == env["LANES_TASK_QUEUE"]
    assert scaled["spec"]["minReplicaCount"] >= 1, "scale-to-zero would leave session updates waiting"

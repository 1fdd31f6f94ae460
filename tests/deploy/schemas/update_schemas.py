"""Refresh the JSON schemas that tests/deploy validates the deployment files against.

The tests run offline, so the schemas live in this folder. They come, unmodified
except for pruning, from two PyPI packages that bundle the official schemas:

- ``check-jsonschema`` (``check_jsonschema/builtin_schemas/vendor/compose-spec.json``):
  the Compose Specification schema (Apache-2.0, LICENSE.compose-spec here);
- ``kubernetes-validate`` (``kubernetes_validate/kubernetes-json-schema/vX.Y.Z-local-strict``):
  JSON schemas generated from the Kubernetes OpenAPI spec (Apache-2.0), "strict"
  flavour (``additionalProperties: false``, so a misspelt field fails). Only the kinds
  the manifests use are copied, and ``_definitions.json`` is pruned to the definitions
  those kinds reach (the full file is 1.4 MB).

``keda-scaledobject.json`` is NOT vendored: KEDA publishes no JSON schema in a PyPI
package, so it is a reduced schema written from the ScaledObject reference
(keda.sh/docs, "ScaledObject specification" and "Temporal" scaler) covering the fields
deploy/k8s/keda uses; this script leaves it alone.

Usage (network only for pip)::

    d=$(mktemp -d) && .venv/bin/pip download --no-deps -d "$d" check-jsonschema kubernetes-validate
    (cd "$d" && for w in *.whl; do python -m zipfile -e "$w" .; done)
    .venv/bin/python tests/deploy/schemas/update_schemas.py "$d" [--kubernetes v1.32.0]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
KUBERNETES_VERSION = "v1.32.0"
# (apiVersion, kind) -> file name in kubernetes-json-schema/<version>-local-strict/
KINDS = {
    ("v1", "ConfigMap"): "configmap-v1.json",
    ("v1", "Secret"): "secret-v1.json",
    ("v1", "Service"): "service-v1.json",
    ("v1", "ServiceAccount"): "serviceaccount-v1.json",
    ("v1", "PersistentVolumeClaim"): "persistentvolumeclaim-v1.json",
    ("apps/v1", "Deployment"): "deployment-apps-v1.json",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "horizontalpodautoscaler-autoscaling-v2.json",
    ("policy/v1", "PodDisruptionBudget"): "poddisruptionbudget-policy-v1.json",
}
REF = re.compile(r'"\$ref":\s*"[^"#]*#/\$defs/([^"]+)"')


def _refs(node: object) -> set[str]:
    return set(REF.findall(json.dumps(node)))


def prune_definitions(definitions: dict, roots: set[str]) -> dict:
    defs = definitions["$defs"]
    keep: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        todo.extend(_refs(defs[name]) - keep)
    return {**{k: v for k, v in definitions.items() if k != "$defs"}, "$defs": {k: defs[k] for k in sorted(keep)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("unpacked", type=Path, help="folder with check_jsonschema/ and kubernetes_validate/")
    parser.add_argument("--kubernetes", default=KUBERNETES_VERSION)
    args = parser.parse_args(argv)

    vendor = args.unpacked / "check_jsonschema" / "builtin_schemas" / "vendor"
    shutil.copyfile(vendor / "compose-spec.json", HERE / "compose-spec.json")
    shutil.copyfile(vendor / "licenses" / "LICENSE.compose-spec", HERE / "LICENSE.compose-spec")

    source = args.unpacked / "kubernetes_validate" / "kubernetes-json-schema" / f"{args.kubernetes}-local-strict"
    target = HERE / "kubernetes" / f"{args.kubernetes}-strict"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    roots: set[str] = set()
    for name in KINDS.values():
        schema = json.loads((source / name).read_text())
        roots |= _refs(schema)
        (target / name).write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
    definitions = prune_definitions(json.loads((source / "_definitions.json").read_text()), roots)
    (target / "_definitions.json").write_text(json.dumps(definitions, indent=1, sort_keys=True) + "\n")
    (target / "kinds.json").write_text(json.dumps(
        [{"apiVersion": a, "kind": k, "schema": f} for (a, k), f in sorted(KINDS.items())], indent=1) + "\n")
    print(f"compose-spec.json, {len(KINDS)} Kubernetes {args.kubernetes} kinds, "
          f"{len(definitions['$defs'])} definitions -> {HERE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

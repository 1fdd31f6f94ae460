"""Helpers shared by the static deployment tests: file locations, YAML loading,
schema validation, compose interpolation, a small Dockerfile parser, settings names."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

try:  # test-only dependencies: modules that need them call need_yaml_and_jsonschema()
    import jsonschema
    import yaml
    from referencing import Registry, Resource  # a jsonschema dependency
except ImportError:  # pragma: no cover
    jsonschema = yaml = Registry = Resource = None  # type: ignore[assignment,misc]


def need_yaml_and_jsonschema() -> None:
    """Skip the calling test module when PyYAML or jsonschema is missing."""
    pytest.importorskip("yaml", reason="PyYAML is needed for tests/deploy (add it to the `test` extra)")
    pytest.importorskip("jsonschema", reason="jsonschema is needed for tests/deploy (add it to the `test` extra)")

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCHEMAS = Path(__file__).resolve().parent / "schemas"
K8S = DEPLOY / "k8s"
K8S_SCHEMAS = SCHEMAS / "kubernetes" / "v1.32.0-strict"

# Secrets may arrive as NAME or as NAME_FILE (deploy/docker-entrypoint.sh exports NAME).
FILE_SECRETS = ("OPENAI_API_KEY", "DATABASE_URL")


# --- settings -------------------------------------------------------------------------

@lru_cache(maxsize=1)
def settings_env_names() -> tuple[str, ...]:
    """Every environment variable ``worker.settings.Settings`` reads: per field, the
    upper-case choice of its validation alias (else the field name, as pydantic-settings
    would read it)."""
    from pydantic import AliasChoices

    from worker.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "") or ""
    names: list[str] = []
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias] if alias else []
        env = [c for c in choices if isinstance(c, str) and c == c.upper()]
        names.append(env[0] if env else (prefix + (info.alias or name)).upper())
    return tuple(names)


def cli_commands() -> dict[str, tuple[str, str]]:
    from worker.cli import COMMANDS

    return COMMANDS


# --- YAML and schemas -------------------------------------------------------------------

def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_yaml_docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def validate(instance: Any, schema: dict, registry: Registry | None = None) -> list[str]:
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, registry=registry) if registry is not None else cls(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:300]}" for e in errors]


@lru_cache(maxsize=1)
def compose_schema() -> dict:
    return json.loads((SCHEMAS / "compose-spec.json").read_text())


@lru_cache(maxsize=1)
def kubernetes_registry() -> tuple[Registry, dict[tuple[str, str], dict]]:
    kinds = json.loads((K8S_SCHEMAS / "kinds.json").read_text())
    definitions = json.loads((K8S_SCHEMAS / "_definitions.json").read_text())
    resources = [(definitions["$id"], Resource.from_contents(definitions))]
    schemas = {}
    for entry in kinds:
        schema = json.loads((K8S_SCHEMAS / entry["schema"]).read_text())
        schemas[(entry["apiVersion"], entry["kind"])] = schema
        resources.append((schema["$id"], Resource.from_contents(schema)))
    keda = json.loads((SCHEMAS / "keda-scaledobject.json").read_text())
    schemas[("keda.sh/v1alpha1", "ScaledObject")] = keda
    return Registry().with_resources(resources), schemas


def validate_k8s(doc: dict) -> list[str]:
    registry, schemas = kubernetes_registry()
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key not in schemas:
        return [f"no schema for {key} (add it to tests/deploy/schemas/update_schemas.py KINDS)"]
    return validate(doc, schemas[key], registry)


# --- compose ----------------------------------------------------------------------------

_VAR = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


def compose_variables(value: Any) -> dict[str, str | None]:
    """Variables referenced by ``${...}`` in every string of ``value``: name -> default
    (the text after ``:-``/``-``; None without one)."""
    found: dict[str, str | None] = {}
    for text in _strings(value):
        for m in _VAR.finditer(text):
            name = m.group("braced") or m.group("named")
            if not name:
                continue
            default = m.group("arg") if m.group("op") in (":-", "-") else None
            if found.get(name) is None:
                found[name] = default
    return found


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose-style interpolation of every string in ``value`` (keys are left alone)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group("escaped"):
            return "$"
        name = m.group("braced") or m.group("named")
        op, arg = m.group("op"), m.group("arg") or ""
        current = env.get(name)
        if op == ":-":
            return current if current else arg
        if op == "-":
            return current if current is not None else arg
        if op in (":?", "?"):
            if current is None or (op == ":?" and not current):
                raise KeyError(f"required variable {name} is not set: {arg}")
            return current
        if op in (":+", "+"):
            return arg if (current if op == ":+" else current is not None) else ""
        return current or ""

    return _VAR.sub(sub, value)


def _strings(value: Any):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def parse_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (``#`` comments, blank lines skipped), as compose/kustomize read them."""
    out: dict[str, str] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path}:{lineno}: not KEY=VALUE: {line!r}"
        assert key not in out, f"{path}:{lineno}: {key} set twice"
        out[key.strip()] = value.strip()
    return out


def parse_duration(text: str | int | float) -> float:
    """Compose/Go duration (``1m30s``, ``150s``, ``500ms``) or a number of seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text)
    if not parts or "".join(a + b for a, b in parts) != text.strip():
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


# --- Dockerfile -------------------------------------------------------------------------

@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    def exec_form(self) -> list[str] | None:
        text = self.args.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                return None
            return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None
        return None

    def flags(self) -> dict[str, str]:
        out = {}
        for token in shlex.split(self.args):
            if not token.startswith("--"):
                break
            key, _, value = token[2:].partition("=")
            out[key] = value
        return out

    def words(self) -> list[str]:
        """Arguments after the ``--flag=...`` options (shell form, shlex-split)."""
        tokens = shlex.split(self.args)
        while tokens and tokens[0].startswith("--"):
            tokens.pop(0)
        return tokens


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


@dataclass
class Dockerfile:
    global_args: dict[str, str]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def resolve(self, text: str, stage: Stage | None = None) -> str:
        args = dict(self.global_args)
        if stage is not None:
            for ins in stage.all("ARG"):
                key, _, value = ins.args.partition("=")
                args.setdefault(key.strip(), value.strip().strip('"'))
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), text)


def parse_dockerfile(path: Path) -> Dockerfile:
    logical: list[tuple[int, str]] = []
    buf, start, heredoc = "", 0, None
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.rstrip()
        if heredoc is not None:  # RUN <<EOF ... EOF: keep the body as part of the instruction
            buf += "\n" + line
            if line.strip() == heredoc:
                logical.append((start, buf))
                buf, heredoc = "", None
            continue
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # comment lines inside a continuation are dropped, as by Docker
        if not buf:
            start = lineno
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        m = re.search(r"<<-?['\"]?(\w+)['\"]?\s*$", buf)
        if m and buf.split(None, 1)[0].upper() in ("RUN", "COPY"):
            heredoc = m.group(1)
            continue
        logical.append((start, buf))
        buf = ""
    if buf:
        logical.append((start, buf))

    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for lineno, text in logical:
        keyword, _, args = text.strip().partition(" ")
        ins = Instruction(keyword.upper(), args.strip(), lineno)
        if ins.keyword == "FROM":
            words = [w for w in ins.args.split() if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name))
        elif not stages:
            if ins.keyword == "ARG":
                key, _, value = ins.args.partition("=")
                global_args[key.strip()] = value.strip().strip('"')
        else:
            stages[-1].instructions.append(ins)
    return Dockerfile(global_args, stages)


def image_tag(image: str) -> tuple[str, str | None, str | None]:
    """(name, tag, digest) of an image reference."""
    digest = None
    if "@" in image:
        image, digest = image.split("@", 1)
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = image.rsplit(":", 1)
        return name, tag, digest
    return image, None, digest

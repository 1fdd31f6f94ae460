"""Process settings, read once from the environment.

Every process (worker, API, CLI, local stack) reads the same variables::

    TEMPORAL_ADDRESS              127.0.0.1:7233
    TEMPORAL_NAMESPACE            default
    LANES_TASK_QUEUE              context-lanes
    DATABASE_URL                  (unset: the local stack starts an embedded PostgreSQL)
    OPENAI_BASE_URL               (unset: the provider's default)
    OPENAI_API_KEY                (secret; never logged, never in workflow history)
    LANES_MODEL                   gpt-4o-mini
    LANES_CONDENSER_MODEL         (unset: same as LANES_MODEL)
    LANES_CONTEXT_WINDOW          128000
    LANES_MAX_OUTPUT_TOKENS       4096
    LANES_MODEL_TIMEOUT_SECONDS   120 (one model call)
    LANES_SHUTDOWN_GRACE_SECONDS  30 (in-flight activities on worker shutdown)
    LANES_STORE_OUTAGE_SECONDS    240 (one activity attempt waits this long for PostgreSQL)
    LANES_DATA_DIR                ./.lanes
    LANES_API_HOST                127.0.0.1
    LANES_API_PORT                8000
    LANES_WORKSPACE_ROOT          (unset: <LANES_DATA_DIR>/workspaces)
    LANES_UNSAFE_NO_SANDBOX       0 (1: bash runs unconfined where bubblewrap cannot run)
    LANES_REPLAY_ROOTS            (unset: ../shared/data/trajectories) folders of recordings replays may name
    LANES_REPLAY_MODEL_URLS       (unset: loopback only) model URL prefixes replay sessions may name
    LANES_PRICES                  (unset: no cost) model prices per million tokens, JSON or a JSON file's path:
                                  {"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
                                   "claude-*": {...}, "*": {...}}
    OTEL_TRACES_EXPORTER          (unset or none: no tracing) otlp, console, ...: OpenTelemetry traces of workflows and
                                  activities (worker/tracing.py; the SDK reads the other OTEL_* variables)

Settings are for processes, not for workflows: never pass a ``Settings`` object
to a workflow or activity. (If one slips through, ``OPENAI_API_KEY`` is a
``SecretStr`` and serialises as ``**********``.)
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from activities.store import REDACTED, redact_url
from recordings import DEFAULT_TRAJECTORY_ROOT
from workflows.context import ModelPrice
from workflows.contract.session import DEFAULT_MAX_OUTPUT_TOKENS

_URL_FIELDS = ("database_url", "openai_base_url")


def _env(name: str) -> AliasChoices:
    # accept the environment name and the field name (Settings(model="x"))
    return AliasChoices(name, name.lower())


class TenantUpstreams(BaseModel):
    """One tenant's own gateway upstreams (``LANES_GATEWAY_TENANT_UPSTREAMS``): each unset field
    falls back to the deployment's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    openai_base_url: str | None = None
    openai_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    anthropic_api_key: SecretStr | None = None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        case_sensitive=False,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
    )

    temporal_address: str = Field("127.0.0.1:7233", validation_alias=_env("TEMPORAL_ADDRESS"))
    temporal_namespace: str = Field("default", validation_alias=_env("TEMPORAL_NAMESPACE"))
    task_queue: str = Field("context-lanes", validation_alias=_env("LANES_TASK_QUEUE"))

    database_url: str | None = Field(None, validation_alias=_env("DATABASE_URL"))

    openai_base_url: str | None = Field(None, validation_alias=_env("OPENAI_BASE_URL"))
    openai_api_key: SecretStr | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))
    model: str = Field("gpt-4o-mini", min_length=1, validation_alias=_env("LANES_MODEL"))
    # unset means "same as model"; resolved below
    condenser_model: str = Field("", validation_alias=_env("LANES_CONDENSER_MODEL"))
    context_window: int = Field(128_000, gt=0, validation_alias=_env("LANES_CONTEXT_WINDOW"))
    max_output_tokens: int = Field(DEFAULT_MAX_OUTPUT_TOKENS, gt=0, validation_alias=_env("LANES_MAX_OUTPUT_TOKENS"))
    model_timeout_seconds: float = Field(120.0, gt=0, validation_alias=_env("LANES_MODEL_TIMEOUT_SECONDS"))
    # How long a worker's activity waits out a PostgreSQL outage (heartbeating) before the
    # attempt fails and Temporal retries it; below the model and tool activities' 300 s.
    store_outage_seconds: float = Field(240.0, gt=0, validation_alias=_env("LANES_STORE_OUTAGE_SECONDS"))
    # how long a stopping worker lets in-flight activities finish
    shutdown_grace_seconds: float = Field(30.0, ge=0, validation_alias=_env("LANES_SHUTDOWN_GRACE_SECONDS"))
    # What one worker process takes on at once (deploy/README.md §6 gives the figures behind
    # each default): workflow tasks it runs, activities (model calls, tools, stores) in
    # flight, sessions whose state it keeps in memory between turns, and connections to
    # PostgreSQL (each worker and API process has a pool of its own).
    max_concurrent_workflow_tasks: int = Field(100, ge=1, validation_alias=_env("LANES_MAX_CONCURRENT_WORKFLOW_TASKS"))
    max_concurrent_activities: int = Field(200, ge=1, validation_alias=_env("LANES_MAX_CONCURRENT_ACTIVITIES"))
    max_cached_workflows: int = Field(1000, ge=0, validation_alias=_env("LANES_MAX_CACHED_WORKFLOWS"))
    db_pool_size: int = Field(10, ge=1, validation_alias=_env("LANES_DB_POOL_SIZE"))

    data_dir: Path = Field(default_factory=lambda: Path.cwd() / ".lanes",
                           validation_alias=_env("LANES_DATA_DIR"))
    api_host: str = Field("127.0.0.1", validation_alias=_env("LANES_API_HOST"))
    api_port: int = Field(8000, ge=1, le=65535, validation_alias=_env("LANES_API_PORT"))
    # unset means "<data_dir>/workspaces"; resolved below (never None afterwards)
    workspace_root: Path | None = Field(None, validation_alias=_env("LANES_WORKSPACE_ROOT"))
    # What one session's workspace may take on disk: a write_file past it is refused, a bash
    # command growing it past it is stopped (activities/workspace.py).
    workspace_quota_bytes: int = Field(1 << 30, gt=0, validation_alias=_env("LANES_WORKSPACE_QUOTA_BYTES"))
    # Replay sessions (dev servers with LANES_API_ALLOW_REPLAY=1): the folders their recordings
    # must lie under (os.pathsep-separated), and the model URLs they may name (comma-separated
    # prefixes; empty: loopback addresses only).
    replay_roots: Annotated[list[Path], NoDecode] = Field(default_factory=lambda: [DEFAULT_TRAJECTORY_ROOT],
                                                          validation_alias=_env("LANES_REPLAY_ROOTS"))
    replay_model_urls: Annotated[list[str], NoDecode] = Field(default_factory=list,
                                                              validation_alias=_env("LANES_REPLAY_MODEL_URLS"))
    # Run the bash tool unconfined when bubblewrap cannot run here. Unsafe: the model's
    # commands then see the worker's files, network and processes (deploy/README.md).
    unsafe_no_sandbox: bool = Field(False, validation_alias=_env("LANES_UNSAFE_NO_SANDBOX"))
    # Prices per million tokens by model name (exact, then the longest "prefix*", then "*"):
    # every model call's provider-reported usage is costed with them (cost units).
    prices: Annotated[dict[str, ModelPrice], NoDecode] = Field(default_factory=dict,
                                                               validation_alias=_env("LANES_PRICES"))
    # The gateway's upstreams (issue 25): where an agent's Chat Completions and Messages calls
    # go after Lanes bounded them, with the deployment's key (never stored in history). Unset:
    # that protocol's gateway answers 503. The OpenAI one defaults to OPENAI_BASE_URL/KEY.
    gateway_openai_base_url: str | None = Field(None, validation_alias=_env("LANES_GATEWAY_OPENAI_BASE_URL"))
    gateway_openai_api_key: SecretStr | None = Field(None, validation_alias=_env("LANES_GATEWAY_OPENAI_API_KEY"))
    gateway_anthropic_base_url: str | None = Field(None, validation_alias=_env("LANES_GATEWAY_ANTHROPIC_BASE_URL"))
    gateway_anthropic_api_key: SecretStr | None = Field(None,
                                                        validation_alias=_env("LANES_GATEWAY_ANTHROPIC_API_KEY"))
    # The budget of a session the gateway opens (None: the model's window, as for any session);
    # an agent can set its own with the X-Lanes-Budget-Tokens header on its first call.
    gateway_budget_tokens: int | None = Field(None, ge=256, validation_alias=_env("LANES_GATEWAY_BUDGET_TOKENS"))
    # A conversation's next call sent upstream before its session stores its turns, when they
    # continue the plan made after the last answer (worker/api/gateway/continuation.py); off:
    # every call takes a workflow update before its upstream call, and answers are appended a
    # moment later, with the next call's turns when it comes within that moment.
    gateway_continue: bool = Field(True, validation_alias=_env("LANES_GATEWAY_CONTINUE"))
    # How often each API process stores the gateway answers left outside their sessions (the
    # process that answered died before its background write), and how old such a row must be.
    gateway_sweep_seconds: float = Field(15.0, gt=0, validation_alias=_env("LANES_GATEWAY_SWEEP_SECONDS"))
    # Per tenant: JSON (or a JSON file's path) {"tenant": {"openai_base_url": ..., "openai_api_key": ...,
    # "anthropic_base_url": ..., "anthropic_api_key": ...}}; a tenant's unset fields are the above.
    gateway_tenant_upstreams: Annotated[dict[str, TenantUpstreams], NoDecode] = Field(
        default_factory=dict, validation_alias=_env("LANES_GATEWAY_TENANT_UPSTREAMS"))
    # OpenTelemetry span exporters (the standard variable, comma-separated): empty or "none" is
    # no tracing; otherwise worker/tracing.py traces workflows and activities (the `tracing` extra).
    traces_exporter: Annotated[list[str], NoDecode] = Field(default_factory=list,
                                                            validation_alias=_env("OTEL_TRACES_EXPORTER"))

    @field_validator("prices", "gateway_tenant_upstreams", mode="before")
    @classmethod
    def _prices(cls, value: Any) -> Any:
        """JSON text, or the path of a JSON file."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if not text.startswith("{"):
            text = Path(text).expanduser().read_text()
        return json.loads(text)

    @field_validator("replay_model_urls", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value

    @field_validator("traces_exporter", mode="before")
    @classmethod
    def _exporter_names(cls, value: Any) -> Any:
        names = [part.strip().lower() for part in value.split(",")] if isinstance(value, str) else value
        return [name for name in names if name and name != "none"] if isinstance(names, list) else names

    @field_validator("replay_roots", mode="before")
    @classmethod
    def _path_list(cls, value: Any) -> Any:
        return [part for part in value.split(os.pathsep) if part.strip()] if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _empty_is_unset(cls, data: Any) -> Any:
        # `export OPENAI_API_KEY=` should mean "unset", not "the empty key"
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (isinstance(v, str) and v.strip() == "")}
        return data

    @model_validator(mode="after")
    def _resolve(self) -> Settings:
        data_dir = self.data_dir.expanduser()
        if not data_dir.is_absolute():
            data_dir = Path.cwd() / data_dir
        workspace_root = self.workspace_root
        workspace_root = data_dir / "workspaces" if workspace_root is None else workspace_root.expanduser()
        if not workspace_root.is_absolute():
            workspace_root = Path.cwd() / workspace_root
        # frozen model: assign through object.__setattr__
        object.__setattr__(self, "data_dir", data_dir)
        object.__setattr__(self, "workspace_root", workspace_root)
        if not self.condenser_model:
            object.__setattr__(self, "condenser_model", self.model)
        return self

    def __repr_args__(self):  # keep passwords in URLs out of reprs and tracebacks
        for name, value in super().__repr_args__():
            yield name, redact_url(value) if name in _URL_FIELDS else value

    def model_endpoint(self) -> str | None:
        """Where hosted sessions' model calls go (secrets masked), or None when nothing is
        configured (neither OPENAI_BASE_URL nor OPENAI_API_KEY)."""
        if self.openai_base_url:
            return redact_url(self.openai_base_url)
        return "the OpenAI API (OPENAI_API_KEY set, no OPENAI_BASE_URL)" if self.openai_api_key else None

    def model_banner(self) -> str:
        """One line for a process starting up: which model endpoint it uses, or that none is set."""
        endpoint = self.model_endpoint()
        if endpoint is None:
            return ("no model endpoint: OPENAI_BASE_URL and OPENAI_API_KEY are unset, so hosted sessions are refused "
                    "(external sessions and replays work)")
        return f"{self.model} at {endpoint}"

    def api_key(self) -> str | None:
        """The OpenAI API key in clear text, for the model client only."""
        return self.openai_api_key.get_secret_value() if self.openai_api_key else None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once; ``get_settings.cache_clear()`` to re-read)."""
    return Settings()


def redacted(settings: Settings | None = None) -> dict[str, Any]:
    """Settings as a JSON-safe dict that is safe to print or log (secrets masked)."""
    settings = settings or get_settings()
    out = settings.model_dump(mode="json")
    out["openai_api_key"] = REDACTED if settings.openai_api_key else None
    for name in _URL_FIELDS:
        out[name] = redact_url(out[name])
    return out

"""Settings: environment names, defaults, derived paths, secrets kept out of output."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.settings import Settings, get_settings, redact_url, redacted

ENV_NAMES = ["TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "LANES_TASK_QUEUE", "DATABASE_URL", "OPENAI_BASE_URL",
             "OPENAI_API_KEY", "LANES_MODEL", "LANES_CONDENSER_MODEL", "LANES_CONTEXT_WINDOW",
             "LANES_MAX_OUTPUT_TOKENS", "LANES_DATA_DIR", "LANES_API_HOST", "LANES_API_PORT", "LANES_WORKSPACE_ROOT"]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_defaults(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    s = Settings()
    assert (s.temporal_address, s.temporal_namespace, s.task_queue) == ("127.0.0.1:7233", "default", "context-lanes")
    assert s.database_url is None and s.openai_api_key is None and s.openai_base_url is None
    assert (s.model, s.condenser_model) == ("gpt-4o-mini", "gpt-4o-mini")
    assert (s.context_window, s.max_output_tokens) == (128_000, 4096)
    assert s.data_dir == tmp_path / ".lanes"
    assert s.workspace_root == tmp_path / ".lanes" / "workspaces"
    assert (s.api_host, s.api_port) == ("127.0.0.1", 8000)


def test_environment(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("LANES_TASK_QUEUE", "q")
    clean_env.setenv("LANES_MODEL", "m")
    clean_env.setenv("LANES_CONTEXT_WINDOW", "32000")
    clean_env.setenv("LANES_DATA_DIR", "data")
    clean_env.setenv("LANES_API_PORT", "9001")
    clean_env.setenv("OPENAI_API_KEY", "")  # empty means unset
    s = Settings()
    assert (s.task_queue, s.model, s.condenser_model, s.context_window, s.api_port) == ("q", "m", "m", 32000, 9001)
    assert s.data_dir == tmp_path / "data" and s.workspace_root == tmp_path / "data" / "workspaces"
    assert s.openai_api_key is None
    clean_env.setenv("LANES_API_PORT", "0")
    with pytest.raises(ValueError):
        Settings()


def test_secrets_never_printed(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-very-secret")
    clean_env.setenv("DATABASE_URL", "postgresql://lanes:hunter2@db:5432/lanes")
    s = Settings()
    assert s.api_key() == "sk-very-secret"
    assert s.database_url == "postgresql://lanes:hunter2@db:5432/lanes"
    for text in (repr(s), str(s), str(redacted(s))):
        assert "sk-very-secret" not in text and "hunter2" not in text
    assert "sk-very-secret" not in s.model_dump_json()  # even if a Settings ends up serialised
    assert redacted(s)["database_url"] == "postgresql://lanes:**********@db:5432/lanes"


def test_get_settings_is_cached(clean_env: pytest.MonkeyPatch) -> None:
    get_settings.cache_clear()
    try:
        assert get_settings() is get_settings()
    finally:
        get_settings.cache_clear()


def test_redact_url_keeps_socket_dsns() -> None:
    dsn = "postgresql://postgres@/lanes?host=/tmp/a b/postgres&port=5432"
    assert redact_url(dsn) == dsn
    assert "zz" not in str(redact_url("postgresql://u@h/db?password=zz"))

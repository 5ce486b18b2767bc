"""One typed settings object: bad values fail at start with one line naming the variable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent.settings import DEV_API_SECRET, Settings, SettingsError, get_settings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LEXVOZ_MCP_TIMEOUT_S", "-1"),
        ("LEXVOZ_MCP_URL", "not a url"),
        ("LIVEKIT_URL", "ftp://x"),
        ("LEXVOZ_TOKEN_TTL_S", "3600"),
        ("LEXVOZ_SEARCHES_PER_MINUTE", "zero"),
    ],
)
def test_invalid_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as info:
        get_settings()
    message = str(info.value)
    assert variable in message and "\n" not in message


def test_secrets_never_show_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("LEXVOZ_MCP_TOKEN", "mcp-very-secret")
    monkeypatch.setenv("LIVEKIT_API_SECRET", "lk-very-secret-0123456789abcdef0123")
    s = get_settings()
    text = repr(s) + str(s) + s.model_dump_json()
    assert "very-secret" not in text
    assert s.openai_api_key is not None and s.openai_api_key.get_secret_value() == "sk-very-secret"


def test_empty_values_mean_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    monkeypatch.setenv("LEXVOZ_MCP_TOKEN", " ")
    s = Settings()
    assert s.openai_api_key is None and s.mcp_token is None


def test_defaults_match_the_documented_ones() -> None:
    """Every setting with a default shows that default in .env.example (a commented line keeps it)."""
    documented = dict(re.findall(r"(?m)^# ([A-Z][A-Z0-9_]+)=(.*)$", (ROOT / ".env.example").read_text()))
    defaults = Settings()
    checked = 0
    for name, field in Settings.model_fields.items():
        alias = field.alias
        default = getattr(defaults, name)
        if alias is None or default is None or alias not in documented:
            continue
        parsed = getattr(Settings(**{alias: documented[alias]}), name)
        assert parsed == default, f"{alias}: .env.example says {documented[alias]!r}, the code defaults to {default!r}"
        checked += 1
    assert checked >= 15


def _import_worker(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LEXVOZ_", "LIVEKIT_"))}
    return subprocess.run(
        [sys.executable, "-c", "import agent.worker"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_worker_without_openai_key_fails_at_start_with_one_line() -> None:
    proc = _import_worker({})
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [lines[-1]] and "OPENAI_API_KEY" in lines[-1]


def test_worker_with_a_bad_setting_fails_naming_it() -> None:
    proc = _import_worker({"OPENAI_API_KEY": "x", "LEXVOZ_BREAKER_FAILURES": "0"})
    assert proc.returncode == 2
    assert "LEXVOZ_BREAKER_FAILURES" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("LIVEKIT_URL", "ws://livekit:7880"),
        ("LIVEKIT_URL", "wss://lk.example.org"),
        ("LEXVOZ_PUBLIC_LIVEKIT_URL", "wss://lk.example.org"),
        ("LEXVOZ_PUBLIC_LIVEKIT_URL", "ws://192.168.1.20:7880"),
    ],
)
def test_development_secret_is_refused_beyond_loopback(
    monkeypatch: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    """The published pair is fine on this machine only: any non-loopback URL in use refuses to start."""
    monkeypatch.setenv(variable, url)
    with pytest.raises(SettingsError) as info:
        get_settings()
    message = str(info.value)
    assert "\n" not in message
    for name in ("LIVEKIT_API_KEY", "LIVEKIT_API_SECRET", "LIVEKIT_URL", "LEXVOZ_PUBLIC_LIVEKIT_URL"):
        assert name in message
    assert DEV_API_SECRET not in message


@pytest.mark.parametrize("url", ["ws://127.0.0.1:7880", "ws://localhost:7880", "ws://[::1]:7880", "ws://127.0.0.5:1"])
def test_development_secret_is_allowed_on_loopback(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("LIVEKIT_URL", url)
    monkeypatch.setenv("LEXVOZ_PUBLIC_LIVEKIT_URL", url)
    assert get_settings().livekit_url == url


def test_a_generated_secret_works_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVEKIT_URL", "wss://lk.example.org")
    monkeypatch.setenv("LIVEKIT_API_KEY", "lkprod")
    monkeypatch.setenv("LIVEKIT_API_SECRET", "a-generated-secret-of-more-than-32-characters")
    assert get_settings().livekit_url == "wss://lk.example.org"


@pytest.mark.parametrize("value", ["lexvoz.example.org", "https://x.example/path", "ftp://x.example"])
def test_allowed_origins_must_be_origins(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("LEXVOZ_ALLOWED_ORIGINS", value)
    with pytest.raises(SettingsError, match="LEXVOZ_ALLOWED_ORIGINS"):
        get_settings()


def test_the_job_limit_follows_the_hosts_cores_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # bench/load.py: a talking conversation costs the worker about a fifth of a core, with livekit-server and the
    # search server often on the same host; a fixed default either idles a big host or starves a small one.
    monkeypatch.setattr("agent.settings.os.cpu_count", lambda: 8)
    assert Settings().max_jobs == 16
    assert Settings(LEXVOZ_MAX_JOBS="").max_jobs == 16
    assert Settings(LEXVOZ_MAX_JOBS="3").max_jobs == 3

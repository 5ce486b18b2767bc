"""`python -m agent doctor`, the checks that need no LiveKit server: each broken setting fails with a fix.

The checks that do (LiveKit, dispatch, MCP) run against a live stack in tests/e2e/test_doctor_e2e.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.doctor import (
    CheckFailed,
    check_ledger,
    check_openai,
    check_page,
    check_resume_store,
    render,
    run_checks,
)
from agent.settings import Settings, SettingsError
from tests.e2e.conftest import free_port
from tests.fake_realtime_endpoint import FakeRealtimeEndpoint

KEY = "sk-proj-doctor-secret-0123456789"


def settings(**overrides: Any) -> Settings:
    return Settings(**{"OPENAI_API_KEY": KEY, "LEXVOZ_REHEARSAL": False, **overrides})


@pytest.fixture
async def endpoint() -> AsyncIterator[FakeRealtimeEndpoint]:
    async with FakeRealtimeEndpoint() as e:
        yield e


async def test_openai_key_and_model_accepted(endpoint: FakeRealtimeEndpoint) -> None:
    detail = await check_openai(settings(OPENAI_BASE_URL=endpoint.base_url))
    assert "accepted the key" in detail and KEY not in detail


@pytest.mark.parametrize(
    ("status", "setting"),
    [(401, "OPENAI_API_KEY"), (403, "OPENAI_API_KEY"), (429, "OPENAI_API_KEY")],
)
async def test_openai_refusals_name_the_setting(endpoint: FakeRealtimeEndpoint, status: int, setting: str) -> None:
    endpoint.refuse = status
    with pytest.raises(CheckFailed) as info:
        await check_openai(settings(OPENAI_BASE_URL=endpoint.base_url))
    assert f"HTTP {status}" in info.value.detail and setting in info.value.fix
    assert KEY not in info.value.detail + info.value.fix


async def test_unknown_model_names_the_model_setting(endpoint: FakeRealtimeEndpoint) -> None:
    with pytest.raises(CheckFailed) as info:
        await check_openai(settings(OPENAI_BASE_URL=endpoint.base_url, LEXVOZ_REALTIME_MODEL="gpt-typo"))
    assert "HTTP 404" in info.value.detail and "LEXVOZ_REALTIME_MODEL" in info.value.fix


async def test_unreachable_openai_names_the_base_url() -> None:
    with pytest.raises(CheckFailed) as info:
        await check_openai(settings(OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1"))
    assert "OPENAI_BASE_URL" in info.value.fix


async def test_rehearsal_mode_skips_the_key_check() -> None:
    results = await run_checks(lambda: settings(LEXVOZ_REHEARSAL=True, LIVEKIT_URL=f"ws://127.0.0.1:{free_port()}"))
    assert next(r for r in results if r.name == "openai").status == "skip"


async def test_unwritable_ledger_fails(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(CheckFailed) as info:
        await check_ledger(settings(LEXVOZ_LEDGER_PATH=blocked / "ledger.sqlite3"))  # parent is a file
    assert "LEXVOZ_LEDGER_PATH" in info.value.fix
    assert "writable" in await check_ledger(settings(LEXVOZ_LEDGER_PATH=tmp_path / "ok" / "ledger.sqlite3"))


async def test_missing_page_build_fails(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed) as info:
        await check_page(settings(LEXVOZ_WEB_DIST=tmp_path))
    assert "make web" in info.value.fix
    (tmp_path / "index.html").write_text("<!doctype html>")
    assert "exists" in await check_page(settings(LEXVOZ_WEB_DIST=tmp_path))


async def test_settings_that_do_not_load_stop_the_table_at_one_line() -> None:
    def broken() -> Settings:
        raise SettingsError("invalid setting LEXVOZ_MAX_JOBS: Input should be a valid integer")

    results = await run_checks(broken)
    assert [(r.name, r.status) for r in results] == [("settings", "fail")]
    assert "LEXVOZ_MAX_JOBS" in render(results)


async def test_resume_store_that_cannot_record_fails_with_the_setting_to_change(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(CheckFailed) as info:
        await check_resume_store(settings(LEXVOZ_SPENT_TOKENS_PATH=blocked / "spent.sqlite3"))  # parent is a file
    assert "LEXVOZ_SPENT_TOKENS_PATH" in info.value.fix
    assert "kept in" in await check_resume_store(settings(LEXVOZ_SPENT_TOKENS_PATH=tmp_path / "ok" / "spent.sqlite3"))

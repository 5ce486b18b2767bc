"""The harness's own parts that the scenarios do not reach offline: the live switch, the judge wrapper (against
a scripted Chat Completions endpoint on loopback) and the checker's reading of spoken text."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from livekit.agents.voice.run_result import RunResult

from tests.evals import behaviours, checks, material
from tests.evals.behaviours import ScriptedModel
from tests.evals.live import LIVE_ENV, Judge, live_settings
from tests.evals.rig import conversation

pytestmark = pytest.mark.evals


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No key in the environment and no .env in the working directory."""
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", LIVE_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_offline_unless_asked(no_env: pytest.MonkeyPatch) -> None:
    no_env.setenv("OPENAI_API_KEY", "sk-present")
    assert live_settings() is None  # a key alone never makes `make test` spend tokens


def test_auto_goes_live_only_with_a_key(no_env: pytest.MonkeyPatch) -> None:
    no_env.setenv(LIVE_ENV, "auto")
    assert live_settings() is None
    no_env.setenv("OPENAI_API_KEY", "sk-present")
    no_env.setenv("LEXVOZ_REHEARSAL", "1")
    settings = live_settings()
    assert settings is not None and not settings.rehearsal


def test_insisting_on_live_without_a_key_is_a_clear_error(no_env: pytest.MonkeyPatch) -> None:
    no_env.setenv(LIVE_ENV, "1")
    with pytest.raises(pytest.UsageError, match="needs OPENAI_API_KEY"):
        live_settings()
    no_env.setenv(LIVE_ENV, "sometimes")
    with pytest.raises(pytest.UsageError, match="must be auto, 1 or 0"):
        live_settings()


class ScriptedChat:
    """A loopback Chat Completions endpoint that streams one `check_intent` tool call with a set verdict."""

    def __init__(self) -> None:
        self.verdict: dict[str, Any] = {"success": True, "reason": "names the article"}
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        tool = body["tools"][0]["function"]["name"]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": tool, "arguments": ""}}
        call["function"]["arguments"] = json.dumps(self.verdict)
        for delta, finish in (({"role": "assistant", "tool_calls": [call]}, None), ({}, "tool_calls")):
            chunk = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp


@pytest.fixture
async def chat(no_env: pytest.MonkeyPatch) -> AsyncIterator[tuple[ScriptedChat, str]]:
    scripted = ScriptedChat()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", scripted.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield scripted, f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


async def _greeting() -> RunResult[Any]:
    """A real finished run: the agent's greeting, offline on the stand-in."""
    async with conversation(ScriptedModel(), greet=True, mcp_timeout_s=5.0) as rig:
        assert rig.greeting is not None
        return rig.greeting


async def test_judge_keeps_the_reason_of_a_pass_and_of_a_fail(
    chat: tuple[ScriptedChat, str], no_env: pytest.MonkeyPatch
) -> None:
    scripted, base_url = chat
    no_env.setenv(LIVE_ENV, "1")
    no_env.setenv("OPENAI_API_KEY", "sk-test")
    no_env.setenv("OPENAI_BASE_URL", base_url)
    settings = live_settings()
    assert settings is not None
    judge = Judge(settings)
    try:
        greeting = (await _greeting()).expect.next_event(type="message")
        passed = await judge.judge(greeting, "introduces itself as Lexvoz")
        scripted.verdict = {"success": False, "reason": "it never says it is guidance"}
        failed = await judge.judge(greeting, "says it is guidance, not legal advice")
    finally:
        await judge.aclose()
    assert (passed.passed, passed.reason) == (True, "names the article")
    assert (failed.passed, failed.reason) == (False, "it never says it is guidance")
    assert scripted.requests[0]["model"] == "gpt-4.1-mini"
    sent = json.dumps(scripted.requests[0], ensure_ascii=False)
    assert "introduces itself as Lexvoz" in sent and behaviours.GREETING in sent


def test_spoken_numbers_count_as_citations() -> None:
    said = "Según la ley doscientos de dos mil treinta y uno, artículo catorce, se renueva cada dos años."
    assert checks.cites_only_returned(said, material.FISHING_SOURCES) == []
    assert checks.names_a_returned_source(said, material.FISHING_SOURCES) == []
    wrong = "Lo dice el artículo cuarenta y dos de la Ley 200 de 2031."
    assert [v.code for v in checks.cites_only_returned(wrong, material.FISHING_SOURCES)] == ["unreturned_article"]


def test_a_returned_norm_with_the_wrong_year_is_not_a_returned_norm() -> None:
    said = "Según la Ley 200 de 2019, artículo 14."
    assert [str(v) for v in checks.cites_only_returned(said, material.FISHING_SOURCES)] == [
        "unreturned_norm: ley 200 de 2019"
    ]


def test_personal_data_is_found_however_it_is_written() -> None:
    personal = {"cédula": material.PII_CEDULA, "teléfono": material.PII_PHONE, "nombre": material.PII_NAME}
    assert checks.queries_free_of(["permiso de pesca artesanal renovación"], personal) == []
    for query in ("permiso de 8 123 4567", "permiso teléfono seis uno dos tres cuatro cinco seis siete", "quintero"):
        assert checks.queries_free_of([query], personal), query

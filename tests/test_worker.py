"""The worker module: load reporting, log redaction, and the job's wiring run against a mocked room."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import create_autospec

import aiohttp
import pytest
from livekit import rtc
from prometheus_client import REGISTRY

from agent.ops.ledger.reader import read_room
from agent.ops.ledger.shipper import SpoolShipper
from agent.ops.ledger.spool import LedgerSpool
from agent.ops.redact import RedactingFilter
from agent.settings import Settings, get_settings
from agent.voice.conversation import close_shared_gateway
from agent.waiting_rooms import Offered
from realtime_standin import RealtimeStandIn
from tests.job_double import (
    USER_IDENTITY,
    TextReader,
    attributes,
    chat_handler,
    fake_job,
    latest_attributes,
    messages,
    mocked_room,
    until,
)
from tests.mcp_fixture import FakeMcpServer, synthetic_source


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("LEXVOZ_REHEARSAL", "1")
    monkeypatch.setenv("LEXVOZ_MAX_JOBS", "4")
    monkeypatch.setenv("LEXVOZ_LEDGER_PATH", str(tmp_path / "ledger.sqlite3"))  # the jobs' below: one host
    get_settings.cache_clear()
    import agent.worker as module

    module = importlib.reload(module)
    yield module
    get_settings.cache_clear()


def test_load_is_the_share_of_job_slots_scaled_so_livekit_offers_rooms_until_the_last_slot(worker) -> None:
    # livekit-server offers a room to a worker only while max(0, target_load - load) > 0 (agents.target_load,
    # 0.7 by default): with the share reported as it is, 3 of 4 slots (0.75) already refused the fourth room.
    def load(jobs: int) -> float:
        return float(worker.job_load(SimpleNamespace(active_jobs=[object()] * jobs)))

    target = worker.settings.livekit_target_load
    assert target == 0.7
    offered = [max(0.0, target - load(n)) > 0 for n in range(6)]
    assert offered == [True, True, True, True, False, False]  # LEXVOZ_MAX_JOBS=4
    assert load(2) == pytest.approx(target / 2) and load(9) == pytest.approx(target)


def test_log_redaction_is_installed_once_on_every_root_handler(worker) -> None:
    handler = logging.StreamHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        worker.install_log_redaction()
        worker.install_log_redaction()
        assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1
    finally:
        root.removeHandler(handler)


# -- the job's wiring, as the worker runs it ------------------------------------------------------


@pytest.fixture
async def standin() -> AsyncIterator[RealtimeStandIn]:
    async with RealtimeStandIn(speed=50.0, ms_per_char=5) as s:
        yield s


@pytest.fixture
def mcp(server: FakeMcpServer) -> FakeMcpServer:
    server.behaviour.results = [synthetic_source(1)]
    return server


def job_settings(realtime_base_url: str, mcp_url: str, tmp_path: Path) -> Settings:
    return Settings(
        OPENAI_API_KEY="test-key",
        OPENAI_BASE_URL=realtime_base_url,
        LEXVOZ_REHEARSAL=False,
        LEXVOZ_MCP_URL=mcp_url,
        LEXVOZ_MCP_RETRY_DELAY_S=0.01,
        LEXVOZ_LEDGER_PATH=tmp_path / "ledger.sqlite3",
    )


async def ship_the_spool(settings: Settings) -> int:
    """What the worker process's shipper does with what jobs spooled: one pass to the store; the entries sent."""
    shipper = SpoolShipper(settings.ledger_location, LedgerSpool(settings.ledger_spool_dir))
    await shipper.close()
    return shipper.shipped


@asynccontextmanager
async def running_job(worker: Any, settings: Settings, http: aiohttp.ClientSession) -> AsyncIterator[tuple[Any, Any]]:
    """`worker.run_job` (the entrypoint's whole body) against a mocked room; cleans up like the job does."""
    room = mocked_room()
    await close_shared_gateway()
    with fake_job(room) as job:
        conversation = await worker.run_job(job.ctx, settings, http_session=http)
        try:
            yield conversation, job
        finally:
            await conversation.session.aclose()
            await job.run_shutdown_callbacks()
            await close_shared_gateway()


async def test_every_registration_starts_one_pass_over_the_rooms_left_waiting(worker, caplog) -> None:
    """The first registration and each one after livekit-server comes back: a room opened in between waits for
    no one else (`agent/waiting_rooms.py`). A pass that fails for a reason of its own is logged, not lost."""
    started: list[float | None] = []

    async def offer_again(registered_at: float | None = None) -> Offered:
        started.append(registered_at)
        if len(started) == 2:
            raise ValueError("boom")
        return Offered()

    worker.waiting_rooms.offer_again = offer_again
    with caplog.at_level(logging.WARNING, logger="lexvoz.worker"):
        worker.server.emit("worker_registered", "AW_1", None)
        worker.server.emit("worker_registered", "AW_2", None)
        passes = list(worker._passes)
        await asyncio.wait(passes, timeout=5)
    assert len(passes) == 2 and not worker._passes  # kept until done, then let go
    assert len(started) == 2 and all(isinstance(at, float) for at in started)
    assert "rooms left waiting not checked: ValueError" in caplog.text


async def test_the_worker_process_ships_the_ledger_spool_once_and_not_with_the_ledger_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LEXVOZ_REHEARSAL", "1")
    monkeypatch.setenv("LEXVOZ_LEDGER_PATH", str(tmp_path / "ledger.sqlite3"))
    for ledger, shippers in (("on", 1), ("off", 0)):
        monkeypatch.setenv("LEXVOZ_LEDGER", ledger)
        get_settings.cache_clear()
        import agent.worker as module

        module = importlib.reload(module)
        module.server.emit("worker_started")
        module.server.emit("worker_started")  # one shipper per worker process, whatever is emitted again
        try:
            assert len(module._shippers) == shippers
        finally:
            for shipper in module._shippers:
                await shipper.close()
    get_settings.cache_clear()


async def test_the_entrypoint_is_run_job_and_nothing_else(worker) -> None:
    """The test below drives `run_job`; it only proves the production wiring if the entrypoint is that call."""
    source = inspect.getsource(worker.entrypoint)
    body = [line.strip() for line in source.splitlines() if line.strip() and not line.strip().startswith(("@", "#"))]
    assert body[1:] == ["await run_job(ctx, settings)"], body


async def test_the_job_runs_the_production_wiring_with_a_room(
    worker, standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer, tmp_path: Path
) -> None:
    settings = job_settings(standin.base_url, mcp.url, tmp_path)
    completed_before = _counter("voice_mcp_tool_calls_total", {"tool": "search_panama_law", "outcome": "completed"})
    worker.server.emit("worker_started")  # as livekit-agents does in the worker process: the ledger's shipper starts
    try:
        await _the_job_runs_the_production_wiring(worker, settings, standin, http, mcp, completed_before)
    finally:
        await worker._shippers[0].close()


async def _the_job_runs_the_production_wiring(
    worker: Any,
    settings: Settings,
    standin: RealtimeStandIn,
    http: aiohttp.ClientSession,
    mcp: FakeMcpServer,
    completed_before: float,
) -> None:
    async with running_job(worker, settings, http) as (conversation, job):
        room = conversation.room
        # the model: the plugin aimed at the configured endpoint, configured as the product specifies
        await standin.wait_for_client_event("session.update", after=2, timeout=10)
        session = standin.connection.session
        assert session["audio"]["input"]["turn_detection"]["eagerness"] == "low"
        assert session["audio"]["input"]["transcription"]["language"] == "es"
        assert [t["name"] for t in session["tools"]] == ["search_panama_law"]
        # the room hears the mode and that a model is connected
        await until(room, lambda: latest_attributes(room).get("lexvoz.model") == "connected")
        assert latest_attributes(room)["lexvoz.mode"] == "live"
        # typed input, exactly as the room delivers it: the text-input callback makes it a new turn
        chat_handler(room)(TextReader("pregunta escrita"), USER_IDENTITY)
        await standin.wait_for_client_event(
            "conversation.item.create", lambda e: e["item"]["type"] == "function_call_output", timeout=10
        )

        # The stand-in's read-back of the sources cites them too; those checks are pinned in test_citation_worker.
        def search_messages() -> list[str]:
            return [m["type"] for m in messages(room) if m["type"] != "citation_checked"]

        await until(room, lambda: search_messages() == ["started", "completed"])
        assert conversation.research.turns.current == 1
        assert messages(room)[0]["turn"] == 1 and messages(room)[0]["query"] == "pregunta escrita"
        assert mcp.queries == ["pregunta escrita"]
    # the observers: the metrics counter and the ledger both saw the call
    assert _counter("voice_mcp_tool_calls_total", {"tool": "search_panama_law", "outcome": "completed"}) == (
        completed_before + 1
    )
    # the job spooled its entry; the worker process's shipper wrote it to the store
    rows: list[dict[str, Any]] = []
    for _ in range(100):
        rows = read_room(settings.ledger_path, room.name) if settings.ledger_path.exists() else []
        if rows:
            break
        await asyncio.sleep(0.05)
    assert [(r["outcome"], r["turn"]) for r in rows] == [("completed", 1)], rows
    assert LedgerSpool(settings.ledger_spool_dir).pending() == 0
    # the session closing ends the job
    assert len(job.shutdown_reasons) == 1


async def test_a_job_for_a_room_another_agent_already_serves_ends_at_once(
    worker, standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer, tmp_path: Path
) -> None:
    """A room that asked for an agent again can receive two; the later job leaves before saying a word."""
    settings = job_settings(standin.base_url, mcp.url, tmp_path)
    room = mocked_room()
    other = create_autospec(rtc.RemoteParticipant, instance=True)
    other.identity, other.kind = "agent-AJ_first", rtc.ParticipantKind.PARTICIPANT_KIND_AGENT
    room.remote_participants[other.identity] = other
    await close_shared_gateway()
    with fake_job(room) as job:
        assert await worker.run_job(job.ctx, settings, http_session=http) is None
        assert job.shutdown_reasons == ["another agent already serves the room"]
        await job.run_shutdown_callbacks()
    await close_shared_gateway()
    assert standin.connections == []  # no voice model was opened
    assert attributes(room) == [] and messages(room) == []  # nothing published into the room


def _counter(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_the_planned_kill_of_idle_processes_at_shutdown_is_not_an_error(worker) -> None:
    log = logging.getLogger("livekit.agents")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log.addHandler(handler)
    noise = worker.ShutdownNoiseFilter()
    log.addFilter(noise)
    level = log.level
    log.setLevel(logging.INFO)  # as the livekit CLI runs it
    try:
        log.error("process exited with non-zero exit code -10")  # a crash while running: stays an error
        log.info("shutting down worker")
        log.error("process exited with non-zero exit code -10")  # the worker's own kill while stopping
        log.error("process exited with non-zero exit code 1")
    finally:
        log.setLevel(level)
        log.removeFilter(noise)
        log.removeHandler(handler)
    assert [r.levelname for r in records] == ["ERROR", "INFO", "WARNING", "ERROR"]

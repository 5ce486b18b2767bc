"""The agent's sign of life (`lexvoz.heartbeat`): refreshed on a schedule, written alone (the server merges it
with the agent's other attributes), carried by every conversation from its first attribute write until it ends,
and read with the same name and limit by the page service and the page.

The page's judgment (fake timers) is in `web/src/heartbeat.test.ts` and `web/src/App.agentWait.test.tsx`; the
page service's in `tests/test_agent_requests.py`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from agent.settings import Settings
from agent.voice import heartbeat
from agent.voice.conversation import close_shared_gateway, start_conversation
from agent.voice.heartbeat import HEARTBEAT_ATTRIBUTE, Heartbeat, heartbeat_value
from agent.web import dispatch
from realtime_standin import RealtimeStandIn
from tests.job_double import attributes, latest_attributes, mocked_room, until
from tests.mcp_fixture import FakeMcpServer

PERIOD_S = 0.02


class Recorder:
    """A local participant that records each `set_attributes`; `fail` makes the next writes raise, `hang` makes
    them never complete."""

    def __init__(self) -> None:
        self.writes: list[dict[str, str]] = []
        self.fail = 0
        self.hang = 0
        self.wrote = asyncio.Event()

    async def set_attributes(self, attributes: dict[str, str]) -> None:
        if self.hang:
            self.hang -= 1
            await asyncio.Event().wait()
        if self.fail:
            self.fail -= 1
            raise ConnectionError("room closed")
        self.writes.append(dict(attributes))
        self.wrote.set()
        self.wrote = asyncio.Event()

    async def until_writes(self, n: int) -> None:
        async with asyncio.timeout(5):
            while len(self.writes) < n:
                await self.wrote.wait()


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        self.now += 3.0  # each read is a period later
        return self.now


async def test_it_refreshes_only_its_own_attribute_with_the_workers_time_until_stopped() -> None:
    participant, clock = Recorder(), Clock()
    beat = Heartbeat(participant, period_s=PERIOD_S, clock=clock)
    assert beat.attributes() == {HEARTBEAT_ATTRIBUTE: "1800000003000"}  # Unix ms, for the first write
    beat.start()
    await participant.until_writes(3)
    assert all(set(w) == {HEARTBEAT_ATTRIBUTE} for w in participant.writes)  # never another key: no clobbering
    stamps = [int(w[HEARTBEAT_ATTRIBUTE]) for w in participant.writes]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)  # a new value each time: a page sees it
    beat.stop()
    await asyncio.sleep(PERIOD_S * 5)
    assert not beat.running
    written = len(participant.writes)
    await asyncio.sleep(PERIOD_S * 5)
    assert len(participant.writes) == written


async def test_a_failed_or_stuck_write_does_not_stop_the_next_ones(caplog: pytest.LogCaptureFixture) -> None:
    participant = Recorder()
    participant.hang, participant.fail = 1, 3
    beat = Heartbeat(participant, period_s=PERIOD_S)
    with caplog.at_level(logging.WARNING, logger="lexvoz.heartbeat"):
        beat.start()
        await participant.until_writes(2)
        await beat.aclose()
    warnings = [r for r in caplog.records if r.name == "lexvoz.heartbeat"]
    assert len(warnings) == 1, warnings  # one line for the run of failures, not one per period
    assert "TimeoutError" in warnings[0].getMessage()


async def test_each_refresh_carries_the_attributes_as_they_are_at_that_moment() -> None:
    """What the room must show of the agent is written again with every refresh, read when each write goes out, so
    a write lost in a reconnection is made good by the next one; a carry that fails never holds the sign of life."""
    participant = Recorder()
    state = {"lk.agent.state": "speaking"}
    broken = False

    def carry() -> dict[str, str]:
        if broken:
            raise KeyError("state")
        return dict(state)

    beat = Heartbeat(participant, period_s=PERIOD_S)
    beat.start(carry=carry)
    await participant.until_writes(1)
    state["lk.agent.state"] = "listening"
    await participant.until_writes(len(participant.writes) + 2)
    assert participant.writes[0]["lk.agent.state"] == "speaking"
    assert participant.writes[-1]["lk.agent.state"] == "listening"
    assert all(HEARTBEAT_ATTRIBUTE in w for w in participant.writes)
    broken = True
    await participant.until_writes(len(participant.writes) + 1)
    assert set(participant.writes[-1]) == {HEARTBEAT_ATTRIBUTE}
    await beat.aclose()


def test_the_value_is_unix_milliseconds_in_digits() -> None:
    assert heartbeat_value(1_800_000_000.1234) == "1800000000123"
    assert heartbeat_value(1_800_000_000.1234).isdigit()


def test_the_page_service_and_the_page_read_the_same_name_and_limit() -> None:
    """agent/web is a separate program and the page is TypeScript: their copies must not drift."""
    assert dispatch.HEARTBEAT_ATTRIBUTE == heartbeat.HEARTBEAT_ATTRIBUTE
    assert dispatch.HEARTBEAT_LOST_S == heartbeat.HEARTBEAT_LOST_S
    page = Path("web/src/heartbeat.ts").read_text(encoding="utf-8")
    name = re.search(r"export const HEARTBEAT_ATTRIBUTE = '([^']+)';", page)
    lost = re.search(r"export const HEARTBEAT_LOST_MS = ([\d_]+);", page)
    assert name and lost
    assert name.group(1) == heartbeat.HEARTBEAT_ATTRIBUTE
    assert int(lost.group(1).replace("_", "")) == heartbeat.HEARTBEAT_LOST_S * 1000
    # Three periods and a margin: two refreshes may be late before an agent counts as lost.
    assert 3 * heartbeat.HEARTBEAT_PERIOD_S < heartbeat.HEARTBEAT_LOST_S < 4 * heartbeat.HEARTBEAT_PERIOD_S


# -- in a conversation, as the worker starts it ---------------------------------------------------


@pytest.fixture
async def standin() -> AsyncIterator[RealtimeStandIn]:
    async with RealtimeStandIn(speed=50.0, ms_per_char=5) as s:
        yield s


def _settings(standin: RealtimeStandIn, server: FakeMcpServer, tmp_path: Path) -> Settings:
    return Settings(
        OPENAI_API_KEY="test-key",
        OPENAI_BASE_URL=standin.base_url,
        LEXVOZ_REHEARSAL=False,
        LEXVOZ_MCP_URL=server.url,
        LEXVOZ_LEDGER_PATH=tmp_path / "ledger.sqlite3",
    )


async def test_a_conversation_announces_its_sign_of_life_with_its_first_attributes_and_stops_at_its_end(
    standin: RealtimeStandIn, server: FakeMcpServer, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    settings = _settings(standin, server, tmp_path)
    room = mocked_room()
    await close_shared_gateway()
    conversation = await start_conversation(room, settings, http_session=http, greet=False)
    try:
        first = attributes(room)[0]
        assert {"lexvoz.mode", "lexvoz.model", HEARTBEAT_ATTRIBUTE} <= set(first)  # one write, all together
        assert conversation.heartbeat is not None and conversation.heartbeat.running
        await until(room, lambda: latest_attributes(room).get("lexvoz.model") == "connected")
    finally:
        await conversation.session.aclose()
        await close_shared_gateway()
    async with asyncio.timeout(5):
        await conversation.ended.wait()  # the conversation is over: the agent is leaving the room
    assert not conversation.heartbeat.running


async def test_a_state_the_framework_could_not_write_while_the_room_reconnected_reaches_the_page(
    server: FakeMcpServer, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """livekit-agents writes `lk.agent.state` only while the room is connected. In a 60-minute cluster soak the
    agent's livekit-server node restarted while it answered: the answer ended as its connection was being
    restored, "listening" was never written, and the page showed the agent speaking for as long as the person
    waited (2 stuck pages). The heartbeat now carries the state, so the page sees it within a period."""
    async with RealtimeStandIn(speed=1.0, ms_per_char=40) as slow:  # a greeting that lasts a few seconds
        settings = _settings(slow, server, tmp_path)
        room = mocked_room()
        await close_shared_gateway()
        conversation = await start_conversation(room, settings, http_session=http)
        try:

            def speaking_then_cut_off() -> bool:
                if latest_attributes(room).get("lk.agent.state") != "speaking":
                    return False
                room.isconnected.return_value = False  # the agent's connection is being restored from here
                return True

            listening = asyncio.Event()
            conversation.session.on(
                "agent_state_changed",
                lambda ev: listening.set() if (ev.old_state, ev.new_state) == ("speaking", "listening") else None,
            )
            await until(room, speaking_then_cut_off)
            async with asyncio.timeout(30):
                await listening.wait()  # the greeting ended during the outage
            assert latest_attributes(room).get("lk.agent.state") == "speaking"  # the framework wrote nothing
            room.isconnected.return_value = True
            await until(
                room,
                lambda: latest_attributes(room).get("lk.agent.state") == "listening",
                timeout_s=3 * heartbeat.HEARTBEAT_PERIOD_S,
            )
        finally:
            await conversation.session.aclose()
            await close_shared_gateway()

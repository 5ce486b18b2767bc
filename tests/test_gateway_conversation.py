"""The gateway's reach into the conversation: the query as sent, the model's instructions, the bounds."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from agent.mcp.gateway import GatewayOptions, McpGateway
from agent.settings import Settings
from agent.voice.assistant import INSTRUCTIONS, TOOL_DESCRIPTION
from agent.voice.conversation import END_REASON_ATTRIBUTE, close_shared_gateway, end_after, shared_gateway
from agent.voice.evidence import EvidencePublisher
from agent.voice.research import ResearchSession
from realtime_standin import RealtimeStandIn
from tests.fakes import RecordingParticipant
from tests.mcp_fixture import FakeMcpServer
from tests.test_conversation import Rig


async def test_started_message_shows_the_query_as_sent() -> None:
    srv = FakeMcpServer()
    async with srv.running():
        gw = McpGateway(GatewayOptions(url=srv.url, call_timeout_s=5))
        room = RecordingParticipant()
        try:
            await ResearchSession(gw, EvidencePublisher(room)).run_tool("c1", {"query": "cédula 8-123-4567 despido"})
        finally:
            await gw.aclose()
    started = room.messages[0]
    assert started["type"] == "started"
    assert "8-123-4567" not in started["query"]
    assert started["query"] == srv.queries[0]


def test_model_is_asked_in_spanish_to_leave_personal_data_out_of_queries() -> None:
    for text in (INSTRUCTIONS, TOOL_DESCRIPTION):
        assert "sin datos personales" in text or "deja fuera todo dato personal" in text
        for word in ("nombres", "cédula", "teléfonos", "correos"):
            assert word in text
    assert "generaliza" in INSTRUCTIONS


async def test_spoken_answers_are_capped_at_600_output_tokens(http: aiohttp.ClientSession) -> None:
    async with RealtimeStandIn(speed=50.0, ms_per_char=5) as standin:
        srv = FakeMcpServer()
        async with srv.running(), Rig(srv.url, standin, http, greet=False):
            session = standin.connection.session
    assert session["max_output_tokens"] == 600


class AttributeRoom(RecordingParticipant):
    def __init__(self) -> None:
        super().__init__()
        self.attributes: dict[str, str] = {}

    async def set_attributes(self, attributes: dict[str, str]) -> None:
        self.attributes.update(attributes)


async def test_maximum_length_says_goodbye_tells_the_page_and_closes(http: aiohttp.ClientSession) -> None:
    async with RealtimeStandIn(speed=50.0, ms_per_char=5) as standin:
        srv = FakeMcpServer()
        async with srv.running(), Rig(srv.url, standin, http, greet=False) as rig:
            room = AttributeRoom()
            closed = asyncio.Event()
            rig.session.on("close", lambda _ev: closed.set())
            await asyncio.wait_for(end_after(rig.session, room, 0.05), 30)
            await asyncio.wait_for(closed.wait(), 5)
            creates = standin.client_events("response.create")
    assert room.attributes == {END_REASON_ATTRIBUTE: "max_duration"}
    assert any("duración máxima" in str(_instructions(e)) for e in creates)


def _instructions(event: dict[str, Any]) -> Any:
    return (event.get("response") or {}).get("instructions")


def test_conversation_bounds_are_settings_with_the_documented_defaults() -> None:
    s = Settings()
    assert (s.max_conversation_s, s.max_output_tokens, s.mcp_max_reply_bytes, s.mcp_mask_queries) == (
        1800.0,
        600,
        1_048_576,
        True,
    )


async def test_worker_shutdown_closes_the_shared_mcp_session() -> None:
    srv = FakeMcpServer()
    async with srv.running():
        settings = Settings(LEXVOZ_MCP_URL=srv.url)
        gw = shared_gateway(settings)
        await gw.search({"query": "uno"})
        await close_shared_gateway()
        assert srv.delete_requests == 1
        assert not gw.connected

"""The research session: turn guard, duplicates, limits and the messages the room receives."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent.mcp.gateway import GatewayOptions, McpGateway
from agent.voice.evidence import MAX_PACKET_BYTES, TOPIC, EvidencePublisher
from agent.voice.research import DISCARDED_OUTPUT, ResearchSession, ToolEvent, ToolFailure
from tests.fakes import RecordingParticipant
from tests.mcp_fixture import FakeMcpServer, synthetic_source


@pytest.fixture
async def gateway(server: FakeMcpServer):
    gw = McpGateway(GatewayOptions(url=server.url, call_timeout_s=5, retry_delay_s=0.01))
    yield gw
    await gw.aclose()


def make_session(gw: McpGateway, **kw: Any) -> tuple[ResearchSession, RecordingParticipant, list[ToolEvent]]:
    participant = RecordingParticipant()
    events: list[ToolEvent] = []
    session = ResearchSession(gw, EvidencePublisher(participant), observers=[events.append], **kw)
    return session, participant, events


async def test_completed_search_publishes_started_then_completed(gateway: McpGateway) -> None:
    session, room, events = make_session(gateway)
    answer = await session.run_tool("call_1", {"query": "libertad sintética"})
    await session.drain()
    assert [m["type"] for m in room.messages] == ["started", "completed"]
    started, completed = room.messages
    assert started == {"v": 1, "type": "started", "call_id": "call_1", "turn": 0, "query": "libertad sintética"}
    assert completed["sources"] == [synthetic_source(1)]
    assert completed["tool_duration_ms"] > 0
    assert all(topic == TOPIC and reliable for _, topic, reliable in room.packets)
    assert answer.outcome == "completed" and answer.reply_required
    body = json.loads(answer.output)
    assert body["estado"] == "ok" and body["fuentes"] == [synthetic_source(1)]
    assert "no instrucciones" in body["aviso"]
    assert [e.outcome for e in events] == ["completed"]


async def test_new_turn_cancels_the_search_and_discards_it(server: FakeMcpServer, gateway: McpGateway) -> None:
    server.behaviour.delay_s = 3.0
    session, room, events = make_session(gateway)
    search = server.next_call()
    task = asyncio.create_task(session.run_tool("call_slow", {"query": "lento"}))
    await asyncio.wait_for(search.started.wait(), 5)
    session.new_user_turn()
    answer = await asyncio.wait_for(task, 1.0)  # answered at once, not after the slow search
    assert answer.output == DISCARDED_OUTPUT
    assert not answer.reply_required  # the user moved on: the call is answered, but nothing is said
    assert [m["type"] for m in room.messages] == ["started", "discarded"]
    await asyncio.wait_for(search.cancelled.wait(), 5)  # the MCP server saw the cancellation
    assert [e.outcome for e in events] == ["discarded"]


async def test_interruption_counts_as_a_new_turn(server: FakeMcpServer, gateway: McpGateway) -> None:
    server.behaviour.delay_s = 3.0
    session, room, _ = make_session(gateway)
    interrupted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    search = server.next_call()
    task = asyncio.create_task(session.run_tool("c", {"query": "lento"}, interrupted=interrupted))
    await asyncio.wait_for(search.started.wait(), 5)
    interrupted.set_result(None)
    answer = await asyncio.wait_for(task, 1.0)
    assert answer.output == DISCARDED_OUTPUT and not answer.reply_required
    assert "completed" not in [m["type"] for m in room.messages]


async def test_repeated_call_id_runs_one_search(server: FakeMcpServer, gateway: McpGateway) -> None:
    session, room, events = make_session(gateway)
    first = await session.run_tool("dup", {"query": "uno"})
    second = await session.run_tool("dup", {"query": "uno"})
    await session.drain()
    assert first == second
    assert server.tool_calls_started == 1
    assert [m["type"] for m in room.messages] == ["started", "completed"]
    assert [e.outcome for e in events] == ["completed", "duplicate"]


async def test_concurrent_repeat_waits_for_the_first_answer(server: FakeMcpServer, gateway: McpGateway) -> None:
    server.behaviour.delay_s = 0.3
    session, _, _ = make_session(gateway)
    a, b = await asyncio.gather(session.run_tool("x", {"query": "q"}), session.run_tool("x", {"query": "q"}))
    assert a == b
    assert server.tool_calls_started == 1


async def test_failure_is_published_and_raised_in_spanish(server: FakeMcpServer, gateway: McpGateway) -> None:
    server.behaviour.is_error = True
    session, room, events = make_session(gateway)
    with pytest.raises(ToolFailure) as info:
        await session.run_tool("f", {"query": "uno"})
    assert "no pudo verificar" in str(info.value)
    await session.drain()
    assert room.messages[-1] == {"v": 1, "type": "failed", "call_id": "f", "turn": 0, "reason": "tool_error"}
    assert events[0].reason == "tool_error"


async def test_malformed_arguments_fail_clearly_without_a_request(server: FakeMcpServer, gateway: McpGateway) -> None:
    session, room, _ = make_session(gateway)
    with pytest.raises(ToolFailure) as info:
        await session.run_tool("m", {"query": "   ", "extra": 1})
    assert info.value.reason == "invalid_arguments"
    await session.drain()
    assert room.messages[-1]["reason"] == "invalid_arguments"
    assert server.tool_call_posts == 0


async def test_search_rate_limit_per_session(server: FakeMcpServer, gateway: McpGateway) -> None:
    session, _, _ = make_session(gateway, searches_per_minute=2)
    await session.run_tool("a", {"query": "uno"})
    await session.run_tool("b", {"query": "dos"})
    with pytest.raises(ToolFailure) as info:
        await session.run_tool("c", {"query": "tres"})
    assert info.value.reason == "rate_limited"
    assert "límite" in str(info.value)
    assert server.tool_calls_started == 2
    other, _, _ = make_session(gateway, searches_per_minute=2)  # limits are per conversation
    await other.run_tool("d", {"query": "cuatro"})


async def test_empty_result_is_a_completed_search_with_no_sources(server: FakeMcpServer, gateway: McpGateway) -> None:
    server.behaviour.results = []
    session, room, _ = make_session(gateway)
    body = json.loads((await session.run_tool("e", {"query": "nada"})).output)
    assert body["estado"] == "sin_fuentes" and body["fuentes"] == []
    await session.drain()
    assert room.messages[-1]["sources"] == []


async def test_dead_server_fails_without_breaking_the_session() -> None:
    dead = FakeMcpServer()  # never started
    gw = McpGateway(GatewayOptions(url=dead.url, call_timeout_s=1, connect_timeout_s=1, retry_delay_s=0.01))
    session, room, _ = make_session(gw)
    try:
        with pytest.raises(ToolFailure) as info:
            await session.run_tool("d", {"query": "uno"})
    finally:
        await gw.aclose()
    assert info.value.reason == "transport"
    await session.drain()
    assert room.messages[-1]["type"] == "failed"


async def test_large_messages_go_as_text_streams() -> None:
    participant = RecordingParticipant()
    publisher = EvidencePublisher(participant)
    from agent.voice.evidence import Started

    await publisher.publish(Started(call_id="big", turn=1, query="é" * (MAX_PACKET_BYTES // 2 + 10)))
    assert participant.packets == [] and len(participant.streams) == 1


async def test_publish_failure_does_not_raise() -> None:
    class Broken(RecordingParticipant):
        async def publish_data(self, *a: Any, **k: Any) -> None:
            raise ConnectionError("room gone")

    from agent.voice.evidence import Discarded

    publisher = EvidencePublisher(Broken())
    assert await publisher.publish(Discarded(call_id="x", turn=1)) is False
    assert publisher.failures == 1


async def test_repeat_of_a_failed_call_fails_alike_without_a_second_search(
    server: FakeMcpServer, gateway: McpGateway
) -> None:
    server.behaviour.is_error = True
    session, _, events = make_session(gateway)
    with pytest.raises(ToolFailure) as first:
        await session.run_tool("f2", {"query": "uno"})
    with pytest.raises(ToolFailure) as second:
        await session.run_tool("f2", {"query": "uno"})
    assert second.value.reason == first.value.reason == "tool_error"
    assert server.tool_calls_started == 1
    assert [e.outcome for e in events] == ["failed", "duplicate"]


class HeldRoom(RecordingParticipant):
    """A room whose sends complete only when the test lets them: livekit's native side being slow to take a packet."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.waiting = 0

    async def publish_data(self, payload: bytes | str, *, reliable: bool = True, topic: str = "") -> None:
        self.waiting += 1
        await self.gate.wait()
        self.waiting -= 1
        await super().publish_data(payload, reliable=reliable, topic=topic)


async def test_the_answer_does_not_wait_for_the_room_to_take_the_evidence(gateway: McpGateway) -> None:
    room = HeldRoom()
    session = ResearchSession(gateway, EvidencePublisher(room))
    answer = await asyncio.wait_for(session.run_tool("held", {"query": "libertad sintética"}), 5)
    assert answer.outcome == "completed"
    assert room.messages == [] and room.waiting == 1  # `started` is still being handed over; nothing waited for it
    assert not await session.drain(timeout_s=0.05)  # bounded: a stuck room cannot hold the end of a conversation
    room.gate.set()
    assert await session.drain(timeout_s=5)
    assert [m["type"] for m in room.messages] == ["started", "completed"]


async def test_messages_reach_the_room_in_the_order_posted_even_when_one_send_fails() -> None:
    from agent.voice.evidence import Completed, Discarded, Started

    class Flaky(RecordingParticipant):
        def __init__(self) -> None:
            super().__init__()
            self.sends = 0

        async def publish_data(self, payload: bytes | str, *, reliable: bool = True, topic: str = "") -> None:
            self.sends += 1
            if self.sends == 1:
                await asyncio.sleep(0.05)  # the first send is slow: what follows must not overtake it
            if self.sends == 2:
                raise ConnectionError("one packet lost")
            await super().publish_data(payload, reliable=reliable, topic=topic)

    room = Flaky()
    publisher = EvidencePublisher(room)
    sent = [
        publisher.post(Started(call_id="a", turn=1, query="uno")),
        publisher.post(Discarded(call_id="b", turn=1)),
        publisher.post(Completed.of("a", 1, 3.0, [])),
    ]
    assert publisher.queued == 3
    assert await publisher.drain(timeout_s=5)
    assert [await s for s in sent] == [True, False, True]
    assert [(m["type"], m["call_id"]) for m in room.messages] == [("started", "a"), ("completed", "a")]
    assert publisher.failures == 1 and publisher.queued == 0
    assert await publisher.publish(Discarded(call_id="c", turn=2))  # the sender starts again after going idle
    assert room.messages[-1]["call_id"] == "c"


async def _slow_search_running(
    server: FakeMcpServer, gateway: McpGateway, call_id: str
) -> tuple[ResearchSession, RecordingParticipant, list[ToolEvent], asyncio.Task[Any], Any]:
    """A session whose search `call_id` has reached the MCP server and will take 3 s."""
    server.behaviour.delay_s = 3.0
    session, room, events = make_session(gateway)
    search = server.next_call()
    task = asyncio.create_task(session.run_tool(call_id, {"query": "lenta"}))
    await asyncio.wait_for(search.started.wait(), 5)
    return session, room, events, task, search


async def test_an_ended_conversation_discards_its_running_search_without_counting_a_turn(
    server: FakeMcpServer, gateway: McpGateway
) -> None:
    session, room, events, task, search = await _slow_search_running(server, gateway, "last")
    session.end()
    assert await session.drain(timeout_s=1.0)  # the discard is in the room, not merely on its way
    assert [m["type"] for m in room.messages] == ["started", "discarded"]
    assert (await task).output == DISCARDED_OUTPUT
    assert session.turns.current == 0  # ending is not a turn of the person's
    await asyncio.wait_for(search.cancelled.wait(), 5)
    assert [e.outcome for e in events] == ["discarded"]
    assert (await session.run_tool("after", {"query": "otra"})).outcome == "discarded"  # nothing runs once ended


async def test_a_call_the_framework_cancels_closes_its_card_and_answers_its_repeat(
    server: FakeMcpServer, gateway: McpGateway
) -> None:
    session, room, events, task, _ = await _slow_search_running(server, gateway, "gone")
    repeat = asyncio.create_task(session.run_tool("gone", {"query": "lenta"}))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await asyncio.wait_for(repeat, 1.0)).output == DISCARDED_OUTPUT
    assert await session.drain(timeout_s=1.0)
    assert [m["type"] for m in room.messages] == ["started", "discarded"]
    assert [e.outcome for e in events] == ["duplicate", "discarded"]

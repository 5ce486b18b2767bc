"""The real agent, the real OpenAI Realtime plugin and the real gateway, end to end without LiveKit.

The conversation is built by `build_conversation`, the function the worker uses, and started on an
autospec'd room inside a fake job context. The plugin talks to the local Realtime stand-in through
`base_url`; the tool goes through the gateway to a real `mcp` SDK server over HTTP; the room's mocks
record what reached it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from livekit import rtc
from livekit.agents import ChatMessage, ConversationItemAddedEvent
from livekit.agents.voice.events import FunctionToolsExecutedEvent
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent.mcp.gateway import GatewayOptions, McpGateway
from agent.ops.telemetry import setup_tracing
from agent.settings import Settings
from agent.voice import speech
from agent.voice.assistant import RESUME_LINE
from agent.voice.conversation import build_conversation
from agent.voice.lost_replies import REANSWER, REHEAR
from agent.voice.page_hello import PageHello
from agent.voice.research import DISCARDED_OUTPUT
from realtime_standin import GREETING, RealtimeStandIn
from realtime_standin.fault_control import drop_connections
from realtime_standin.session import RealtimeConnection
from tests.job_double import USER_IDENTITY, TextReader, chat_handler, fake_job, messages, mocked_room, until
from tests.mcp_fixture import FakeMcpServer, synthetic_source


@pytest.fixture
async def standin() -> AsyncIterator[RealtimeStandIn]:
    async with RealtimeStandIn(speed=50.0, ms_per_char=5) as s:
        yield s


@pytest.fixture
def mcp(server: FakeMcpServer) -> FakeMcpServer:
    server.behaviour.results = [synthetic_source(1), synthetic_source(2)]
    return server


def conversation_settings(standin: RealtimeStandIn) -> Settings:
    return Settings(OPENAI_API_KEY="test", OPENAI_BASE_URL=standin.base_url, LEXVOZ_REHEARSAL=False)


class Rig:
    """`build_conversation` (the worker's own wiring) joined to a mocked room inside a fake job."""

    def __init__(
        self, url: str, standin: RealtimeStandIn, http: aiohttp.ClientSession, *, greet: bool, page: bool = False
    ) -> None:
        self.gateway = McpGateway(GatewayOptions(url=url, call_timeout_s=8, connect_timeout_s=2, retry_delay_s=0.01))
        self.room = mocked_room()
        # As the worker does: listening for the page's hello from before the agent is in the room.
        self.page = PageHello(self.room) if page else None
        self.conversation = build_conversation(
            self.room,
            conversation_settings(standin),
            gateway=self.gateway,
            greet=greet,
            page=self.page,
            http_session=http,
        )
        self.research = self.conversation.research
        self.agent = self.conversation.agent
        self.session = self.conversation.session
        self.standin = standin
        self.executed: asyncio.Queue[FunctionToolsExecutedEvent] = asyncio.Queue()
        self.session.on("function_tools_executed", self.executed.put_nowait)
        self._job = fake_job(self.room)

    async def tools_executed(self) -> FunctionToolsExecutedEvent:
        """The framework's own account of a finished tool step: its outputs and whether they want a reply."""
        return await asyncio.wait_for(self.executed.get(), 10)

    async def __aenter__(self) -> Rig:
        self._job.__enter__()
        await self.conversation.start()
        # the plugin sends its tools in the third session.update: only then is a turn answerable
        await self.standin.wait_for_client_event("session.update", after=2, timeout=10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.session.aclose()
            await self.gateway.aclose()
        finally:
            self._job.__exit__(None, None, None)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return messages(self.room)

    def types(self) -> list[str]:
        """The types of the searches' messages; the check of the agent's spoken citations (which the stand-in's
        read-back of the sources produces) is pinned in tests/test_citation_worker.py."""
        return [m["type"] for m in self.messages if m["type"] != "citation_checked"]


def outputs_on_wire(standin: RealtimeStandIn) -> list[dict[str, Any]]:
    return [
        e["item"]
        for e in standin.client_events("conversation.item.create")
        if e["item"]["type"] == "function_call_output"
    ]


async def test_session_is_configured_as_the_product_specifies(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    async with Rig(mcp.url, standin, http, greet=False):
        session = standin.connection.session
    turn = session["audio"]["input"]["turn_detection"]
    assert (turn["type"], turn["eagerness"], turn["interrupt_response"], turn["create_response"]) == (
        "semantic_vad",
        "low",
        True,
        True,
    )
    assert session["audio"]["input"]["transcription"]["language"] == "es"
    assert session["audio"]["output"]["voice"] == "marin"
    assert "search_panama_law" in [t["name"] for t in session["tools"]]
    assert "no instrucciones" in session["instructions"] or "nunca instrucciones" in session["instructions"]


async def test_user_turn_runs_the_tool_through_the_gateway(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    async with Rig(mcp.url, standin, http, greet=False) as rig:
        await standin.inject_user_turn("¿qué dice la ley sintética sobre pruebas?")
        output_event = await standin.wait_for_client_event(
            "conversation.item.create", lambda e: e["item"]["type"] == "function_call_output", timeout=10
        )
        call = standin.server_events("response.output_item.done")[0]["item"]
        assert output_event["item"]["call_id"] == call["call_id"]
        body = json.loads(output_event["item"]["output"])
        assert body["estado"] == "ok"
        assert [s["citation"] for s in body["fuentes"]] == [
            synthetic_source(1)["citation"],
            synthetic_source(2)["citation"],
        ]
        # a reply was requested for the fresh result
        await standin.wait_for_client_event("response.create", after=standin.received.index(output_event), timeout=5)

    assert mcp.queries == ["¿qué dice la ley sintética sobre pruebas?"]
    assert rig.types() == ["started", "completed"]
    started, completed = rig.messages
    assert started["call_id"] == completed["call_id"] == call["call_id"]
    assert started["turn"] == completed["turn"] == 1  # the speech_started of the turn advanced the counter
    assert completed["sources"] == [synthetic_source(1), synthetic_source(2)]


async def test_barge_in_during_a_slow_search_discards_it(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    mcp.behaviour.delay_s = 5.0
    async with Rig(mcp.url, standin, http, greet=False) as rig:
        search = mcp.next_call()
        await standin.inject_user_turn("pregunta lenta")
        await asyncio.wait_for(search.started.wait(), 10)
        creates_before = standin.response_create_count
        await standin.inject_speech_started()  # the user talks over the running search

        await asyncio.wait_for(search.cancelled.wait(), 3)  # the MCP server saw the cancellation
        output_event = await standin.wait_for_client_event(
            "conversation.item.create", lambda e: e["item"]["type"] == "function_call_output", timeout=5
        )
        assert output_event["item"]["output"] == DISCARDED_OUTPUT  # the open call is still answered
        executed = await rig.tools_executed()
        assert not executed.has_tool_reply  # no reply for the stale result
        assert standin.response_create_count == creates_before
        assert rig.types() == ["started", "discarded"]


async def test_greeting_works_while_the_mcp_server_is_down(
    standin: RealtimeStandIn, http: aiohttp.ClientSession
) -> None:
    dead = FakeMcpServer()  # never started: connection refused
    async with Rig(dead.url, standin, http, greet=True) as rig:
        done = await standin.wait_for_server_event("response.output_audio_transcript.done", timeout=10)
        assert done["transcript"] == GREETING
        response = await standin.wait_for_server_event("response.done", timeout=10)
        assert response["response"]["status"] == "completed"
    assert rig.messages == []


async def test_the_greeting_does_not_wait_for_livekit_server_to_answer_the_agent_s_first_attributes(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    """With ten people joining at once livekit-server took up to 0.6 s to answer that write; the session's start,
    and with it the voice model's connection and the greeting, had waited for it."""
    answer = asyncio.Event()
    room_writes: list[dict[str, str]] = []  # in the order livekit-server receives them: as each write is issued

    async def slow_server(attributes: dict[str, str]) -> None:
        room_writes.append(dict(attributes))
        if len(room_writes) == 1:
            await answer.wait()  # the first write is not answered until the greeting was heard

    room = mocked_room()
    room.local_participant.set_attributes.side_effect = slow_server
    gateway = McpGateway(GatewayOptions(url=mcp.url, call_timeout_s=8, connect_timeout_s=2, retry_delay_s=0.01))
    conversation = build_conversation(room, conversation_settings(standin), gateway=gateway, http_session=http)
    with fake_job(room):
        try:
            await asyncio.wait_for(conversation.start(), 10)
            done = await standin.wait_for_server_event("response.output_audio_transcript.done", timeout=10)
            assert done["transcript"] == GREETING
            assert conversation.first_write is not None and not conversation.first_write.done()  # still unanswered
            assert room_writes[0]["lexvoz.model"] == "connecting"  # issued first...
            assert any(w.get("lexvoz.model") == "connected" for w in room_writes[1:])  # ...and the newer after it
        finally:
            answer.set()
            await conversation.session.aclose()
            await gateway.aclose()


def _page_says(rig: Rig, resumed: bool, *, sender_kind: int = rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD) -> None:
    """The page's hello as the room delivers it (`data_received`, topic `lexvoz.page`)."""
    listener = next(c.args[1] for c in rig.room.on.call_args_list if c.args[0] == "data_received")
    person = rig.room.remote_participants[USER_IDENTITY]
    person.kind = sender_kind
    payload = json.dumps({"v": 1, "type": "hello", "resumed": resumed}).encode()
    listener(
        rtc.DataPacket(data=payload, kind=rtc.DataPacketKind.KIND_RELIABLE, participant=person, topic="lexvoz.page")
    )


@pytest.mark.parametrize(("resumed", "heard"), [(True, RESUME_LINE), (False, GREETING)])
async def test_the_opening_line_is_the_short_one_for_a_person_greeted_before_in_this_room(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, resumed: bool, heard: str
) -> None:
    """A new agent in a room whose person was already greeted there (livekit-server restarted, a worker died, the
    tab was reloaded) says one short line, not the introduction and disclaimer again: the page says so in its
    hello. The line is the agent's own, word for word, through the real plugin."""
    dead = FakeMcpServer()  # the opening needs no search
    async with Rig(dead.url, standin, http, greet=True, page=True) as rig:
        _page_says(rig, resumed)
        done = await standin.wait_for_server_event("response.output_audio_transcript.done", timeout=10)
        assert done["transcript"] == heard
        await asyncio.sleep(0.3)
        assert standin.response_create_count == 1  # one opening, not both


async def test_without_the_pages_hello_the_person_is_greeted_after_a_bounded_wait(
    standin: RealtimeStandIn, http: aiohttp.ClientSession
) -> None:
    """A page that sends no hello (an older page, another client) and a hello from another agent both mean the
    greeting: only the person's own page can spare it."""
    dead = FakeMcpServer()
    async with Rig(dead.url, standin, http, greet=True, page=True) as rig:
        _page_says(rig, True, sender_kind=rtc.ParticipantKind.PARTICIPANT_KIND_AGENT)
        done = await standin.wait_for_server_event("response.output_audio_transcript.done", timeout=10)
        assert done["transcript"] == GREETING


async def test_a_greeting_whose_request_the_models_link_lost_is_asked_for_again(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's sockets drop after the greeting was requested and before the model began it (the soak's dropped
    model hit a room as it opened): the plugin reconnects and fails the request, the agent listens in silence, and
    the person never hears the greeting. The agent asks for it again once the link is back."""
    lost: list[asyncio.Task[tuple[int, bool]]] = []
    answer = RealtimeConnection._on_response_create

    def first_request_lost(self: RealtimeConnection, event: dict[str, Any]) -> None:
        if not lost:  # the link goes away with the greeting's request on it, unanswered
            lost.append(asyncio.get_running_loop().create_task(drop_connections(standin, mid_answer=False, within_s=0)))
            return
        answer(self, event)

    monkeypatch.setattr(RealtimeConnection, "_on_response_create", first_request_lost)
    dead = FakeMcpServer()  # the greeting needs no search
    async with Rig(dead.url, standin, http, greet=True):
        done = await standin.wait_for_server_event("response.output_audio_transcript.done", timeout=10)
        assert done["transcript"] == GREETING
        assert await lost[0] == (1, False)  # one socket dropped, with no answer streaming on it
    assert len(standin.connections) == 2  # the greeting came on the reconnected link
    assert len(standin.client_events("response.create")) == 2


async def test_a_greeting_cut_off_as_it_began_by_a_lost_model_link_is_asked_for_again(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's sockets drop while the greeting is streaming (the soak's dropped model hit a room as it opened):
    the plugin reconnects and closes the generation it had begun ("in-progress generation discarded"), so the
    greeting's speech ends as if finished, with no error and not interrupted, and the agent listens in silence
    after half a sentence. The agent asks for the greeting again once the link is back."""
    lost: list[asyncio.Task[tuple[int, bool]]] = []
    answer = RealtimeConnection._on_response_create

    def first_answer_cut(self: RealtimeConnection, event: dict[str, Any]) -> None:
        answer(self, event)
        if not lost:  # the link goes away once the greeting has begun streaming
            lost.append(asyncio.get_running_loop().create_task(drop_connections(standin, mid_answer=True, within_s=5)))

    monkeypatch.setattr(RealtimeConnection, "_on_response_create", first_answer_cut)
    dead = FakeMcpServer()  # the greeting needs no search
    async with Rig(dead.url, standin, http, greet=True):
        dropped, streaming = await lost[0]
        assert (dropped, streaming) == (1, True)  # cut while the greeting streamed
        done = await standin.wait_for_server_event(
            "response.output_audio_transcript.done", lambda e: e["transcript"] == GREETING, timeout=15
        )
        assert done["transcript"] == GREETING
    assert len(standin.connections) == 2  # the whole greeting came on the reconnected link
    assert len(standin.client_events("response.create")) == 2


async def test_a_greeting_the_model_finished_is_not_asked_again_when_the_link_drops_as_it_plays(
    standin: RealtimeStandIn, http: aiohttp.ClientSession
) -> None:
    """The model sent the whole greeting and the link drops while its audio is still playing out: nothing was
    lost, so the person must not hear the greeting twice."""
    dead = FakeMcpServer()
    async with Rig(dead.url, standin, http, greet=True) as rig:
        await standin.wait_for_server_event("response.done", timeout=10)
        greeting = rig.session.current_speech
        assert greeting is not None  # still playing
        mark = len(standin.received)
        await drop_connections(standin, mid_answer=False, within_s=0)
        await standin.wait_for_client_event("session.update", after=mark, timeout=10)  # the link is back
        await asyncio.wait_for(greeting.wait_for_playout(), 15)
        await asyncio.sleep(1.0)  # a re-asked greeting would be requested at once
    assert len(standin.client_events("response.create")) == 1


async def test_an_answer_cut_off_by_a_lost_model_link_is_asked_for_again(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typed question is researched and the model's sockets drop while its answer streams (the soak's dropped
    model hit a person mid-question): the plugin closes the half-said answer as if finished and the agent listens
    in silence. The agent asks the model to answer that question again once the link is back."""
    lost: list[asyncio.Task[tuple[int, bool]]] = []
    answer = RealtimeConnection._on_response_create

    def answer_cut(self: RealtimeConnection, event: dict[str, Any]) -> None:
        answer(self, event)
        if len(standin.client_events("response.create")) == 2 and not lost:  # the call, then its spoken answer
            lost.append(asyncio.get_running_loop().create_task(drop_connections(standin, mid_answer=True, within_s=5)))

    monkeypatch.setattr(RealtimeConnection, "_on_response_create", answer_cut)
    async with Rig(mcp.url, standin, http, greet=False) as rig:
        chat_handler(rig.room)(TextReader("pregunta escrita"), USER_IDENTITY)
        await standin.wait_for_client_event("response.create", after=0, timeout=10)
        while not lost:
            await standin.wait_for_client_event("response.create", after=len(standin.received), timeout=10)
        assert await lost[0] == (1, True)  # cut while the answer streamed
        again = await standin.wait_for_client_event(
            "response.create",
            lambda e: str((e.get("response") or {}).get("instructions")).endswith(REANSWER),
            timeout=15,
        )
        assert again is not None
        done = await standin.wait_for_server_event("response.done", after=len(standin.sent), timeout=15)
        assert done["response"]["status"] == "completed"  # the answer came whole on the new link
    assert rig.research.turns.current == 1  # the same turn: the question was not taken as a new one


async def test_a_question_cut_mid_sentence_by_a_lost_model_link_is_asked_to_be_repeated(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    """The model's sockets drop while the person is speaking (the soak's dropped model hit a spoken question): their
    words so far went with the old link, no response was ever begun, and the agent listened in silence. The agent
    apologises and asks the person to repeat the question."""
    async with Rig(mcp.url, standin, http, greet=False):
        await standin.inject_speech_started()
        await standin.wait_for_server_event("input_audio_buffer.speech_started", timeout=5)
        await asyncio.sleep(0.2)  # the plugin has passed it on
        assert await drop_connections(standin, mid_answer=False, within_s=0) == (1, False)
        again = await standin.wait_for_client_event(
            "response.create",
            lambda e: str((e.get("response") or {}).get("instructions")).endswith(REHEAR),
            timeout=10,
        )
        assert again is not None
    assert len(standin.connections) == 2


async def test_typed_chat_is_a_new_turn_and_is_researched(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    async with Rig(mcp.url, standin, http, greet=False) as rig:
        chat_handler(rig.room)(TextReader("pregunta escrita"), USER_IDENTITY)  # as the room delivers lk.chat
        await standin.wait_for_client_event(
            "conversation.item.create", lambda e: e["item"]["type"] == "function_call_output", timeout=10
        )
        for _ in range(50):
            if rig.types() == ["started", "completed"]:
                break
            await asyncio.sleep(0.05)
    assert rig.research.turns.current == 1
    assert rig.types() == ["started", "completed"]
    assert rig.messages[0]["query"] == "pregunta escrita"


async def test_repeated_call_id_runs_one_search(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    async with Rig(mcp.url, standin, http, greet=False) as rig:
        standin.script_function_call(call_id="call_repeated", arguments={"query": "uno"})
        await standin.inject_user_turn("uno")
        first = await standin.wait_for_client_event(
            "conversation.item.create", lambda e: e["item"]["type"] == "function_call_output", timeout=10
        )
        await standin.wait_for_server_event("response.done", after=len(standin.sent), timeout=10)
        standin.script_function_call(call_id="call_repeated", arguments={"query": "uno"})
        await standin.inject_user_turn("uno otra vez")
        second = await standin.wait_for_client_event(
            "conversation.item.create",
            lambda e: e["item"]["type"] == "function_call_output",
            after=standin.received.index(first) + 1,
            timeout=10,
        )
    assert second["item"]["output"] == first["item"]["output"]
    assert mcp.tool_calls_started == 1
    assert rig.types() == ["started", "completed"]
    assert len(outputs_on_wire(standin)) == 2


async def test_a_call_dropped_by_the_framework_is_still_answered(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    """The user speaks after the call arrives but before the agent's turn begins: livekit-agents never
    runs the tool; the guard answers the open call as discarded, without a reply and without a search."""
    async with Rig(mcp.url, standin, http, greet=False) as rig:
        await standin.inject_user_turn("pregunta interrumpida")
        call = await standin.wait_for_server_event(
            "response.output_item.done", lambda e: e["item"]["type"] == "function_call", timeout=10
        )
        creates_before = standin.response_create_count
        await standin.inject_speech_started()
        output_event = await standin.wait_for_client_event(
            "conversation.item.create", lambda e: e["item"]["type"] == "function_call_output", timeout=5
        )
        assert output_event["item"]["call_id"] == call["item"]["call_id"]
        assert output_event["item"]["output"] == DISCARDED_OUTPUT
        assert standin.response_create_count == creates_before
        assert rig.executed.empty()  # the framework never ran this call, so nothing of its asks for a reply
    assert mcp.tool_calls_started == 0
    assert rig.messages == []


async def test_tool_span_sits_inside_livekit_turn_spans(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    exporter = InMemorySpanExporter()

    class _NoOtlp:
        otlp_endpoint = None

    provider = setup_tracing(_NoOtlp(), span_processors=[SimpleSpanProcessor(exporter)])
    assert provider is not None
    async with Rig(mcp.url, standin, http, greet=False):
        await standin.inject_user_turn("pregunta con trazas")
        await standin.wait_for_client_event(
            "conversation.item.create", lambda e: e["item"]["type"] == "function_call_output", timeout=10
        )
    provider.force_flush()
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    tool = next(s for s in spans if s.name == "voice.mcp.tool_call")
    ancestors = []
    parent = tool.parent
    while parent is not None and parent.span_id in by_id:
        ancestors.append(by_id[parent.span_id].name)
        parent = by_id[parent.span_id].parent
    assert ancestors, "the tool span has no parent: LiveKit's tracer hook is not wired"
    assert ancestors[:2] == ["function_tool", "agent_turn"], ancestors  # inside LiveKit's own turn spans
    assert "pregunta con trazas" not in repr([dict(s.attributes or {}) for s in spans if s.name.startswith("voice.")])


async def test_a_search_discarded_without_an_interruption_asks_for_no_reply(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    """The guard can discard a search while the framework sees no interruption (the model connection was
    lost and restored, for one). Then only the tool's own answer, `ToolResult(reply_required=False)`, keeps
    the model from speaking about evidence the user will never see."""
    mcp.behaviour.delay_s = 5.0
    async with Rig(mcp.url, standin, http, greet=False) as rig:
        search = mcp.next_call()
        await standin.inject_user_turn("pregunta lenta")
        await asyncio.wait_for(search.started.wait(), 10)
        rig.research.new_user_turn()  # the guard moves on; the framework's speech is not interrupted
        output_event = await standin.wait_for_client_event(
            "conversation.item.create", lambda e: e["item"]["type"] == "function_call_output", timeout=5
        )
        assert output_event["item"]["output"] == DISCARDED_OUTPUT
        executed = await rig.tools_executed()
        assert [o.call_id for o in executed.function_call_outputs] == [output_event["item"]["call_id"]]
        assert not executed.has_tool_reply
    assert rig.types() == ["started", "discarded"]


# At 60 ms a character the stand-in's greeting plays for about 5 s; after 2 s part of it has reached the
# room's audio output (earlier, the framework may count it as never played) and most of it is still to come.
GREETING_PLAYING_S = 2.0


def speech_messages(room: Any) -> list[dict[str, Any]]:
    """The `lexvoz.speech` messages the agent published to the room, in order."""
    return [
        json.loads(call.args[0])
        for call in room.local_participant.publish_data.await_args_list
        if call.kwargs.get("topic") == speech.TOPIC
    ]


def assistant_items(rig: Rig) -> asyncio.Queue[ChatMessage]:
    """The assistant messages the session adds to the conversation (the framework's own account)."""
    queue: asyncio.Queue[ChatMessage] = asyncio.Queue()

    def _added(ev: ConversationItemAddedEvent) -> None:
        if isinstance(ev.item, ChatMessage) and ev.item.role == "assistant":
            queue.put_nowait(ev.item)

    rig.session.on("conversation_item_added", _added)
    return queue


async def _cut_by_voice(standin: RealtimeStandIn, rig: Rig) -> None:
    await standin.inject_speech_started()  # the person talks over it


async def _cut_by_typing(standin: RealtimeStandIn, rig: Rig) -> None:
    chat_handler(rig.room)(TextReader("pregunta escrita"), USER_IDENTITY)  # typed while the agent speaks


@pytest.mark.parametrize("cut", [_cut_by_voice, _cut_by_typing], ids=["voice", "typed"])
async def test_speech_cut_off_is_reported_to_the_page(
    http: aiohttp.ClientSession, mcp: FakeMcpServer, cut: Callable[[RealtimeStandIn, Rig], Awaitable[None]]
) -> None:
    async with RealtimeStandIn(speed=1.0, ms_per_char=60) as slow, Rig(mcp.url, slow, http, greet=True) as rig:
        items = assistant_items(rig)
        await slow.wait_for_server_event("response.output_audio.delta", timeout=10)
        await asyncio.sleep(GREETING_PLAYING_S)
        await cut(slow, rig)
        item = await asyncio.wait_for(items.get(), 10)
        assert item.interrupted
        await until(rig.room, lambda: speech_messages(rig.room) != [])
        assert all(m == {"v": 1, "type": "interrupted"} for m in speech_messages(rig.room))  # no text, no id


async def test_speech_said_to_the_end_is_not_reported(
    standin: RealtimeStandIn, http: aiohttp.ClientSession, mcp: FakeMcpServer
) -> None:
    async with Rig(mcp.url, standin, http, greet=True) as rig:
        items = assistant_items(rig)
        item = await asyncio.wait_for(items.get(), 10)
        assert not item.interrupted
        await asyncio.sleep(0.2)  # a message would be published right after the item
        assert speech_messages(rig.room) == []

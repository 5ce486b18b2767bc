"""Builds one conversation: the realtime model, the research session and the agent, wired to a room.

Kept apart from the worker entry so tests can run the same wiring against a mocked room and a local
Realtime stand-in, with no LiveKit server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from livekit import rtc
from livekit.agents import AgentSession, CloseEvent, TurnHandlingOptions
from livekit.agents import vad as agents_vad
from livekit.agents.types import ATTRIBUTE_AGENT_STATE
from livekit.agents.voice.room_io import RoomOptions, TextInputOptions, TextOutputOptions
from livekit.plugins import openai
from openai.types.realtime import AudioTranscription
from openai.types.realtime.realtime_audio_input_turn_detection import SemanticVad

from agent.mcp.breaker import BreakerOptions
from agent.mcp.gateway import GatewayOptions, McpGateway
from agent.mcp.shared import SharedGateway, close_process_gateway, process_gateway
from agent.ops import metrics
from agent.settings import Settings
from agent.voice.assistant import LexvozAgent, make_text_input_cb
from agent.voice.evidence import EvidencePublisher
from agent.voice.heartbeat import Heartbeat
from agent.voice.model_link import ModelFailure, ModelLink
from agent.voice.observers import count_citation, count_tool_call
from agent.voice.pacing import TranscriptPacer
from agent.voice.page_hello import PageHello
from agent.voice.research import ResearchSession, ToolEvent
from agent.voice.speech import InterruptionNotifier
from agent.voice.spoken import CitationEvent

logger = logging.getLogger("lexvoz.conversation")

MODE_ATTRIBUTE = "lexvoz.mode"
# Set on the agent participant when the agent ends the conversation itself; the page says why.
END_REASON_ATTRIBUTE = "lexvoz.end_reason"
END_REASON_MAX_DURATION = "max_duration"
FAREWELL = (
    "Despídete en español en una o dos frases: explica que la conversación llegó a su duración máxima "
    "de {minutes} minutos y que la persona puede iniciar una nueva desde la página."
)
FAREWELL_TIMEOUT_S = 20.0
# How long an ending conversation waits for its queued research messages (each takes milliseconds to send).
EVIDENCE_DRAIN_S = 2.0
REHEARSAL_API_KEY = "rehearsal-mode-no-openai"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


def gateway_options(settings: Settings) -> GatewayOptions:
    return GatewayOptions(
        url=str(settings.mcp_url),
        token=settings.mcp_token.get_secret_value() if settings.mcp_token else None,
        call_timeout_s=settings.mcp_call_timeout_s,
        connect_timeout_s=settings.mcp_connect_timeout_s,
        retry_delay_s=settings.mcp_retry_delay_s,
        breaker=BreakerOptions(settings.breaker_failure_threshold, settings.breaker_reset_s),
        connects_per_minute=settings.mcp_connects_per_minute,
        insecure_hosts=settings.mcp_insecure_hosts,
        max_reply_bytes=settings.mcp_max_reply_bytes,
        mask_queries=settings.mcp_mask_queries,
    )


def shared_gateway(settings: Settings) -> SharedGateway:
    """One MCP session per worker process, shared by every room the process serves (any executor)."""
    return process_gateway(gateway_options(settings))


class LexvozRealtimeModel(openai.realtime.RealtimeModel):
    """The OpenAI Realtime model, plus listeners told about each realtime session as it is created.

    A session starts connecting as soon as it exists, before `AgentSession.start` returns, so a listener
    attached afterwards could miss the first server event; `session()` is the one moment that is early
    enough. The `ModelLink` uses it to know whether a model is really connected.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.session_listeners: list[Callable[[Any], None]] = []

    def session(self, *, turn_detection_disabled: bool = False) -> Any:
        rt_session = super().session(turn_detection_disabled=turn_detection_disabled)
        for listener in self.session_listeners:
            listener(rt_session)
        return rt_session


async def close_shared_gateway(reason: str = "worker shutdown") -> None:
    """Close this process's MCP session explicitly (a DELETE to the server) and forget it."""
    await close_process_gateway(reason)


def build_realtime_model(
    settings: Settings, *, http_session: aiohttp.ClientSession | None = None
) -> LexvozRealtimeModel:
    """Semantic VAD at low eagerness, Spanish transcription; `http_session` only outside a job (tests)."""
    if settings.rehearsal:
        api_key = REHEARSAL_API_KEY
    elif settings.openai_api_key is not None:
        api_key = settings.openai_api_key.get_secret_value()
    else:
        raise RuntimeError("missing setting OPENAI_API_KEY (or set LEXVOZ_REHEARSAL=1 with a local stand-in)")
    kwargs: dict[str, Any] = {}
    if http_session is not None:
        kwargs["http_session"] = http_session
    if settings.openai_base_url is not None:
        kwargs["base_url"] = str(settings.openai_base_url).rstrip("/")
    model = LexvozRealtimeModel(
        model=settings.realtime_model,
        voice=settings.voice,
        api_key=api_key,
        turn_detection=SemanticVad(type="semantic_vad", eagerness="low", interrupt_response=True, create_response=True),
        input_audio_transcription=AudioTranscription(model="gpt-4o-mini-transcribe", language="es"),
        **kwargs,
    )
    # Not a constructor argument in livekit-plugins-openai 1.8.9; sent as session.max_output_tokens.
    model.update_options(max_response_output_tokens=settings.max_output_tokens)
    return model


def realtime_endpoint(settings: Settings) -> str:
    return str(settings.openai_base_url) if settings.openai_base_url is not None else DEFAULT_OPENAI_BASE_URL


@dataclass
class Conversation:
    """Everything one conversation is made of, built by `build_conversation` and nowhere else."""

    room: rtc.Room
    settings: Settings
    gateway: McpGateway | SharedGateway
    model: LexvozRealtimeModel
    research: ResearchSession
    agent: LexvozAgent
    session: AgentSession[None]
    room_options: RoomOptions
    link: ModelLink
    interruptions: InterruptionNotifier
    # LEXVOZ_TRANSCRIPT_PACING=played: the agent's words paced by the audio played (agent/voice/pacing.py).
    pacer: TranscriptPacer | None = None
    # The agent's sign of life in the room (`lexvoz.heartbeat`), so a dead worker's agent can be told apart.
    heartbeat: Heartbeat | None = None
    first_write: asyncio.Task[None] | None = None  # the agent's first attributes (mode, model link, heartbeat)
    warm_up: asyncio.Task[None] | None = None
    time_limit: asyncio.Task[None] | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    end_reason: str | None = None
    _counted: bool = False
    _finishing: bool = False
    _on_end: Callable[[str], None] | None = None

    async def start(self, *, on_end: Callable[[str], None] | None = None) -> None:
        """Join the session to the room. `on_end(reason)` runs once, when the conversation is over and the
        room has been told why (the worker ends its job there instead of idling in the room)."""
        self._on_end = on_end
        # Not awaited: livekit-server's answer took 35 ms on an idle host and up to 0.6 s with ten people joining
        # at once, and the voice model's connection need not wait for it. Created before anything else that
        # writes these keys (the model link's writes follow server events, the heartbeat's a period later), so it
        # is issued first and cannot overwrite a newer value.
        self.first_write = asyncio.get_running_loop().create_task(
            _write_quietly(
                self.room,
                {**self.room_attributes(), **(self.heartbeat.attributes() if self.heartbeat is not None else {})},
            ),
            name="lexvoz-first-attributes",
        )
        if self.heartbeat is not None:
            self.heartbeat.start(carry=self.room_attributes)
        self.session.on("close", self._on_close)
        # Tells the page which agent line was cut off (see agent/voice/speech.py).
        self.interruptions.attach(self.session)
        if self.pacer is not None:
            self.pacer.attach(self.session)  # wraps the room's outputs before the first speech uses them
        # No remote-session host on the room (livekit-agents' default): it would stream every session event,
        # raw tool output included, to the room, and answer any participant's requests for the agent's
        # instructions and context or for a turn run around our typed-input path. Evidence reaches the room
        # only as validated `lexvoz.research` messages; the page needs nothing else.
        await self.session.start(agent=self.agent, room=self.room, room_options=self.room_options, session_host=False)
        if self.pacer is not None:
            self.pacer.install()
        metrics.sessions_active.inc()
        self._counted = True
        self.warm_up = asyncio.create_task(_warm_up(self.gateway))
        limit = asyncio.create_task(
            end_after(self.session, self.room.local_participant, self.settings.max_conversation_s)
        )
        self.time_limit = limit
        self.session.on("close", lambda _ev: limit.cancel())

    def room_attributes(self) -> dict[str, str]:
        """What the room must show of this agent now: its mode, its voice model's link and, once the session has
        one, its state. Written first at the start, then carried by every heartbeat (agent/voice/heartbeat.py)."""
        attrs = {MODE_ATTRIBUTE: "rehearsal" if self.settings.rehearsal else "live", **self.link.attributes()}
        if (state := self.session.agent_state) != "initializing":  # livekit-agents writes none before its first
            attrs[ATTRIBUTE_AGENT_STATE] = state
        return attrs

    def _on_model_failure(self, failure: ModelFailure) -> None:
        # livekit-agents 1.8.9 closes the session on this error, but its close re-raises the realtime
        # error before emitting "close"; so the end is driven from here, not only from the close event.
        self._finish(f"voice model failed ({failure.cause})")

    def _on_close(self, ev: CloseEvent) -> None:
        failure = self.link.failure
        self._finish(f"voice model failed ({failure.cause})" if failure else ev.reason.value)

    def _finish(self, reason: str) -> None:
        if self._finishing:
            return
        self._finishing = True
        # A search running now can never be answered: cancel it and discard its evidence like a stale turn.
        self.research.end()
        if self.heartbeat is not None:
            self.heartbeat.stop()
        if self._counted:
            metrics.sessions_active.dec()
            self._counted = False

        async def _tell_then_end() -> None:
            await self.link.settled()  # the room hears why before the agent leaves it
            # ...and gets the research messages still queued, so no card is left "searching" on the page.
            if not await self.research.drain(EVIDENCE_DRAIN_S):
                logger.warning("research messages still queued when the conversation ended")
            self.end_reason = reason
            self.ended.set()
            if self._on_end is not None:
                self._on_end(reason)

        task = asyncio.get_running_loop().create_task(_tell_then_end())
        _background.add(task)
        task.add_done_callback(_background.discard)


_background: set[asyncio.Task[None]] = set()


def build_conversation(
    room: rtc.Room,
    settings: Settings,
    *,
    gateway: McpGateway | SharedGateway | None = None,
    vad: agents_vad.VAD | None = None,
    observers: list[Callable[[ToolEvent], None]] | None = None,
    citation_observers: list[Callable[[CitationEvent], None]] | None = None,
    greet: bool = True,
    page: PageHello | None = None,
    http_session: aiohttp.ClientSession | None = None,
) -> Conversation:
    """The one place the conversation is wired: model, research session, agent, observers, room options.

    `page`: the page's hello, listened for since before the agent joined, to choose the opening line."""
    gw = gateway or shared_gateway(settings)
    research = ResearchSession(
        gw,
        EvidencePublisher(room.local_participant),
        searches_per_minute=settings.searches_per_minute,
        observers=[count_tool_call, *(observers or [])],
        citation_observers=[count_citation, *(citation_observers or [])],
    )
    model = build_realtime_model(settings, http_session=http_session)
    # Without a local VAD the Realtime model's own turn detection is the only one (no client turn detector).
    session: AgentSession[None] = (
        AgentSession(llm=model, vad=vad)
        if vad is not None
        else AgentSession(llm=model, vad=None, turn_handling=TurnHandlingOptions(turn_detection="realtime_llm"))
    )
    agent = LexvozAgent(research, greet=greet, page=page, room=room)
    room_options = RoomOptions(
        text_input=TextInputOptions(text_input_cb=make_text_input_cb(agent)),
        text_output=TextOutputOptions(sync_transcription=settings.transcript_pacing == "framework"),
    )
    link = ModelLink(room.local_participant, endpoint=realtime_endpoint(settings))
    conversation = Conversation(
        room=room,
        settings=settings,
        gateway=gw,
        model=model,
        research=research,
        agent=agent,
        session=session,
        room_options=room_options,
        link=link,
        interruptions=InterruptionNotifier(room.local_participant),
        pacer=TranscriptPacer() if settings.transcript_pacing == "played" else None,
        heartbeat=Heartbeat(room.local_participant),
    )
    link.on_failure = conversation._on_model_failure
    model.session_listeners.append(link.watch)
    return conversation


async def start_conversation(
    room: rtc.Room,
    settings: Settings,
    *,
    gateway: McpGateway | SharedGateway | None = None,
    vad: agents_vad.VAD | None = None,
    observers: list[Callable[[ToolEvent], None]] | None = None,
    citation_observers: list[Callable[[CitationEvent], None]] | None = None,
    greet: bool = True,
    page: PageHello | None = None,
    http_session: aiohttp.ClientSession | None = None,
    on_end: Callable[[str], None] | None = None,
) -> Conversation:
    conversation = build_conversation(
        room,
        settings,
        gateway=gateway,
        vad=vad,
        observers=observers,
        citation_observers=citation_observers,
        greet=greet,
        page=page,
        http_session=http_session,
    )
    await conversation.start(on_end=on_end)
    return conversation


class _AttributeTarget(Protocol):
    async def set_attributes(self, attributes: dict[str, str]) -> None: ...


async def end_after(session: AgentSession[Any], participant: _AttributeTarget, max_s: float) -> None:
    """The conversation's maximum length: tell the page why, say goodbye in Spanish, close the session."""
    await asyncio.sleep(max_s)
    logger.info("conversation reached its maximum length (%g s); ending it", max_s)
    try:
        await participant.set_attributes({END_REASON_ATTRIBUTE: END_REASON_MAX_DURATION})
    except Exception as exc:
        logger.warning("could not set the end reason attribute (%s)", type(exc).__name__)
    try:
        handle = session.generate_reply(
            instructions=FAREWELL.format(minutes=round(max_s / 60)), allow_interruptions=False
        )
        await asyncio.wait_for(handle.wait_for_playout(), FAREWELL_TIMEOUT_S)
    except Exception as exc:  # the goodbye is best effort; the session ends either way
        logger.warning("farewell not delivered (%s)", type(exc).__name__)
    await session.aclose()


async def _write_quietly(room: rtc.Room, attributes: dict[str, str]) -> None:
    """One attribute write of the agent's whose failure only loses itself (the room may be going away; the
    heartbeat writes the same attributes again a period later)."""
    try:
        await room.local_participant.set_attributes(attributes)
    except Exception as exc:
        logger.warning("could not write the agent's first attributes (%s)", type(exc).__name__)


async def _warm_up(gateway: McpGateway | SharedGateway) -> None:
    """Connect early so the first question is fast; a dead server must not stop the greeting."""
    try:
        await gateway.connect()
    except Exception as exc:
        logger.warning("MCP server not reachable yet (%s); searches will retry on demand", type(exc).__name__)


__all__ = [
    "END_REASON_ATTRIBUTE",
    "Conversation",
    "LexvozRealtimeModel",
    "ToolEvent",
    "build_conversation",
    "build_realtime_model",
    "close_shared_gateway",
    "end_after",
    "shared_gateway",
    "start_conversation",
]

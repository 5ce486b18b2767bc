"""Builds one conversation: the realtime model, the research session and the agent, wired to a room.

Kept apart from the worker entry so tests can run the same wiring against a mocked room and a local
Realtime stand-in, with no LiveKit server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from livekit import rtc
from livekit.agents import AgentSession
from livekit.agents import vad as agents_vad
from livekit.agents.voice.room_io import RoomOptions, TextInputOptions
from livekit.plugins import openai
from openai.types.realtime import AudioTranscription
from openai.types.realtime.realtime_audio_input_turn_detection import SemanticVad

from agent.mcp.breaker import BreakerOptions
from agent.mcp.gateway import GatewayOptions, McpGateway
from agent.ops import metrics
from agent.settings import Settings
from agent.voice.assistant import LexvozAgent, make_text_input_cb
from agent.voice.evidence import EvidencePublisher
from agent.voice.observers import count_tool_call
from agent.voice.research import ResearchSession, ToolEvent

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
REHEARSAL_API_KEY = "rehearsal-mode-no-openai"

_gateway: McpGateway | None = None


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


def shared_gateway(settings: Settings) -> McpGateway:
    """One MCP session per worker process, shared by every room the process serves."""
    global _gateway
    if _gateway is None:
        _gateway = McpGateway(gateway_options(settings))
    return _gateway


async def close_shared_gateway(reason: str = "worker shutdown") -> None:
    """Close this process's MCP session explicitly (a DELETE to the server), e.g. when the job ends."""
    global _gateway
    gateway, _gateway = _gateway, None
    if gateway is not None:
        await gateway.aclose(reason)


def build_realtime_model(
    settings: Settings, *, http_session: aiohttp.ClientSession | None = None
) -> openai.realtime.RealtimeModel:
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
    model = openai.realtime.RealtimeModel(
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


@dataclass
class Conversation:
    session: AgentSession[Any]
    agent: LexvozAgent
    research: ResearchSession
    warm_up: asyncio.Task[None] | None = None
    time_limit: asyncio.Task[None] | None = None


async def start_conversation(
    room: rtc.Room,
    settings: Settings,
    *,
    gateway: McpGateway | None = None,
    vad: agents_vad.VAD | None = None,
    observers: list[Any] | None = None,
    greet: bool = True,
) -> Conversation:
    gw = gateway or shared_gateway(settings)
    research = ResearchSession(
        gw,
        EvidencePublisher(room.local_participant),
        searches_per_minute=settings.searches_per_minute,
        observers=[count_tool_call, *(observers or [])],
    )
    session: AgentSession[Any] = AgentSession(llm=build_realtime_model(settings), vad=vad)
    agent = LexvozAgent(research, greet=greet)
    with contextlib.suppress(Exception):
        await room.local_participant.set_attributes({MODE_ATTRIBUTE: "rehearsal" if settings.rehearsal else "live"})
    await session.start(
        agent=agent,
        room=room,
        room_options=RoomOptions(text_input=TextInputOptions(text_input_cb=make_text_input_cb(agent))),
    )
    metrics.sessions_active.inc()
    session.on("close", lambda _ev: metrics.sessions_active.dec())
    conversation = Conversation(session=session, agent=agent, research=research)
    conversation.warm_up = asyncio.create_task(_warm_up(gw))
    limit = asyncio.create_task(end_after(session, room.local_participant, settings.max_conversation_s))
    conversation.time_limit = limit
    session.on("close", lambda _ev: limit.cancel())
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


async def _warm_up(gateway: McpGateway) -> None:
    """Connect early so the first question is fast; a dead server must not stop the greeting."""
    try:
        await gateway.connect()
    except Exception as exc:
        logger.warning("MCP server not reachable yet (%s); searches will retry on demand", type(exc).__name__)


__all__ = [
    "END_REASON_ATTRIBUTE",
    "Conversation",
    "ToolEvent",
    "build_realtime_model",
    "close_shared_gateway",
    "end_after",
    "shared_gateway",
    "start_conversation",
]

"""One eval conversation: the real `LexvozAgent`, the worker's realtime model builder, the real gateway and a
scripted search service, driven turn by turn with livekit-agents' testing API.

How turns are driven, and why: `AgentSession.run(user_input=...)` does drive a `RealtimeModel` in
livekit-agents 1.8.9 (the text goes in as a `conversation.item.create` user message followed by a
`response.create`, and the run follows the tool call and the tool reply), so every turn is a real
`RunResult`. Two differences from a typed `lk.chat` turn are bridged here: the run does not pass through
the worker's text callback, so `ask` first calls the agent's `on_new_user_turn` (what
`make_text_input_cb` does before handing the text to the framework); and the realtime path records no
user message event in the run, so checks skip it when present rather than expect it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from livekit.agents import AgentSession
from livekit.agents.voice.run_result import RunResult

from agent.mcp.breaker import BreakerOptions
from agent.mcp.gateway import GatewayError, GatewayOptions, McpGateway
from agent.settings import Settings
from agent.voice.assistant import LexvozAgent
from agent.voice.conversation import build_realtime_model
from agent.voice.evidence import EvidencePublisher
from agent.voice.research import ResearchSession
from realtime_standin import RealtimeStandIn, ResponsePolicy
from tests.fakes import RecordingParticipant
from tests.mcp_fixture import FakeMcpServer

OFFLINE_TURN_TIMEOUT_S = 15.0
LIVE_TURN_TIMEOUT_S = 90.0
BREAKER = BreakerOptions(failure_threshold=3, reset_timeout_s=60.0)


@dataclass
class EvalRig:
    """A started conversation; `search` is the scripted service, mutate its behaviour between turns."""

    search: FakeMcpServer
    gateway: McpGateway
    agent: LexvozAgent
    session: AgentSession[Any]
    turn_timeout_s: float
    room: RecordingParticipant
    """What the agent published to the room (research messages, `citation_checked` among them)."""
    model: Settings | ResponsePolicy
    greeting: RunResult[Any] | None = None
    turns: list[RunResult[Any]] = field(default_factory=list)

    async def ask(self, text: str) -> RunResult[Any]:
        """One typed user turn, as the worker's text callback runs it; returns the finished run."""
        self.agent.on_new_user_turn()
        async with asyncio.timeout(self.turn_timeout_s):
            result = await self.session.run(user_input=text)
            await self.agent.research.spoken.drain()
        self.turns.append(result)
        return result

    def research_messages(self, kind: str) -> list[dict[str, Any]]:
        """The research messages of one type the room received, in order."""
        return [m for m in self.room.messages if m.get("type") == kind]

    async def open_breaker(self) -> None:
        """Make the search service fail until the gateway's breaker opens, as repeated outages would."""
        self.search.behaviour.call_faults = [503] * (2 * BREAKER.failure_threshold)
        for _ in range(BREAKER.failure_threshold):
            with contextlib.suppress(GatewayError):
                await self.gateway.search({"query": "comprobación de disponibilidad"})
        try:
            await self.gateway.search({"query": "comprobación de disponibilidad"})
        except GatewayError as exc:
            assert exc.reason == "circuit_open", f"the breaker did not open ({exc.reason})"
        else:
            raise AssertionError("the breaker did not open")


@contextlib.asynccontextmanager
async def conversation(
    model: Settings | ResponsePolicy,
    *,
    greet: bool,
    mcp_timeout_s: float,
) -> AsyncIterator[EvalRig]:
    """Live with `Settings` (the model they name); offline with a policy for the local Realtime stand-in."""
    search = FakeMcpServer()
    search.behaviour.results = []
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(search.running())
        http = await stack.enter_async_context(aiohttp.ClientSession())
        if isinstance(model, Settings):
            settings, timeout = model, LIVE_TURN_TIMEOUT_S
        else:
            standin = await stack.enter_async_context(RealtimeStandIn(speed=50.0, ms_per_char=5, policy=model))
            settings = Settings(OPENAI_API_KEY="offline-evals", OPENAI_BASE_URL=standin.base_url)
            timeout = OFFLINE_TURN_TIMEOUT_S
        gateway = McpGateway(
            GatewayOptions(
                url=search.url, call_timeout_s=mcp_timeout_s, connect_timeout_s=5, retry_delay_s=0.01, breaker=BREAKER
            )
        )
        stack.push_async_callback(gateway.aclose)
        room = RecordingParticipant()
        agent = LexvozAgent(ResearchSession(gateway, EvidencePublisher(room)), greet=greet)
        session: AgentSession[Any] = AgentSession(llm=build_realtime_model(settings, http_session=http))
        stack.push_async_callback(session.aclose)
        rig = EvalRig(search, gateway, agent, session, timeout, room, model)
        async with asyncio.timeout(timeout):
            if greet:
                rig.greeting = await (await session.start(agent, capture_run=True))
            else:
                await session.start(agent)
        yield rig

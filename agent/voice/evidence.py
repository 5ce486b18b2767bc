"""Research messages for the room: typed, versioned, and small enough for one reliable packet.

The page renders only what arrives here, so this module is the single definition of the wire format
on topic `lexvoz.research`. A message that would not fit a reliable data packet goes as a text stream
on the same topic instead of being cut.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent.contract import FailureReason, Source

logger = logging.getLogger("lexvoz.evidence")

TOPIC = "lexvoz.research"
MAX_PACKET_BYTES = 14_000


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    v: Literal[1] = 1
    call_id: str
    turn: int


class Started(_Message):
    type: Literal["started"] = "started"
    query: str


class Completed(_Message):
    type: Literal["completed"] = "completed"
    tool_duration_ms: Annotated[float, Field(ge=0)]
    sources: list[dict[str, str]]

    @classmethod
    def of(cls, call_id: str, turn: int, duration_ms: float, sources: list[Source]) -> Completed:
        return cls(
            call_id=call_id,
            turn=turn,
            tool_duration_ms=round(duration_ms, 1),
            sources=[s.public_dict() for s in sources],
        )


class Failed(_Message):
    type: Literal["failed"] = "failed"
    reason: FailureReason


class Discarded(_Message):
    type: Literal["discarded"] = "discarded"


class CitationChecked(BaseModel):
    """An article the agent named while speaking, checked against the sources delivered to it in this conversation.

    Not tied to one tool call: `call_id` is the call that delivered the matching source (its card on the page),
    None when no delivered source holds the citation. `said` is the agent's own words (a substring of what it
    said), for the page to mark next to the transcript; `source` the matching source's citation, as on its card."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    v: Literal[1] = 1
    type: Literal["citation_checked"] = "citation_checked"
    turn: int
    said: Annotated[str, Field(max_length=300)]
    article: Annotated[str, Field(max_length=20)]
    norm: Annotated[str, Field(max_length=200)] | None
    verified: bool
    source: Annotated[str, Field(max_length=1_000)] | None = None
    call_id: str | None = None


ResearchMessage = Started | Completed | Failed | Discarded | CitationChecked


class _LocalParticipant(Protocol):
    async def publish_data(self, payload: bytes | str, *, reliable: bool = ..., topic: str = ...) -> None: ...

    async def send_text(self, text: str, *, topic: str = ...) -> object: ...


class EvidencePublisher:
    """Sends research messages to everyone in the room, in the order they were posted, reliably, never raising
    into the conversation and never holding it up.

    Why a queue rather than an awaited send: a reliable publish returns only once livekit's native side has
    taken the packet, about 5 ms at the median and 11 ms at p95 on a busy 2-core host (`bench/evidence.py`,
    `held_*`). The tool used to wait for two of them per search, `started` before the search and `completed`
    before the model could read the answer, in front of the voice the person is waiting for. One sender task
    keeps the room's order (a card's `started` before its `completed`, a card before a citation check that names
    it) while the conversation goes on. `drain()` waits for what is queued, so a conversation that ends still
    delivers its last evidence.
    """

    def __init__(self, participant: _LocalParticipant) -> None:
        self._participant = participant
        self.failures = 0
        self._queue: deque[tuple[ResearchMessage, asyncio.Future[bool]]] = deque()
        self._sender: asyncio.Task[None] | None = None

    def post(self, message: ResearchMessage) -> asyncio.Future[bool]:
        """Queue a message and return at once; the future says whether it reached the room (never raises)."""
        loop = asyncio.get_running_loop()
        sent: asyncio.Future[bool] = loop.create_future()
        self._queue.append((message, sent))
        if self._sender is None or self._sender.done():
            self._sender = loop.create_task(self._send_queued(), name="lexvoz-evidence-sender")
        return sent

    async def publish(self, message: ResearchMessage) -> bool:
        """Queue a message behind those posted before it and wait until it has been handed to the room."""
        return await self.post(message)

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def drain(self, timeout_s: float | None = None) -> bool:
        """Wait until every message posted so far (and any posted meanwhile) has been handed to the room.

        Returns False if `timeout_s` passed first; the messages stay queued and the sender keeps going."""
        sender = self._sender
        if sender is None or sender.done():
            return True
        try:
            await asyncio.wait_for(asyncio.shield(sender), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _send_queued(self) -> None:
        while self._queue:
            message, sent = self._queue.popleft()
            ok = await self._send(message)
            if not sent.done():
                sent.set_result(ok)

    async def _send(self, message: ResearchMessage) -> bool:
        text = message.model_dump_json()
        payload = text.encode("utf-8")
        try:
            if len(payload) <= MAX_PACKET_BYTES:
                await self._participant.publish_data(payload, reliable=True, topic=TOPIC)
            else:
                await self._participant.send_text(text, topic=TOPIC)
        except Exception as exc:  # a room hiccup must not break the answer
            self.failures += 1
            logger.warning("could not publish %s message: %s", message.type, type(exc).__name__)
            return False
        return True

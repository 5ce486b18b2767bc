"""What the page tells an agent that joins its room: whether this person has already been greeted there.

Why: a conversation's agent can change while the person stays. livekit-server restarts and the page rejoins; the
worker that ran the job dies and the page asks for another agent; the person reloads the tab and resumes the same
room. Each new agent used to open with the whole greeting, introduction and disclaimer, to someone who heard it a
minute ago and was in the middle of a question, and who then waited through it (5-6 s of audio) before they could
ask again: in the soak, that greeting was half of every recovery from a livekit-server restart. Only the page knows
that this person was greeted in this room before: no server keeps conversations, and the new agent's job starts
with nothing (a fresh process, a fresh voice model session).

So the page sends one small message on topic `lexvoz.page` to each new agent it sees join: `{"v": 1, "type":
"hello", "resumed": true|false}`. A resumed person hears one short line that says the agent is back and does
not keep what was said before (`RESUME_LINE`: the new agent cannot see the earlier conversation, and the person
should know to ask again in full) instead of the greeting.

What the agent trusts of it: nothing beyond the choice between two fixed lines. It is read only from a
participant who is not an agent, only the first valid one counts, anything malformed or oversized is ignored, and
no hello within `HELLO_WAIT_S` of the agent being ready means the greeting (an older page, a packet lost, a
client that is not our page). The worst a forged hello can do is spare its sender the introduction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final, Literal

from livekit import rtc
from pydantic import BaseModel, ConfigDict, ValidationError

logger = logging.getLogger("lexvoz.assistant")

TOPIC: Final = "lexvoz.page"
# Far above the one message's ~45 bytes; anything larger is not our page's hello and is not parsed.
MAX_HELLO_BYTES: Final = 256
# How long a ready agent waits for the hello before it greets. The page sends it as soon as it sees the agent
# join, and the agent is ready only after it has also started its voice model's session, so the hello is usually
# there first; the wait only bounds a page that sends none, which then hears the greeting this much later.
HELLO_WAIT_S: Final = 1.5


class Hello(BaseModel):
    """The page's hello to a new agent: `resumed` when an agent has already spoken to this person in this room."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    v: Literal[1] = 1
    type: Literal["hello"] = "hello"
    resumed: bool


def parse_hello(packet: rtc.DataPacket) -> Hello | None:
    """The hello this packet carries, or None: another topic, a sender that is an agent or unknown, too large,
    not UTF-8 JSON, or not exactly a hello."""
    if packet.topic != TOPIC or packet.participant is None:
        return None
    if packet.participant.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
        return None
    if len(packet.data) > MAX_HELLO_BYTES:
        return None
    try:
        return Hello.model_validate_json(packet.data)
    except ValidationError:
        return None


class PageHello:
    """Listens for the page's hello from the moment it is made; make it before the agent joins the room, so a
    page that answers the join at once is not missed."""

    def __init__(self, room: rtc.Room) -> None:
        self._room = room
        self._hello: asyncio.Future[Hello] = asyncio.get_running_loop().create_future()
        room.on("data_received", self._on_data)

    def _on_data(self, packet: rtc.DataPacket) -> None:
        if self._hello.done():
            return
        hello = parse_hello(packet)
        if hello is not None:
            self._hello.set_result(hello)
            self.close()

    async def resumed(self, within: float = HELLO_WAIT_S) -> bool:
        """Whether the person was greeted in this room before; False when no hello came within `within` s."""
        try:
            hello = await asyncio.wait_for(asyncio.shield(self._hello), within)
        except TimeoutError:
            logger.info("no hello from the page within %.1f s; greeting", within)
            return False
        finally:
            self.close()
        return hello.resumed

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already removed, or the room is gone
            self._room.off("data_received", self._on_data)


__all__ = ["HELLO_WAIT_S", "MAX_HELLO_BYTES", "TOPIC", "Hello", "PageHello", "parse_hello"]

"""Speech messages for the room: the worker tells the page when the agent's speech was cut off.

The page used to guess, when the person sent a typed question, that the agent line still on screen was cut;
it could not see a line cut by the person's voice (the usual barge-in), and its guess could mark a line that
had just finished. The worker knows: livekit-agents adds each spoken assistant message to the conversation
(`conversation_item_added`) once its speech is over, with `interrupted` true when only part of it was played,
whichever way it was cut (voice or typed input). That event is forwarded here as one small message.

It travels on a topic of its own, `lexvoz.speech`, rather than as a new type on `lexvoz.research`: research
messages all name a search (`call_id`, `turn`) and feed the research panel, while this one is about the
transcript. Like the research topic, the page accepts it only from the agent participant. It carries no
conversation text and no id: the framework's message id is not what the page sees on the transcription
stream (`lk.segment_id` is a fresh id of the text output, not the message's), so the page marks the newest
agent line it has when the message arrives. That is the cut line: the framework adds the interrupted message
when its speech ends, before the next speech may start (one speech at a time), and this packet goes out on
the same reliable channel as the transcription streams, so no later agent line reaches the page first.

One gap of livekit-agents 1.8.9 is closed here too: a reply cut in its first moments is sometimes counted as
never played (no assistant message is added at all), although the agent was already speaking and its first
words were on the page (seen in some runs of the browser test). So a speech that ends interrupted
after the session went to "speaking" for it, without adding any assistant message, is reported as cut as
well. A speech whose messages were all played to the end (cut later, e.g. during a search) is not.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal, Protocol

from livekit.agents import AgentSession, ChatMessage
from livekit.agents.voice import AgentStateChangedEvent, ConversationItemAddedEvent, SpeechCreatedEvent, SpeechHandle
from pydantic import BaseModel, ConfigDict

logger = logging.getLogger("lexvoz.speech")

TOPIC = "lexvoz.speech"


class _LocalParticipant(Protocol):
    async def publish_data(self, payload: bytes | str, *, reliable: bool = ..., topic: str = ...) -> None: ...


class Interrupted(BaseModel):
    """The agent line being said was cut off: what the page shows of it is all the person heard."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    v: Literal[1] = 1
    type: Literal["interrupted"] = "interrupted"


SpeechMessage = Interrupted
# Every message of the topic, for the test that pins the page's copy of the protocol.
MESSAGES: tuple[type[SpeechMessage], ...] = (Interrupted,)


def was_cut_off(item: object) -> bool:
    """An assistant message whose speech the framework reports as only partly played."""
    return isinstance(item, ChatMessage) and item.role == "assistant" and item.interrupted


class InterruptionNotifier:
    """Publishes `interrupted` for every speech the session reports as cut off; never raises."""

    def __init__(self, participant: _LocalParticipant) -> None:
        self._participant = participant
        self._pending: set[asyncio.Task[bool]] = set()
        self._spoken: set[str] = set()  # speeches the session was "speaking" for, until they end
        self.failures = 0

    def attach(self, session: AgentSession[Any]) -> None:
        def _state(ev: AgentStateChangedEvent) -> None:
            speech = session.current_speech
            if ev.new_state == "speaking" and speech is not None:
                self._spoken.add(speech.id)

        session.on("conversation_item_added", self.on_item_added)
        session.on("speech_created", self.on_speech_created)
        session.on("agent_state_changed", _state)

    def on_item_added(self, ev: ConversationItemAddedEvent) -> None:
        if was_cut_off(ev.item):
            self._send()

    def on_speech_created(self, ev: SpeechCreatedEvent) -> None:
        ev.speech_handle.add_done_callback(self.on_speech_done)

    def on_speech_done(self, speech: SpeechHandle) -> None:
        """A cut speech the framework counted as never played, though the agent was speaking it."""
        spoke = speech.id in self._spoken
        self._spoken.discard(speech.id)
        said = [i for i in speech.chat_items if isinstance(i, ChatMessage) and i.role == "assistant"]
        if speech.interrupted and spoke and not said:
            self._send()

    def _send(self) -> None:
        task = asyncio.get_running_loop().create_task(self.publish(Interrupted()))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def publish(self, message: SpeechMessage) -> bool:
        try:
            await self._participant.publish_data(message.model_dump_json().encode("utf-8"), reliable=True, topic=TOPIC)
        except Exception as exc:  # a room hiccup must not break the conversation
            self.failures += 1
            logger.warning("could not publish %s message: %s", message.type, type(exc).__name__)
            return False
        return True

"""The worker's `lexvoz.speech` messages: which endings of the agent's speech it reports as cut off.

Driven through the session's public events with doubles for the session and the speech handles; the real
framework, on the Realtime stand-in, is in tests/test_conversation.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any
from unittest.mock import AsyncMock

from livekit.agents import ChatMessage
from livekit.agents.voice import AgentStateChangedEvent, ConversationItemAddedEvent, SpeechCreatedEvent

from agent.voice import speech


class FakeSpeech:
    def __init__(self, name: str) -> None:
        self.id = name
        self.interrupted = False
        self.chat_items: list[Any] = []
        self._done: list[Callable[[Any], None]] = []

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self._done.append(callback)

    def end(self, *, interrupted: bool, said: list[ChatMessage] | None = None) -> None:
        self.interrupted = interrupted
        self.chat_items = list(said or [])
        for callback in self._done:
            callback(self)


class FakeSession:
    def __init__(self) -> None:
        self.handlers: dict[str, list[Callable[[Any], None]]] = {}
        self.current_speech: FakeSpeech | None = None

    def on(self, event: str, callback: Callable[[Any], None]) -> None:
        self.handlers.setdefault(event, []).append(callback)

    def emit(self, event: str, ev: Any) -> None:
        for callback in self.handlers.get(event, []):
            callback(ev)

    def start(self, name: str, *, speaks: bool) -> FakeSpeech:
        handle = FakeSpeech(name)
        self.emit("speech_created", SpeechCreatedEvent.model_construct(speech_handle=handle))
        self.current_speech = handle
        if speaks:
            self.emit("agent_state_changed", AgentStateChangedEvent(old_state="thinking", new_state="speaking"))
        return handle

    def add(self, message: ChatMessage) -> ChatMessage:
        self.emit("conversation_item_added", ConversationItemAddedEvent(item=message))
        return message


def said(*, interrupted: bool) -> ChatMessage:
    return ChatMessage(role="assistant", content=["Modo de ensayo."], interrupted=interrupted)


def rig() -> tuple[FakeSession, AsyncMock, speech.InterruptionNotifier]:
    participant = AsyncMock()
    notifier = speech.InterruptionNotifier(participant)
    session = FakeSession()
    notifier.attach(session)  # type: ignore[arg-type]
    return session, participant, notifier


async def sent(participant: AsyncMock) -> list[dict[str, Any]]:
    await asyncio.sleep(0)  # the notifier publishes from a task
    await asyncio.sleep(0)
    out = []
    for call in participant.publish_data.await_args_list:
        assert call.kwargs == {"reliable": True, "topic": "lexvoz.speech"}
        out.append(json.loads(call.args[0]))
    return out


async def test_a_message_played_only_in_part_is_reported_once() -> None:
    session, participant, _ = rig()
    handle = session.start("s1", speaks=True)
    handle.end(interrupted=True, said=[session.add(said(interrupted=True))])
    assert await sent(participant) == [{"v": 1, "type": "interrupted"}]


async def test_a_cut_speech_counted_as_never_played_is_reported_when_the_agent_was_speaking() -> None:
    session, participant, _ = rig()
    session.start("s1", speaks=True).end(interrupted=True)  # no assistant message added
    assert await sent(participant) == [{"v": 1, "type": "interrupted"}]


async def test_nothing_is_reported_for_speech_said_in_full_or_never_begun() -> None:
    session, participant, _ = rig()
    session.start("full", speaks=True).end(interrupted=False, said=[session.add(said(interrupted=False))])
    # Cut while a search ran, after its words were all played: the line on the page is complete.
    session.start("search", speaks=True).end(interrupted=True, said=[session.add(said(interrupted=False))])
    session.start("silent", speaks=False).end(interrupted=True)  # cut before the agent said a word
    session.add(ChatMessage(role="user", content=["pregunta"], interrupted=True))
    assert await sent(participant) == []


async def test_a_room_that_refuses_the_packet_does_not_break_the_conversation() -> None:
    session, participant, notifier = rig()
    participant.publish_data.side_effect = ConnectionError("room gone")
    session.start("s1", speaks=True).end(interrupted=True)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert notifier.failures == 1

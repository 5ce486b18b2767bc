"""LostReplies on its own: when a reply the model's link lost is asked for again, and when it is not.

The integration tests in test_conversation.py cut real replies on the Realtime stand-in through the real plugin;
these pin the rules between the loss and the new request with a scripted session, one rule per test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from agent.voice import lost_replies
from agent.voice.lost_replies import REANSWER, REHEAR, LostReplies

GREETING = "saluda"


class PlayingSpeech:
    """A reply still being played: done once `finish()` is called, or once interrupted."""

    def __init__(self) -> None:
        self._done = asyncio.Event()
        self.interrupted = False

    def done(self) -> bool:
        return self._done.is_set()

    async def wait_for_playout(self) -> None:
        await self._done.wait()

    def finish(self) -> None:
        self._done.set()

    def interrupt(self) -> None:
        self.interrupted = True
        self._done.set()


class ScriptedSession:
    def __init__(self) -> None:
        self.current_speech: PlayingSpeech | None = None
        self.asked: list[str] = []
        self.handlers: dict[str, list[Callable[..., Any]]] = {}

    def on(self, event: str, callback: Callable[..., Any]) -> None:
        self.handlers.setdefault(event, []).append(callback)

    def generate_reply(self, *, instructions: str) -> None:
        self.asked.append(instructions)

    def agent_state(self, state: str) -> None:
        """`agent_state_changed`, as the framework emits it."""
        for callback in self.handlers.get("agent_state_changed", []):
            callback(SimpleNamespace(new_state=state))


class Link:
    """The realtime session's events, as the plugin emits them."""

    def __init__(self, lost: LostReplies) -> None:
        self.handlers: dict[str, list[Callable[..., Any]]] = {}
        lost.watch(self)

    def on(self, event: str, callback: Callable[..., Any]) -> None:
        self.handlers.setdefault(event, []).append(callback)

    def emit(self, event: str, payload: Any = None) -> None:
        for callback in self.handlers.get(event, []):
            callback(payload)

    def response(self, status: str | None = None) -> None:
        """`response.created`, and its `response.done` with `status` unless None (still open)."""
        self.emit("openai_server_event_received", {"type": "response.created"})
        if status is not None:
            self.emit("openai_server_event_received", {"type": "response.done", "response": {"status": status}})

    def reconnected(self) -> None:
        self.emit("session_reconnected")


def rig(*, greeting: str | None = GREETING) -> tuple[ScriptedSession, LostReplies, Link]:
    session = ScriptedSession()
    lost = LostReplies(session, greeting=greeting)  # type: ignore[arg-type]
    return session, lost, Link(lost)


def answer_cut_while_playing(session: ScriptedSession, lost: LostReplies, link: Link) -> PlayingSpeech:
    """The person asked, the model began its answer, and the link dropped with the answer's half still playing."""
    lost.user_took_turn()
    link.response()
    session.current_speech = speech = PlayingSpeech()
    link.reconnected()
    return speech


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_cut_greeting_is_asked_again_once_its_half_has_played() -> None:
    session, lost, link = rig()
    lost.greet(GREETING)
    link.response()  # the greeting begins
    session.current_speech = speech = PlayingSpeech()
    link.reconnected()  # and is cut
    await settle()
    assert session.asked == [GREETING]  # not while the cut half still plays
    speech.finish()
    await settle()
    assert session.asked == [GREETING, GREETING]


async def test_a_cut_opening_line_is_asked_again_with_the_instructions_it_was_given() -> None:
    """A person greeted before hears the agent's short line instead of the greeting (agent/voice/page_hello.py);
    cut by the link, that line is asked for again, not the whole greeting."""
    session, lost, link = rig(greeting=None)
    lost.greet("RESUME")
    link.response()
    link.reconnected()
    await settle()
    assert session.asked == ["RESUME", "RESUME"]


async def test_a_cut_answer_is_asked_again_with_the_apology() -> None:
    session, lost, link = rig()
    lost.user_took_turn()
    link.response()
    link.reconnected()
    await settle()
    assert session.asked == [REANSWER]


async def test_a_finished_reply_still_playing_when_the_link_drops_is_not_lost() -> None:
    session, lost, link = rig()
    lost.user_took_turn()
    link.response("completed")
    session.current_speech = PlayingSpeech()
    link.reconnected()
    await settle()
    assert session.asked == []


async def test_a_new_turn_after_the_loss_is_answered_instead() -> None:
    session, lost, link = rig()
    speech = answer_cut_while_playing(session, lost, link)
    lost.user_took_turn()  # the person spoke again before the cut half ended
    speech.finish()
    await settle()
    assert session.asked == []


async def test_a_response_the_model_finished_after_the_loss_means_the_conversation_went_on() -> None:
    """A call that arrived before the cut runs its tool and gets its spoken reply from the framework."""
    session, lost, link = rig()
    speech = answer_cut_while_playing(session, lost, link)
    link.response("completed")  # the tool's reply
    speech.finish()
    await settle()
    assert session.asked == []


async def test_nothing_is_owed_before_a_turn_when_the_conversation_is_not_greeted() -> None:
    session, _lost, link = rig(greeting=None)
    link.response()
    link.reconnected()
    await settle()
    assert session.asked == []


async def test_at_most_three_lost_replies_in_a_row_are_asked_again() -> None:
    session, lost, link = rig()
    lost.user_took_turn()
    for _ in range(5):
        link.response()
        link.reconnected()
        await settle()
    assert session.asked == [REANSWER] * 3
    link.response("completed")  # a finished reply starts the count over
    link.response()
    link.reconnected()
    await settle()
    assert session.asked == [REANSWER] * 4


async def test_nothing_is_asked_once_the_conversation_is_over() -> None:
    session, lost, link = rig()
    speech = answer_cut_while_playing(session, lost, link)
    lost.close()
    speech.finish()
    await settle()
    assert session.asked == []


async def test_a_question_cut_mid_sentence_is_asked_to_be_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lost_replies, "REHEAR_AFTER_S", 0.01)
    session, lost, link = rig()
    link.response("completed")  # the greeting
    link.emit("input_speech_started")
    lost.user_took_turn()
    link.reconnected()  # the person was still speaking
    await asyncio.sleep(0.05)
    assert session.asked == [REHEAR]


async def test_a_question_spoken_over_an_answer_and_cut_is_asked_to_be_repeated_not_the_old_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The person speaks over the agent's answer (a new question) and the link drops mid-sentence: what was lost
    is their new question. Answering "the last thing the person said" again would answer the old one."""
    monkeypatch.setattr(lost_replies, "REHEAR_AFTER_S", 0.01)
    session, lost, link = rig()
    lost.user_took_turn()
    link.response()  # the answer to the first question, still open
    link.emit("input_speech_started")  # the person speaks over it
    link.reconnected()
    await asyncio.sleep(0.05)
    assert session.asked == [REHEAR]


async def test_the_rest_of_a_cut_sentence_heard_as_a_new_turn_is_answered_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lost_replies, "REHEAR_AFTER_S", 0.05)
    session, lost, link = rig()
    link.emit("input_speech_started")
    lost.user_took_turn()
    link.reconnected()
    link.emit("input_speech_started")  # the new link hears the end of the sentence
    lost.user_took_turn()
    await asyncio.sleep(0.1)
    assert session.asked == []


async def test_a_finished_turn_the_model_had_not_begun_to_answer_is_answered() -> None:
    session, lost, link = rig()
    link.emit("input_speech_started")
    lost.user_took_turn()
    link.emit("input_speech_stopped")
    link.reconnected()  # before response.created
    await settle()
    assert session.asked == [REANSWER]


async def test_a_turn_whose_answer_began_and_finished_owes_nothing() -> None:
    session, lost, link = rig()
    link.emit("input_speech_started")
    lost.user_took_turn()
    link.emit("input_speech_stopped")
    link.response("completed")
    link.reconnected()
    await settle()
    assert session.asked == []


# -- the agent's own room connection --------------------------------------------------------------------


class Room:
    """The agent's `rtc.Room`: its connection's events, as livekit's SDK emits them."""

    def __init__(self, lost: LostReplies) -> None:
        self.handlers: dict[str, list[Callable[..., Any]]] = {}
        lost.watch_room(self)  # type: ignore[arg-type]

    def on(self, event: str, callback: Callable[..., Any]) -> None:
        self.handlers.setdefault(event, []).append(callback)

    def off(self, event: str, callback: Callable[..., Any]) -> None:
        self.handlers[event].remove(callback)

    def emit(self, event: str, *args: Any) -> None:
        for callback in list(self.handlers.get(event, [])):
            callback(*args)

    def full_reconnect(self, *, republished_first: bool = False) -> None:
        """The connection rebuilt from scratch (livekit-server restarted or killed): the SDK republishes the
        agent's track and reports the room back."""
        self.emit("reconnecting")
        if republished_first:
            self.emit("local_track_republished", object(), "TR_old")
        self.emit("reconnected")
        if not republished_first:
            self.emit("local_track_republished", object(), "TR_old")
        self.emit("local_track_subscribed", object())  # the person is back and hears the agent


def answering(session: ScriptedSession, lost: LostReplies) -> PlayingSpeech:
    """The person asked and the agent is speaking its answer."""
    lost.user_took_turn()
    session.current_speech = speech = PlayingSpeech()
    session.agent_state("speaking")
    return speech


@pytest.mark.parametrize("republished_first", [False, True])
async def test_an_answer_spoken_while_the_room_connection_was_rebuilt_is_cut_and_asked_again(
    republished_first: bool,
) -> None:
    session, lost, _link = rig()
    room = Room(lost)
    speech = answering(session, lost)
    room.full_reconnect(republished_first=republished_first)
    await settle()
    assert speech.interrupted  # its rest would follow a start the person never heard
    assert session.asked == [REANSWER]


async def test_a_reply_begun_while_the_room_was_down_is_lost_too() -> None:
    session, lost, _link = rig()
    room = Room(lost)
    lost.user_took_turn()
    session.agent_state("thinking")
    room.emit("reconnecting")
    session.current_speech = PlayingSpeech()
    session.agent_state("speaking")  # the answer began into the cut connection
    session.agent_state("listening")  # and ended there
    session.current_speech.finish()
    room.emit("reconnected")
    room.emit("local_track_republished", object(), "TR_old")
    room.emit("local_track_subscribed", object())
    await settle()
    assert session.asked == [REANSWER]


async def test_a_greeting_spoken_into_a_cut_room_connection_is_said_again() -> None:
    session, lost, _link = rig(greeting=None)
    room = Room(lost)
    lost.greet("RESUME")
    session.current_speech = PlayingSpeech()
    session.agent_state("speaking")
    room.full_reconnect()
    await settle()
    assert session.asked == ["RESUME", "RESUME"]


async def test_a_resumed_room_connection_kept_its_media_and_loses_nothing() -> None:
    """A resume (the signalling reconnected, the media path kept: no track republished) played the reply."""
    session, lost, _link = rig()
    room = Room(lost)
    speech = answering(session, lost)
    room.emit("reconnecting")
    room.emit("reconnected")
    await settle()
    assert not speech.interrupted
    assert session.asked == []


async def test_a_room_cut_while_the_agent_listened_owes_nothing() -> None:
    session, lost, _link = rig()
    room = Room(lost)
    lost.user_took_turn()
    session.agent_state("speaking")
    session.agent_state("listening")  # the answer was over before the cut
    room.full_reconnect()
    await settle()
    assert session.asked == []


async def test_speech_after_the_room_is_back_is_not_counted_as_unheard() -> None:
    session, lost, _link = rig()
    room = Room(lost)
    lost.user_took_turn()
    room.emit("reconnecting")
    room.emit("reconnected")
    session.agent_state("speaking")  # heard: the room is back
    room.emit("local_track_republished", object(), "TR_old")
    await settle()
    assert session.asked == []


async def test_a_closed_conversation_stops_watching_its_room() -> None:
    session, lost, _link = rig()
    room = Room(lost)
    lost.close()
    assert all(not callbacks for callbacks in room.handlers.values())
    answering(session, lost)
    room.full_reconnect()
    await settle()
    assert session.asked == []


async def test_the_reply_waits_until_the_person_hears_the_agent_again() -> None:
    """The person's connection comes back after the agent's: asked for before, the reply would be lost again."""
    session, lost, _link = rig()
    room = Room(lost)
    answering(session, lost)
    room.emit("reconnecting")
    room.emit("reconnected")
    room.emit("local_track_republished", object(), "TR_old")
    await settle()
    assert session.asked == []
    room.emit("local_track_subscribed", object())
    await settle()
    assert session.asked == [REANSWER]


async def test_a_media_path_rebuilt_before_the_room_is_back_cuts_nothing_until_it_is() -> None:
    """The SDK may report the republished track before `reconnected`: the reply still playing is cut only then."""
    session, lost, _link = rig()
    room = Room(lost)
    speech = answering(session, lost)
    room.emit("reconnecting")
    room.emit("local_track_republished", object(), "TR_old")
    await settle()
    assert not speech.interrupted
    room.emit("reconnected")
    room.emit("local_track_subscribed", object())
    await settle()
    assert speech.interrupted
    assert session.asked == [REANSWER]

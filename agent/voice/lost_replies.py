"""Replies the model's link lost: noticed, and asked for again once the link is back.

The Realtime plugin reconnects a dropped link by itself, but what was under way on the old link is gone
without a word to the person:

- a reply the model had not begun fails ("pending response discarded due to session reconnection");
- a reply the model had begun is closed where it stood ("in-progress generation discarded"). Its speech ends
  as if it were finished: no error, not interrupted, half a sentence said.

Either way the framework then sets the agent to "listening" and waits. The person, who was greeted or had
asked something, hears silence or half a sentence; the page shows an agent listening, so nobody tells them
anything. The soak found both: rooms opened as the link dropped never heard the greeting, and a question asked
as it dropped was never answered.

A reply counts as lost when a request for one failed, or when the link was restored while the model had a
response open (`response.created` without its `response.done`), while the person was speaking (their words up to
the drop went with the old link: the agent asks them to repeat, also when they were speaking over an answer, since
what they were saying is newer than what the agent was answering), or after they stopped and before the model
began its response. A response the model finished, still playing when the link dropped, is not lost: the person
hears it all. The lost reply is asked for again once nothing is being said: the greeting if the person has not
taken a turn yet, otherwise an answer to their last turn, with a short apology for the cut. Not when the person
spoke or typed after the loss (that turn is answered instead), nor when the model finished a response meanwhile
(the framework carried on by itself: a call that had arrived before the cut runs its tool and gets its spoken
reply), nor once the conversation is over, and at most `attempts` times in a row without a finished response.

The agent's own link to the room can be cut too: livekit-server restarted or killed under the conversation, and
livekit's SDK reconnects the agent to the same room by itself, with its conversation. When that reconnect had to
rebuild the media path (a full reconnect: the SDK republishes the agent's audio track), whatever the agent said
between the cut and the reconnect was played into a connection that no longer reached anyone, and the framework,
which counts it as said, then listens. A reply the agent spoke in that window is lost the same way: the rest of
it, if still playing, is cut, and it is asked for again. A reconnect that only resumed the signalling keeps the
media path and loses nothing, so it is not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

from livekit import rtc
from livekit.agents import AgentSession
from livekit.agents.voice import SpeechHandle

logger = logging.getLogger("lexvoz.assistant")

# What the model is asked when an answer was lost: it knows what the person asked (the plugin replays the
# conversation on the new link), not that the person heard nothing or half of it.
REANSWER = (
    "La conexión se cortó mientras respondías y la persona no oyó tu respuesta completa. Discúlpate en una frase "
    "breve por el corte y responde de nuevo, completa, a lo último que la persona dijo o escribió, siguiendo tus "
    "reglas. Si no sabes qué fue, pídele que lo repita."
)

# What the model is asked when the link dropped while the person was speaking: their words up to the drop went
# with the old link, and guessing at half a question is worse than asking for it again.
REHEAR = (
    "La conexión se cortó mientras la persona hablaba y no oíste su pregunta completa. Discúlpate en una frase "
    "breve por el corte y pídele que la repita."
)
# How long after the link is back a question cut mid-sentence waits before asking for it again: the person may
# still be finishing the sentence, and if the model hears that as a new turn, that turn is answered instead.
REHEAR_AFTER_S = 1.5

# How many lost replies in a row are asked for again (a link failing over and over ends the session instead,
# so this only bounds a run of bad luck).
REASK_ATTEMPTS = 3


class _Emitter(Protocol):
    def on(self, event: str, callback: Callable[..., Any] | None = None) -> Any: ...


class LostReplies:
    """Follows one conversation's replies across model reconnections and asks again for the ones lost."""

    def __init__(self, session: AgentSession[Any], *, greeting: str | None, attempts: int = REASK_ATTEMPTS) -> None:
        self._session = session
        self._greeting = greeting  # None: not greeted (yet), so nothing is owed before a turn
        self._attempts = attempts
        self._lost_in_a_row = 0
        self._completed = 0  # responses the model finished, to tell whether the conversation moved on after a loss
        self._response_open = False
        self._user_speaking = False  # the model heard the person begin speaking and not yet stop
        self._turn_unanswered = False  # the person stopped speaking and the model has not begun its response
        self._user_turns = 0
        self._reask: asyncio.Task[None] | None = None
        self.ended = False
        self._agent_speaking = False
        self._room_down = False  # the agent's room connection is reconnecting
        self._media_rebuilt = False  # ... and was rebuilt by a full reconnect (its audio track republished)
        # The agent spoke while its room connection was down. Set only after a `reconnecting`, so while it is set the
        # room is back exactly when it is no longer down.
        self._unheard = False
        self._heard_again = asyncio.Event()  # someone subscribed to the agent's audio since the connection went down
        self._room: rtc.Room | None = None
        session.on("speech_created", self._on_speech_created)
        session.on("agent_state_changed", self._on_agent_state)

    def watch(self, rt_session: _Emitter) -> None:
        rt_session.on("openai_server_event_received", self._on_model_event)
        rt_session.on("session_reconnected", self._on_link_restored)
        rt_session.on("input_speech_started", self._on_input_speech_started)
        rt_session.on("input_speech_stopped", self._on_input_speech_stopped)

    def watch_room(self, room: rtc.Room) -> None:
        """The agent's own connection to its room (`rtc.Room`): a reply spoken while it was down went nowhere."""
        self._room = room
        room.on("reconnecting", self._on_room_down)
        room.on("reconnected", self._on_room_back)
        room.on("local_track_republished", self._on_media_rebuilt)
        room.on("local_track_subscribed", self._on_track_subscribed)

    def greet(self, instructions: str) -> None:
        """Open the conversation with `instructions` (the greeting, or the line for a person greeted before); a
        greeting lost to the link is asked for again with the same instructions."""
        self._greeting = instructions
        self._session.generate_reply(instructions=instructions)

    def user_took_turn(self) -> None:
        self._user_turns += 1

    @property
    def user_turns(self) -> int:
        """Turns the person has begun (speaking or typing) in this conversation."""
        return self._user_turns

    def close(self) -> None:
        self.ended = True
        if self._reask is not None:
            self._reask.cancel()
        if self._room is not None:
            room, self._room = self._room, None
            with contextlib.suppress(Exception):  # already removed
                room.off("reconnecting", self._on_room_down)
                room.off("reconnected", self._on_room_back)
                room.off("local_track_republished", self._on_media_rebuilt)
                room.off("local_track_subscribed", self._on_track_subscribed)

    # -- what the model and the framework report --------------------------------------------------------

    def _on_model_event(self, event: Any) -> None:
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "response.created":
            self._response_open, self._turn_unanswered = True, False
        elif kind == "response.done":
            self._response_open = False
            status = (event.get("response") or {}).get("status")
            if status == "completed":
                self._completed += 1
                self._lost_in_a_row = 0

    def _on_input_speech_started(self, _event: Any) -> None:
        self._user_speaking = True

    def _on_input_speech_stopped(self, _event: Any) -> None:
        self._user_speaking, self._turn_unanswered = False, True

    def _on_link_restored(self, _event: Any) -> None:
        open_response, speaking, unanswered = self._response_open, self._user_speaking, self._turn_unanswered
        self._response_open = self._user_speaking = self._turn_unanswered = False
        if speaking:  # first: a person speaking over an open answer was asking something new, and that is lost
            self._lost("the person's turn cut by a reconnection", rehear=True)
        elif open_response:
            self._lost("a response cut by a reconnection")
        elif unanswered:
            self._lost("a turn the model had not answered when the link dropped")

    def _on_agent_state(self, event: Any) -> None:
        self._agent_speaking = getattr(event, "new_state", None) == "speaking"
        if self._agent_speaking and self._room_down:
            self._unheard = True

    # -- what the agent's room connection reports (`watch_room`) ------------------------------------------

    def _on_room_down(self, *_args: Any) -> None:
        self._room_down, self._media_rebuilt = True, False
        self._unheard = self._agent_speaking
        self._heard_again = asyncio.Event()

    def _on_room_back(self, *_args: Any) -> None:
        self._room_down = False
        self._check_room_cut()

    def _on_media_rebuilt(self, *_args: Any) -> None:
        self._media_rebuilt = True
        self._check_room_cut()

    def _on_track_subscribed(self, *_args: Any) -> None:
        self._heard_again.set()

    def _check_room_cut(self) -> None:
        """Once the room is back and its media path was rebuilt, in whichever order the SDK reports the two."""
        if not (self._unheard and not self._room_down and self._media_rebuilt):
            return
        self._unheard = False
        speech = self._session.current_speech
        if speech is not None and not speech.done():
            with contextlib.suppress(RuntimeError):  # a reply that may not be interrupted plays to its end
                speech.interrupt()  # the rest of a reply whose start the person did not hear
        # The person's own connection comes back on its own schedule, often after the agent's: the reply is asked
        # for again once someone listens to the agent's (republished) audio, not into a room they are not back in.
        self._lost("a reply spoken while the agent's room connection was down", after=self._heard_again)

    def _on_speech_created(self, event: Any) -> None:
        handle = getattr(event, "speech_handle", None)
        if isinstance(handle, SpeechHandle):
            handle.add_done_callback(self._on_speech_done)

    def _on_speech_done(self, handle: SpeechHandle) -> None:
        error = handle.exception()
        if error is not None and not handle.interrupted:
            self._lost(f"a request that failed ({type(error).__name__})")

    # -- asking again ------------------------------------------------------------------------------------

    def _lost(self, cause: str, *, rehear: bool = False, after: asyncio.Event | None = None) -> None:
        if self.ended or (self._reask is not None and not self._reask.done()):
            return  # over, or already being asked for again
        if self._user_turns == 0 and self._greeting is None:
            return  # nothing was owed yet
        self._lost_in_a_row += 1
        if self._lost_in_a_row > self._attempts:
            logger.warning("reply lost %d times in a row (%s); not asked again", self._lost_in_a_row, cause)
            return
        logger.warning("reply lost (%s); asking for it again", cause)
        self._reask = asyncio.get_running_loop().create_task(
            self._ask_again(self._user_turns, self._completed, rehear=rehear, after=after)
        )

    async def _ask_again(
        self, turns_at_loss: int, completed_at_loss: int, *, rehear: bool, after: asyncio.Event | None = None
    ) -> None:
        if after is not None:
            await after.wait()
        if rehear:
            await asyncio.sleep(REHEAR_AFTER_S)
        # What is still being said (the rest of a cut reply's audio, a reply the framework queued) goes first.
        while (speech := self._session.current_speech) is not None and not speech.done():
            await speech.wait_for_playout()
        if self.ended or self._user_turns != turns_at_loss:
            return  # the conversation is over, or the person took a new turn: that turn gets the answer
        if self._completed != completed_at_loss:
            # The model finished a response since: the framework carried on by itself (a function call whose
            # response was cut after the call itself had arrived runs its tool and gets its spoken reply).
            return
        instructions = REHEAR if rehear else self._greeting if turns_at_loss == 0 else REANSWER
        assert instructions is not None
        try:
            self._session.generate_reply(instructions=instructions)
        except RuntimeError as exc:  # the session is closing: nobody is left to answer
            logger.info("lost reply not asked again: %s", exc)

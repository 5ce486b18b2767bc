"""A job as the worker gets it, minus LiveKit: a fake job context around an autospec'd room.

The room is `create_autospec(rtc.Room)` the way livekit-agents' own `ipc/mock_room.py` builds it (not
its cached instance: every test gets a fresh one), with one standard user in it. Everything the agent
sends to the room is recorded by the mocks: `attributes()` replays the attribute writes, `messages()`
decodes the `lexvoz.research` packets.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import create_autospec

from livekit import rtc
from livekit.agents import JobContext
from livekit.agents.testing import fake_job_context

from agent.voice.evidence import TOPIC

USER_IDENTITY = "user"


class _Changes:
    """Wakes waiters whenever the agent writes to the room (no polling)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def notify(self, *_: object, **__: object) -> None:
        self.event.set()
        self.event = asyncio.Event()


_changes: dict[int, _Changes] = {}


def mocked_room(name: str = "test-room") -> Any:
    room = create_autospec(rtc.Room, instance=True)
    local = create_autospec(rtc.LocalParticipant, instance=True)
    local.sid = "PA_agent"
    local.identity = "agent"
    changes = _changes[id(room)] = _Changes()
    local.set_attributes.side_effect = changes.notify
    local.publish_data.side_effect = changes.notify
    room.local_participant = local
    room.isconnected.return_value = True
    room.name = name
    room.connection_state = rtc.ConnectionState.CONN_CONNECTED
    user = create_autospec(rtc.RemoteParticipant, instance=True)
    user.identity = USER_IDENTITY
    user.sid = "PA_user"
    user.kind = rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD
    user.track_publications = {}
    room.remote_participants = {USER_IDENTITY: user}
    return room


async def until(room: Any, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait until `predicate()` holds, re-checking each time the agent writes to the room."""
    changes = _changes[id(room)]
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await changes.event.wait()


def attributes(room: Any) -> list[dict[str, str]]:
    """Every `set_attributes` the agent awaited, in order."""
    return [call.args[0] for call in room.local_participant.set_attributes.await_args_list]


def shown(room: Any, key: str) -> list[str]:
    """The values of one attribute as the page sees them: each change, in order. livekit-server tells the page
    only keys whose value changed, and the heartbeat writes the agent's attributes again as they are."""
    values: list[str] = []
    for attrs in attributes(room):
        if key in attrs and (not values or values[-1] != attrs[key]):
            values.append(attrs[key])
    return values


def latest_attributes(room: Any) -> dict[str, str]:
    merged: dict[str, str] = {}
    for attrs in attributes(room):
        merged.update(attrs)
    return merged


def messages(room: Any) -> list[dict[str, Any]]:
    """The research messages published to the room, in order."""
    out: list[dict[str, Any]] = []
    for call in room.local_participant.publish_data.await_args_list:
        if call.kwargs.get("topic") == TOPIC:
            out.append(json.loads(call.args[0]))
    return out


class FakeJob:
    """The job context plus what the worker did with it: shutdown callbacks and the shutdown request."""

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.shutdown_callbacks: list[Callable[..., Awaitable[None]]] = []
        self.shutdown_reasons: list[str] = []

    async def run_shutdown_callbacks(self) -> None:
        for callback in self.shutdown_callbacks:
            takes_reason = len(inspect.signature(callback).parameters) > 0
            await (callback("test finished") if takes_reason else callback())


@contextmanager
def fake_job(room: Any) -> Iterator[FakeJob]:
    with fake_job_context(room=room) as ctx:
        job = FakeJob(ctx)
        ctx.add_shutdown_callback = job.shutdown_callbacks.append  # type: ignore[method-assign,assignment]
        ctx.shutdown = lambda reason="": job.shutdown_reasons.append(reason)  # type: ignore[method-assign]
        yield job


def chat_handler(room: Any) -> Callable[[Any, str], None]:
    """The handler the session registered for typed `lk.chat` input (what the room would call)."""
    for call in room.register_text_stream_handler.call_args_list:
        if call.args[0] == "lk.chat":
            return call.args[1]  # type: ignore[no-any-return]
    raise AssertionError("no lk.chat handler registered")


class TextReader:
    """Stands in for rtc.TextStreamReader: one complete text."""

    def __init__(self, text: str) -> None:
        self._text = text
        self.info = None

    async def read_all(self) -> str:
        return self._text

    def __aiter__(self) -> Any:
        async def gen() -> Any:
            yield self._text

        return gen()

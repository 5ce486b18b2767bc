"""The person leaves ("Detener" on the page) while the conversation is busy: nothing of ours raises into
the framework, and our pending work ends with the session.

livekit-agents closes the session when the person disconnects; what was in flight then (a typed question
still being read, an answer to a dropped call still waiting) must end quietly: the framework logs an
exception it receives from our callbacks as a warning with a traceback, and an exception in a task of
ours that nobody awaits as an error. Same rig as `test_conversation.py`: the worker's own wiring, the
real plugin against the Realtime stand-in, a mocked room.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest

from realtime_standin import RealtimeStandIn
from tests.job_double import USER_IDENTITY, TextReader, chat_handler
from tests.mcp_fixture import FakeMcpServer
from tests.test_conversation import Rig


@pytest.fixture
async def standin() -> AsyncIterator[RealtimeStandIn]:
    async with RealtimeStandIn(speed=50.0, ms_per_char=5) as s:
        yield s


@pytest.fixture
def no_search_server() -> FakeMcpServer:
    """Neither test reaches a search: no search server runs (the warm-up's connection is refused, which the
    conversation logs as a plain warning), so every log record comes from the conversation's side."""
    return FakeMcpServer()  # never started


def _tasks_running(name: str) -> list[asyncio.Task[object]]:
    """Unfinished tasks running a coroutine function called `name` (ours or the framework's)."""
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and getattr(t.get_coro(), "__qualname__", "").endswith(f".{name}")
    ]


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Errors and warnings with a traceback; not asyncio's note that the garbage collector met a pending task,
    which it logs whenever that happens, for a task an earlier test may have left (no traceback of ours)."""
    return [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if (r.levelno >= logging.ERROR or (r.levelno >= logging.WARNING and r.exc_info))
        and not (r.name == "asyncio" and r.getMessage().startswith("Task was destroyed but it is pending"))
    ]


class _LateReader(TextReader):
    """A typed message whose text arrives only when `arrived` is set (the person typed, then left)."""

    def __init__(self, text: str, arrived: asyncio.Event) -> None:
        super().__init__(text)
        self._arrived = arrived

    async def read_all(self) -> str:
        await self._arrived.wait()
        return await super().read_all()


async def test_a_typed_question_read_after_the_person_left_is_dropped_quietly(
    standin: RealtimeStandIn,
    http: aiohttp.ClientSession,
    no_search_server: FakeMcpServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with Rig(no_search_server.url, standin, http, greet=False) as rig:
        arrived = asyncio.Event()
        chat_handler(rig.room)(_LateReader("pregunta escrita al salir", arrived), USER_IDENTITY)
        readers = _tasks_running("_read_text")  # livekit-agents' reader of the chat text stream
        assert readers, "the framework started no reader for the typed message"
        # The text comes in as the session closes (the person typed, then pressed Stop at once): after its
        # activity is gone, before its room I/O cancels the readers.
        rig.session.on("close", lambda _ev: arrived.set())
        await rig.session.aclose()  # what livekit-agents does when the person disconnects
        await asyncio.wait_for(asyncio.gather(*readers, return_exceptions=True), 5)
        assert not any(r.cancelled() for r in readers), "the message was never read: the test missed the window"
        turns = rig.research.turns.current
    assert _tracebacks(caplog) == []
    assert turns == 0  # not a turn: nobody is there to answer it
    assert "pregunta escrita al salir" not in caplog.text


async def test_leaving_cancels_the_pending_answer_to_a_dropped_call(
    standin: RealtimeStandIn,
    http: aiohttp.ClientSession,
    no_search_server: FakeMcpServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The user speaks after a call arrives (the framework drops it, the agent waits a grace period to
    answer it as discarded), then leaves within that period: the waiting task ends with the session."""
    caplog.set_level(logging.INFO)
    async with Rig(no_search_server.url, standin, http, greet=False) as rig:
        # The plugin handles server events in order, some time after the stand-in sent them: count the
        # speech starts it has handled (the question's, then the one over the call) rather than wait on
        # the first one, which may come after the registration. `call_soon`: after every handler of the
        # event, the agent's among them, has run.
        loop = asyncio.get_running_loop()
        handled: list[object] = []
        spoke_over_the_call = asyncio.Event()

        def on_speech_started(ev: object) -> None:
            handled.append(ev)
            if len(handled) == 2:
                loop.call_soon(spoke_over_the_call.set)

        rig.agent.realtime_llm_session.on("input_speech_started", on_speech_started)
        await standin.inject_user_turn("pregunta interrumpida")
        await standin.wait_for_server_event(
            "response.output_item.done", lambda e: e["item"]["type"] == "function_call", timeout=10
        )
        await standin.inject_speech_started()
        await asyncio.wait_for(spoke_over_the_call.wait(), 5)
        assert _tasks_running("_answer_dropped_calls"), "the agent is not waiting to answer the dropped call"
        await rig.session.aclose()
        assert _tasks_running("_answer_dropped_calls") == []
    assert _tracebacks(caplog) == []

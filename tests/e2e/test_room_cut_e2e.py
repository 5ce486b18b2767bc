"""Against the real stack: livekit-server is killed (SIGKILL: it tells nobody) while the agent reads an answer back,
and started again 2 s later. livekit's SDK reconnects both the person and the agent to the same room by
themselves, and the agent keeps its conversation. What it said between the kill and its reconnect was played into
a connection that reached nobody; the agent notices (its connection was rebuilt while it spoke) and answers again
(agent/voice/lost_replies.py) instead of listening as if the person had heard it all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import aiohttp
import pytest

from realtime_standin.policy import FOLLOW_UP_REPLY
from tests.e2e.conftest import E2EStack, running_stack, take_livekit_down
from tests.person import AGENT_STATE_ATTRIBUTE, Person

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def e2e_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2EStack]:
    yield from running_stack(request, tmp_path_factory)


def _agent_state(person: Person) -> str | None:
    agent = person.room.remote_participants.get(person.agent_identity or "")
    return None if agent is None else agent.attributes.get(AGENT_STATE_ATTRIBUTE)


async def test_an_answer_cut_by_a_killed_livekit_server_is_answered_again_by_the_same_agent(
    e2e_stack: E2EStack,
) -> None:
    async with aiohttp.ClientSession() as http:
        person = await Person.from_page_service(e2e_stack.stack.web_url, http)
        try:
            await person.connect()
            await person.wait_until_listening(90)
            agent = person.agent_identity
            _started, outcome = await person.ask(typed=e2e_stack.question, within=60, exclude=set())
            assert outcome.type == "completed", outcome.body
            # The answer's read-back begins once the tool has returned: the kill lands while it is spoken.
            await person.wait_for(lambda: _agent_state(person) == "speaking", "the answer being spoken", 30)
            heard_before = len(person.heard)

            await asyncio.to_thread(take_livekit_down, e2e_stack.stack, kill=True)

            # The same agent comes back by its own reconnect and says something new. The stand-in cannot follow
            # the request to apologise and answer again (it answers any instruction it cannot follow, after an
            # answer of its own, with its follow-up line); a real model answers again.
            await person.wait_for(
                lambda: any(who == agent and line == FOLLOW_UP_REPLY for who, line in person.heard[heard_before:]),
                "a new line from the agent after the reconnect",
                60,
            )
            assert person.agent_identity == agent
            assert _agent_state(person) in ("speaking", "listening")
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(person.aclose(), 10)

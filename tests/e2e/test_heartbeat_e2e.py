"""Against the real stack: the process running a conversation is SIGKILLed mid-conversation, and its agent, which
livekit-server keeps listing until its 15 s ping timeout, is replaced well before that.

The agent refreshes `lexvoz.heartbeat` every 3 s. The person here does what the page does: once no new value
has arrived for 10 s (its own clock), it asks the page service for an agent naming the silent one; the service
removes that participant (its sign of life is 10 s old by the service's clock too) and dispatches another, and
the worker, which lost only that job process, sends a new agent. The page tells the new agent that this person
was already greeted here, and the new agent says so in one short line instead of greeting them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from livekit import api, rtc

from agent.voice.assistant import RESUME_LINE
from agent.voice.heartbeat import HEARTBEAT_ATTRIBUTE, HEARTBEAT_LOST_S
from agent.web.dispatch import LiveKitRooms
from realtime_standin import GREETING as STANDIN_GREETING
from tests.e2e.conftest import E2EStack, livekit_rooms, running_stack
from tests.person import Person

pytestmark = pytest.mark.e2e

PING_TIMEOUT_S = 15.0  # livekit-server's PingTimeoutSeconds: when it would drop the dead agent itself


@pytest.fixture(scope="module")
def e2e_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2EStack]:
    yield from running_stack(request, tmp_path_factory, worker_env={"LEXVOZ_MAX_JOBS": "2"})


def _job_pid(stack: E2EStack, room: str) -> int:
    """The job process serving `room`, from the worker's log (livekit-agents tags a job's records with both)."""
    text = (stack.stack.opts.log_dir / "worker.log").read_text(errors="replace")
    for line in text.splitlines():
        if f'"room": "{room}"' in line and '"job_id"' in line and (pid := re.search(r'"pid": (\d+)', line)):
            return int(pid.group(1))
    raise AssertionError(f"no job process found for {room} in the worker's log")


async def _ask(http: aiohttp.ClientSession, stack: E2EStack, person: Person, left: str) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {person.session['token']}"}
    url = f"{stack.stack.web_url}api/agent"
    async with http.post(url, headers=headers, json={"left": left}, timeout=aiohttp.ClientTimeout(total=10)) as resp:
        return resp.status, await resp.json()


async def _listed(rooms: LiveKitRooms, room: str, identity: str) -> bool:
    listed = await rooms._lk().room.list_participants(api.ListParticipantsRequest(room=room))
    return any(p.identity == identity for p in listed.participants)


async def test_a_killed_job_process_agent_is_replaced_before_livekit_server_would_drop_it(e2e_stack: E2EStack) -> None:
    rooms = livekit_rooms(e2e_stack)
    arrivals: dict[str, float] = {}  # agent identity -> when its latest sign of life arrived (our clock)

    def on_attributes(changed: dict[str, str], participant: rtc.Participant) -> None:
        if HEARTBEAT_ATTRIBUTE in changed:
            arrivals[participant.identity] = time.monotonic()

    async with aiohttp.ClientSession() as http:
        person = await Person.from_page_service(e2e_stack.stack.web_url, http)
        person.room.on("participant_attributes_changed", on_attributes)
        try:
            await person.connect()
            await person.wait_until_listening(90)
            dead = person.agent_identity
            assert dead is not None
            await person.wait_for(lambda: arrivals.get(dead), "a refresh of the agent's sign of life", 15)

            os.kill(_job_pid(e2e_stack, person.name), signal.SIGKILL)
            killed = time.monotonic()
            # Just killed: its sign of life is still fresh, and a page cannot have it removed.
            assert await _ask(http, e2e_stack, person, dead) == (200, {"agent": "present", "retry_after_s": 5.0})

            # The page's rule: no new value for HEARTBEAT_LOST_S since the last one arrived.
            for _ in range(100):  # each pass sleeps until the limit, unless a new value moved it
                quiet_s = time.monotonic() - arrivals[dead]
                if quiet_s >= HEARTBEAT_LOST_S:
                    break
                await asyncio.sleep(HEARTBEAT_LOST_S - quiet_s)
            assert arrivals[dead] - killed < 1.0  # nothing arrived from the dead process
            assert await _listed(rooms, person.name, dead), "livekit-server dropped the agent before the test could"
            status, body = await _ask(http, e2e_stack, person, dead)
            removed = time.monotonic() - killed
            assert (status, body["agent"]) == (202, "requested"), body
            assert not await _listed(rooms, person.name, dead)
            assert removed < PING_TIMEOUT_S, f"removed {removed:.1f} s after the kill"

            await person.wait_for(lambda: person.agent_identity != dead and not person.agent_left, "a new agent", 60)
            await person.wait_until_listening(60)
            # The person was greeted by the first agent; the second one says it is back, not the whole greeting.
            first, second = dead, person.agent_identity
            # The agent's state says listening as its audio ends; its line's words close their stream a moment
            # later (livekit-server relays the attribute and the stream apart), so the line is waited for.
            await person.wait_for(lambda: any(who == second for who, _ in person.heard), "the new agent's line", 10)
            assert [line for who, line in person.heard if who == first][:1] == [STANDIN_GREETING]
            assert [line for who, line in person.heard if who == second] == [RESUME_LINE]
            _started, outcome = await person.ask(typed=e2e_stack.question, within=60, exclude=set())
            assert outcome.type == "completed" and outcome.body["sources"], outcome.body
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(person.aclose(), 10)
            await rooms.aclose()

"""Scaling out on LiveKit's own cluster mode: two nodes sharing Redis, two workers, rooms on either node.

What must hold for a deployment that adds hosts: a room created through either node gets an agent
(from whichever worker LiveKit picks, whichever node that worker registered through) and evidence for
its question; when a worker dies mid-conversation, the person in its room sees the agent leave, the
rooms of the other worker carry on, new rooms all go to the surviving worker, and a room left without
its agent gets one from the survivor by asking again, as the page does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agent.web.dispatch import AgentRequests, LiveKitRooms
from agent.web.session import RequestError
from tests.person import Person

from .conftest import Cluster

pytestmark = pytest.mark.multinode

JOIN_S = 60.0
ANSWER_S = 30.0
AGENT_GONE_S = 60.0
REPLACED_S = 120.0  # a job the dead worker had accepted counts as on its way for 60 s after it started
TYPED = "¿A qué edad se adquiere la ciudadanía panameña?"

Join = Callable[[int], Awaitable[Person]]


@pytest.fixture
async def join(cluster: Cluster) -> AsyncIterator[Join]:
    """Join a fresh room through node `n` and wait until its agent listens."""
    people: list[Person] = []

    async def _join(node: int) -> Person:
        person = Person(cluster.session(node))
        people.append(person)
        await asyncio.wait_for(person.connect(), 20)
        await person.wait_until_listening(JOIN_S)
        return person

    yield _join
    for person in people:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(person.aclose(), 10)


async def _asks_and_gets_evidence(person: Person) -> None:
    started, outcome = await person.ask(typed=TYPED, within=ANSWER_S, exclude=set())
    assert outcome.type == "completed", outcome.body
    assert outcome.sender == person.agent_identity == started.sender
    assert outcome.body["sources"], outcome.body
    assert person.lost_evidence() == []


async def test_rooms_through_either_node_get_an_agent_and_evidence(cluster: Cluster, join: Join) -> None:
    people = await asyncio.gather(join(0), join(1), join(0), join(1))
    await asyncio.gather(*(_asks_and_gets_evidence(p) for p in people))

    served = {p.name: cluster.worker_for(p.name) for p in people}
    assert all(served.values()), f"a room's job is in no worker's log: {served}"
    # each worker registered through its own node; LiveKit routes jobs across the cluster
    assert {w.node_url for w in cluster.workers} == set(cluster.node_urls)


async def test_a_stopped_worker_leaves_its_rooms_and_new_rooms_go_to_the_survivor(cluster: Cluster, join: Join) -> None:
    # Rooms until both workers have one (LiveKit spreads jobs by the load each worker reports).
    people = list(await asyncio.gather(join(0), join(1)))
    for node in (0, 1, 0, 1):
        if len({cluster.worker_for(p.name).name for p in people if cluster.worker_for(p.name)}) == 2:
            break
        people.append(await join(node))
    by_worker = {w.name: [p for p in people if cluster.worker_for(p.name) is w] for w in cluster.workers}
    assert all(by_worker.values()), (
        f"LiveKit gave every room to one worker: { {k: len(v) for k, v in by_worker.items()} }"
    )

    doomed, survivor = cluster.workers
    doomed.kill()  # mid-conversation: its people are still in their rooms

    for person in by_worker[doomed.name]:
        await person.wait_for(lambda p=person: p.agent_left, "notice that the agent left", AGENT_GONE_S)
        assert person.agent_left  # what the page says: the agent is gone
    for person in by_worker[survivor.name]:
        assert not person.agent_left
        await _asks_and_gets_evidence(person)  # the other worker's conversations carry on

    fresh = await asyncio.gather(join(0), join(1))
    await asyncio.gather(*(_asks_and_gets_evidence(p) for p in fresh))
    assert all(cluster.worker_for(p.name) is survivor for p in fresh)

    # What the page then does: ask the page service for an agent again, which dispatches one through the
    # cluster (node A's API, whichever node holds the room); the surviving worker takes the conversation over
    # once it has a free slot. The conversations that got their answers end, as people hang up.
    for person in [*fresh, *by_worker[survivor.name]]:
        await asyncio.wait_for(person.aclose(), 10)
    assert cluster.settings is not None
    rooms = LiveKitRooms(cluster.settings)
    requests = AgentRequests(cluster.settings, rooms)
    orphan = by_worker[doomed.name][0]
    try:
        answers = await _ask_until_an_agent_joins(requests, orphan, REPLACED_S)
    finally:
        await rooms.aclose()
    # The page names the agent it saw leave, so the dead worker's job (still listed as assigned) does not
    # count as an agent on its way: the first answer is a new offer, not "joining".
    assert answers[0] == "requested", answers
    assert orphan.name in survivor.rooms()
    await orphan.wait_until_listening(JOIN_S)
    await _asks_and_gets_evidence(orphan)


async def _ask_until_an_agent_joins(requests: AgentRequests, person: Person, within: float) -> list[str]:
    """`AgentRequests.request` at the page's pace until an agent is back in the person's room, naming the agent
    that left as the page does; the answers."""
    answers: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within

    def back() -> bool:
        return bool(person.agent_identity) and not person.agent_left

    gone = person.agent_identity if person.agent_left else None
    while not back():
        assert loop.time() < deadline, f"no agent came back within {within:.0f} s: {answers}"
        with contextlib.suppress(RequestError):  # asked too soon: wait as the page would
            answers.append(await requests.request(person.name, person.session["identity"], gone))
        with contextlib.suppress(TimeoutError):
            await person.wait_for(back, "agent", requests.retry_after_s)
    return answers

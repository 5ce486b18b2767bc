"""Scaling out on LiveKit's own cluster mode: two nodes sharing Redis, two workers, rooms on either node.

What must hold for a deployment that adds hosts: a room created through either node gets an agent
(from whichever worker LiveKit picks, whichever node that worker registered through) and evidence for
its question; when a worker dies mid-conversation, the person in its room sees the agent leave, the
rooms of the other worker carry on, new rooms all go to the surviving worker, and a room left without
its agent gets one from the survivor by asking again, as the page does.

Every wait and check goes through the cluster's `Witness` (`waits.py`): a failure names the step, the
room and the worker that held it (or should have), with the tail of that worker's log.
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
from .waits import Witness

pytestmark = pytest.mark.multinode

CONNECT_S = 20.0
JOIN_S = 60.0
ANSWER_S = 30.0
AGENT_GONE_S = 60.0
HANG_UP_S = 10.0
REPLACED_S = 120.0  # a job the dead worker had accepted counts as on its way for 60 s after it started
SLACK_S = 5.0  # over a Person's own deadline, so its message (what it saw) is the one that reaches the report
TYPED = "¿A qué edad se adquiere la ciudadanía panameña?"
NODES = "AB"

Join = Callable[..., Awaitable[Person]]


@pytest.fixture
async def join(cluster: Cluster) -> AsyncIterator[Join]:
    """Join a fresh room through node `n` and wait until its agent listens.

    `when` says at which point of the test (it goes into the step of a failure); `worker` names the worker
    that must take the room when the test knows it (the survivor), else the failure names the one that did."""
    people: list[Person] = []

    async def _join(node: int, *, when: str = "", worker: str | None = None) -> Person:
        person = Person(cluster.session(node))
        people.append(person)
        witness, room, via = cluster.witness, person.name, f"node {NODES[node]}"
        await witness.wait(person.connect(), f"connecting through {via}{when}", room, CONNECT_S, worker=worker)
        step = f"joined through {via}{when}: waiting for an agent that greets and listens"
        await witness.wait(person.wait_until_listening(JOIN_S), step, room, JOIN_S + SLACK_S, worker=worker)
        return person

    yield _join
    for person in people:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(person.aclose(), HANG_UP_S)


async def _asks_and_gets_evidence(witness: Witness, person: Person, when: str = "", worker: str | None = None) -> None:
    """A typed question gets a `started` and a `completed` with sources, both from the agent in the room."""
    room, step = person.name, f"asking a typed question{when}"
    started, outcome = await witness.wait(
        person.ask(typed=TYPED, within=ANSWER_S, exclude=set()),
        f"{step}: waiting for its started and evidence messages",
        room,
        2 * ANSWER_S + SLACK_S,
        worker=worker,
    )
    reason = outcome.body.get("reason", "")
    witness.check(
        outcome.type == "completed", step, room, f"the outcome was {outcome.type} {reason}".strip(), worker=worker
    )
    witness.check(
        outcome.sender == person.agent_identity == started.sender,
        step,
        room,
        f"started by {started.sender}, ended by {outcome.sender}, agent in the room {person.agent_identity}",
        worker=worker,
    )
    witness.check(outcome.body.get("sources"), step, room, "the completed message carries no sources", worker=worker)
    lost = person.lost_evidence()
    witness.check(not lost, step, room, f"calls started and never ended: {lost}", worker=worker)


async def test_rooms_through_either_node_get_an_agent_and_evidence(cluster: Cluster, join: Join) -> None:
    witness = cluster.witness
    people = await asyncio.gather(join(0), join(1), join(0), join(1))
    await asyncio.gather(*(_asks_and_gets_evidence(witness, p) for p in people))

    for person in people:
        witness.check(
            cluster.worker_for(person.name), "after its answer", person.name, "the room's job is in no worker's log"
        )
    # each worker registered through its own node; LiveKit routes jobs across the cluster
    nodes_used = {w.name: w.node_url for w in cluster.workers}
    witness.check(
        set(nodes_used.values()) == set(cluster.node_urls),
        "checking the workers' registrations",
        "",
        f"workers registered through {nodes_used}, nodes are {cluster.node_urls}",
    )


async def test_a_stopped_worker_leaves_its_rooms_and_new_rooms_go_to_the_survivor(cluster: Cluster, join: Join) -> None:
    witness = cluster.witness

    def holder(person: Person) -> str | None:
        worker = cluster.worker_for(person.name)
        return worker.name if worker else None

    # Rooms until both workers have one (LiveKit spreads jobs by the load each worker reports).
    people = list(await asyncio.gather(join(0), join(1)))
    for node in (0, 1, 0, 1):
        if len({holder(p) for p in people} - {None}) == 2:
            break
        people.append(await join(node, when=" (until both workers have a room)"))
    by_worker = {w.name: [p for p in people if holder(p) == w.name] for w in cluster.workers}
    witness.check(
        all(by_worker.values()),
        "spreading rooms over both workers",
        ", ".join(p.name for p in people),
        f"LiveKit gave every room to one worker: { {k: len(v) for k, v in by_worker.items()} }",
        worker=next((k for k, v in by_worker.items() if v), None),
    )

    doomed, survivor = cluster.workers
    doomed.kill()  # mid-conversation: its people are still in their rooms
    after = f" after {doomed.name} was killed"

    for person in by_worker[doomed.name]:
        await witness.until(
            lambda p=person: p.agent_left,
            f"waiting for the page to see the agent leave{after}",
            person.name,
            AGENT_GONE_S,
            worker=doomed.name,
        )
    for person in by_worker[survivor.name]:
        stayed = f"checking the agent stayed{after}"
        witness.check(not person.agent_left, stayed, person.name, "the agent left", worker=survivor.name)
        await _asks_and_gets_evidence(witness, person, after, worker=survivor.name)  # its conversations carry on

    fresh = await asyncio.gather(join(0, when=after, worker=survivor.name), join(1, when=after, worker=survivor.name))
    await asyncio.gather(*(_asks_and_gets_evidence(witness, p, after, worker=survivor.name) for p in fresh))
    for person in fresh:
        witness.check(
            holder(person) == survivor.name,
            f"a fresh room{after}",
            person.name,
            f"its job is in the log of {holder(person)}",
            worker=survivor.name,
        )

    # What the page then does: ask the page service for an agent again, which dispatches one through the
    # cluster (node A's API, whichever node holds the room); the surviving worker takes the conversation over
    # once it has a free slot. The conversations that got their answers end, as people hang up.
    for person in [*fresh, *by_worker[survivor.name]]:
        await witness.wait(person.aclose(), f"hanging up{after}", person.name, HANG_UP_S, worker=survivor.name)
    assert cluster.settings is not None, "the cluster fixture sets the page service's settings"
    rooms = LiveKitRooms(cluster.settings)
    requests = AgentRequests(cluster.settings, rooms)
    orphan = by_worker[doomed.name][0]
    step = f"the page asking for an agent again{after}"
    try:
        answers = await witness.wait(
            _ask_until_an_agent_joins(requests, orphan, REPLACED_S),
            step,
            orphan.name,
            REPLACED_S + SLACK_S,
            worker=survivor.name,
        )
    finally:
        await rooms.aclose()
    # The page names the agent it saw leave, so the dead worker's job (still listed as assigned) does not
    # count as an agent on its way: the first answer is a new offer, not "joining".
    witness.check(
        answers[0] == "requested", step, orphan.name, f"the page service answered {answers}", worker=survivor.name
    )
    witness.check(
        orphan.name in survivor.rooms(),
        step,
        orphan.name,
        f"an agent came back but the room's new job is not in {survivor.name}'s log",
        worker=survivor.name,
    )
    await witness.wait(
        orphan.wait_until_listening(JOIN_S),
        f"{step}: waiting for the new agent to greet and listen",
        orphan.name,
        JOIN_S + SLACK_S,
        worker=survivor.name,
    )
    await _asks_and_gets_evidence(witness, orphan, f" taken over{after}", worker=survivor.name)


async def _ask_until_an_agent_joins(requests: AgentRequests, person: Person, within: float) -> list[str]:
    """`AgentRequests.request` at the page's pace until an agent is back in the person's room, naming the agent
    that left as the page does; the answers. Raises TimeoutError with the answers when none came back."""
    answers: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within

    def back() -> bool:
        return bool(person.agent_identity) and not person.agent_left

    gone = person.agent_identity if person.agent_left else None
    while not back():
        if loop.time() >= deadline:
            raise TimeoutError(f"no agent came back within {within:.0f} s; the page service answered {answers}")
        with contextlib.suppress(RequestError):  # asked too soon: wait as the page would
            answers.append(await requests.request(person.name, person.session["identity"], gone))
        with contextlib.suppress(TimeoutError):
            await person.wait_for(back, "agent", requests.retry_after_s)
    return answers

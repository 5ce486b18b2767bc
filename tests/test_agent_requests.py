"""`POST /api/agent`: who may ask for an agent again, when a room gets a new dispatch, and when it does not.

The real aiohttp app runs on loopback with the real token verifier; only livekit-server's two answers (who
is in the room, whether a job is on its way) come from a double, so each case can be set up exactly. The
end-to-end test with a real livekit-server and a worker at its job limit is in `tests/e2e`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp.test_utils import TestClient, TestServer
from livekit import api

from agent.web.app import create_app
from agent.web.dispatch import (
    AGENTS_KEY,
    HEARTBEAT_ATTRIBUTE,
    HEARTBEAT_LOST_S,
    JOB_START_GRACE_S,
    OFFER_ANSWER_S,
    AgentRequests,
    LiveKitRooms,
    RoomView,
    agent_joining,
    heartbeat_age_s,
    offer_pending,
    offer_unanswered,
    silent_agent,
)
from agent.web.session import RequestError
from agent.web.tokens import mint_token, new_identity, new_room_name
from bench.soak.people import PeopleOptions
from tests.person import AGENT_LOST_REQUEST_AFTER_S, AGENT_REQUEST_AFTER_S
from tests.web_app import API_KEY, API_SECRET, make_settings

SETTINGS = make_settings(LEXVOZ_AGENT_RETRY_S=5, LEXVOZ_MAX_CONVERSATION_S=600)


class FakeRooms:
    """livekit-server as far as `AgentRequests` sees it: one view per room, and the dispatches made.

    A room may instead be given its participants (`people`, as livekit-server lists them, at Unix time `now`):
    its view then says who is present the way `LiveKitRooms.view` does, through the same `silent_agent`."""

    def __init__(self) -> None:
        self.views: dict[str, RoomView] = {}
        self.people: dict[str, list[api.ParticipantInfo]] = {}
        self.now = NOW
        self.removed: list[tuple[str, str]] = []
        self.dispatched: list[tuple[str, str]] = []
        self.replaced: list[tuple[str, ...]] = []  # what each dispatch deleted first
        self.gone: list[str | None] = []  # what each view was told about an agent seen leaving
        self.fail: Exception | None = None
        self.slow: asyncio.Event | None = None

    def waiting(self, room: str, identity: str) -> None:
        self.views[room] = RoomView(caller_present=True, agent_present=False)

    async def view(self, room: str, identity: str, agent_name: str, gone: str | None = None) -> RoomView | None:
        self.gone.append(gone)
        if self.fail is not None:
            raise self.fail
        if self.slow is not None:
            await self.slow.wait()
        if room in self.people:
            people = self.people[room]
            silent = silent_agent(people, gone, self.now)
            return RoomView(
                caller_present=any(p.identity == identity for p in people),
                agent_present=any(p.kind == AGENT_KIND and p.identity != silent for p in people),
                silent_agent=silent,
            )
        return self.views.get(room)

    async def remove(self, room: str, identity: str) -> None:
        self.removed.append((room, identity))
        self.people[room] = [p for p in self.people.get(room, []) if p.identity != identity]

    async def dispatch(self, room: str, agent_name: str, replacing: tuple[str, ...] = ()) -> None:
        await asyncio.sleep(0.01)  # a network call: other requests run meanwhile
        self.dispatched.append((room, agent_name))
        self.replaced.append(replacing)


NOW = 1_800_000_000.0
AGENT_KIND = api.ParticipantInfo.Kind.AGENT


def participant(identity: str, *, agent: bool = True, beat_s_ago: float | None = None) -> api.ParticipantInfo:
    """A participant as livekit-server lists it; `beat_s_ago`: its last sign of life, by the worker's clock."""
    info = api.ParticipantInfo(identity=identity, kind=AGENT_KIND if agent else api.ParticipantInfo.Kind.STANDARD)
    if beat_s_ago is not None:
        info.attributes[HEARTBEAT_ATTRIBUTE] = str(int((NOW - beat_s_ago) * 1000))
    return info


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


Asker = Callable[..., Any]


@pytest.fixture
def rooms() -> FakeRooms:
    return FakeRooms()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def client(rooms: FakeRooms, clock: Clock) -> AsyncIterator[TestClient[Any, Any]]:
    app = create_app(SETTINGS)
    app[AGENTS_KEY] = AgentRequests(SETTINGS, rooms, clock=clock)
    test_client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
    await test_client.start_server()
    yield test_client
    await test_client.close()


def session() -> tuple[str, str, str]:
    room, identity = new_room_name(), new_identity()
    return room, identity, mint_token(SETTINGS, room=room, identity=identity)


async def ask(
    client: TestClient[Any, Any], token: str | None, body: Any = None, **headers: str
) -> tuple[int, dict[str, Any], Any]:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    resp = (
        await client.post("/api/agent", headers=headers, json=body)
        if body is not None
        else await client.post("/api/agent", headers=headers)
    )
    return resp.status, await resp.json(), resp.headers


async def test_a_person_waiting_in_an_empty_room_gets_a_new_dispatch_of_our_agent(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    room, identity, token = session()
    rooms.waiting(room, identity)
    status, body, headers = await ask(client, token)
    assert (status, body) == (202, {"agent": "requested", "retry_after_s": 5.0})
    assert rooms.dispatched == [(room, "lexvoz-test")]
    assert headers["Cache-Control"] == "no-store"


async def test_no_dispatch_while_an_agent_is_in_the_room_joining_or_offered(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    room, _identity, token = session()
    rooms.views[room] = RoomView(caller_present=True, agent_present=True)
    assert (await ask(client, token))[:2] == (200, {"agent": "present", "retry_after_s": 5.0})
    rooms.views[room] = RoomView(caller_present=True, agent_present=False, agent_joining=True)
    assert (await ask(client, token))[:2] == (202, {"agent": "joining", "retry_after_s": 5.0})
    rooms.views[room] = RoomView(caller_present=True, agent_present=False, offer_pending=True)
    assert (await ask(client, token))[:2] == (202, {"agent": "offered", "retry_after_s": 5.0})
    assert rooms.dispatched == []  # a second agent would talk over the first


async def test_a_room_gets_at_most_one_dispatch_per_retry_interval(
    client: TestClient[Any, Any], rooms: FakeRooms, clock: Clock
) -> None:
    room, identity, token = session()
    rooms.waiting(room, identity)
    assert (await ask(client, token))[0] == 202
    clock.now += 4.9
    status, body, headers = await ask(client, token)
    assert status == 429 and "espere" in body["error"]
    assert headers["Retry-After"] == "5"
    clock.now += 0.2
    assert (await ask(client, token))[0] == 202
    assert len(rooms.dispatched) == 2


async def test_two_requests_at_once_for_one_room_make_one_dispatch(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    room, identity, token = session()
    rooms.waiting(room, identity)
    rooms.slow = asyncio.Event()
    both = asyncio.gather(ask(client, token), ask(client, token))
    await asyncio.sleep(0.2)  # both requests are inside the room lookup
    rooms.slow.set()
    statuses = sorted(status for status, _body, _headers in await both)
    assert statuses == [202, 429]
    assert len(rooms.dispatched) == 1


async def test_another_rooms_wait_does_not_hold_this_one_back(client: TestClient[Any, Any], rooms: FakeRooms) -> None:
    first, second = session(), session()
    for room, identity, _token in (first, second):
        rooms.waiting(room, identity)
    assert (await ask(client, first[2]))[0] == 202
    assert (await ask(client, second[2]))[0] == 202
    assert [r for r, _ in rooms.dispatched] == [first[0], second[0]]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Basic dXNlcjpwYXNz",
        "Bearer not-a-jwt",
        "Bearer " + "x" * 5000,
    ],
    ids=["missing", "empty", "no-token", "other-scheme", "garbage", "huge"],
)
async def test_a_request_without_a_valid_session_token_is_refused(
    client: TestClient[Any, Any], rooms: FakeRooms, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    status, body, _ = await ask(client, None, **headers)
    assert status == 401 and body["error"]
    assert rooms.dispatched == []


def _token(secret: str = API_SECRET, *, room: str, identity: str, ttl_s: int = 60, age_s: int = 0) -> str:
    token = (
        api.AccessToken(API_KEY, secret)
        .with_identity(identity)
        .with_ttl(timedelta(seconds=ttl_s))
        .with_grants(api.VideoGrants(room_join=True, room=room))
    )
    if not age_s:
        return token.to_jwt()
    data = jwt.decode(token.to_jwt(), options={"verify_signature": False})
    data["nbf"] -= age_s  # issued `age_s` seconds ago
    data["exp"] -= age_s
    return jwt.encode(data, secret, algorithm="HS256")


async def test_tokens_not_minted_for_a_lexvoz_room_and_person_are_refused(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    room, identity = new_room_name(), new_identity()
    rooms.waiting(room, identity)
    forged = _token("another-secret-another-secret-0123456789", room=room, identity=identity)
    assert (await ask(client, forged))[0] == 401
    rooms.waiting("someone-elses-room", identity)
    assert (await ask(client, _token(room="someone-elses-room", identity=identity)))[0] == 401
    assert (await ask(client, _token(room=room, identity="admin")))[0] == 401
    assert rooms.dispatched == []


async def test_an_expired_token_proves_the_room_for_a_conversations_length_only(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    room, identity = new_room_name(), new_identity()
    rooms.waiting(room, identity)
    # Expired 5 minutes ago, the conversation may last 10: the person is still in the room, so it counts.
    assert (await ask(client, _token(room=room, identity=identity, ttl_s=60, age_s=360)))[0] == 202
    # Expired 20 minutes ago: no conversation lasts that long.
    status, _body, _ = await ask(client, _token(room=room, identity=identity, ttl_s=60, age_s=1260))
    assert status == 401
    assert len(rooms.dispatched) == 1


async def test_only_someone_in_the_room_may_ask(client: TestClient[Any, Any], rooms: FakeRooms) -> None:
    room, _identity, token = session()
    status, body, _ = await ask(client, token)  # the room is gone
    assert status == 404 and "empiece una nueva" in body["error"]
    rooms.views[room] = RoomView(caller_present=False, agent_present=False)
    assert (await ask(client, token))[0] == 404  # a valid token, but its holder has left the room
    assert rooms.dispatched == []


async def test_a_page_from_another_origin_may_not_ask(client: TestClient[Any, Any], rooms: FakeRooms) -> None:
    room, identity, token = session()
    rooms.waiting(room, identity)
    status, body, _ = await ask(client, token, Origin="https://evil.example")
    assert status == 403 and body == {"error": "origen no permitido"}
    assert rooms.dispatched == []


@pytest.mark.parametrize(
    "failure",
    [api.TwirpError("unavailable", "down", status=503), TimeoutError()],
    ids=["livekit-error", "timeout"],
)
async def test_livekit_not_answering_is_a_503_to_retry(
    client: TestClient[Any, Any], rooms: FakeRooms, failure: Exception
) -> None:
    _room, _identity, token = session()
    rooms.fail = failure
    status, body, headers = await ask(client, token)
    assert status == 503 and body["error"]
    assert headers["Retry-After"] == "5"


async def test_the_logs_name_the_room_never_the_token(
    client: TestClient[Any, Any], rooms: FakeRooms, caplog: pytest.LogCaptureFixture
) -> None:
    room, identity, token = session()
    rooms.waiting(room, identity)
    with caplog.at_level(logging.INFO, logger="lexvoz.web"):
        await ask(client, token)
        await ask(client, token + "tampered")
    text = caplog.text
    assert room in text
    assert token not in text and token.split(".")[1] not in text


async def test_the_table_of_rooms_stays_bounded() -> None:
    rooms, clock = FakeRooms(), Clock()
    requests = AgentRequests(SETTINGS, rooms, clock=clock, max_rooms=3)
    names = [new_room_name() for _ in range(4)]
    for name in names:
        rooms.waiting(name, "usuario-x")
        assert await requests.request(name, "usuario-x") == "requested"
    # the newest rooms are remembered and must wait; the oldest was forgotten and may ask again at once
    for name in names[1:]:
        with pytest.raises(RequestError):
            await requests.request(name, "usuario-x")
    assert await requests.request(names[0], "usuario-x") == "requested"


def test_the_retry_interval_is_a_setting() -> None:
    assert AgentRequests(make_settings(LEXVOZ_AGENT_RETRY_S=12), FakeRooms()).retry_after_s == 12
    with pytest.raises(ValueError, match="LEXVOZ_AGENT_RETRY_S"):
        make_settings(LEXVOZ_AGENT_RETRY_S=0)


def _dispatch(created_s_ago: float, *jobs: tuple[int, float]) -> api.AgentDispatch:
    now_ns = int(NOW * 1e9)
    dispatch = api.AgentDispatch(agent_name="lexvoz-test", room="lexvoz-x")
    dispatch.state.created_at = now_ns - int(created_s_ago * 1e9)
    for status, started_s_ago in jobs:
        job = dispatch.state.jobs.add()
        job.state.status = status  # type: ignore[assignment]
        job.state.started_at = now_ns - int(started_s_ago * 1e9)
    return dispatch


RUNNING, FAILED, PENDING = (api.JobStatus.JS_RUNNING, api.JobStatus.JS_FAILED, api.JobStatus.JS_PENDING)
# From a worker's accepting a job to its agent's joining the room: at most 3.7 s over 323 jobs in an hour's soak on a
# saturated two-CPU host.
AGENT_JOIN_S = 5.0


def test_a_job_whose_agent_the_caller_saw_leave_is_not_joining() -> None:
    """A worker killed seconds into a conversation: livekit-server still lists its job as running, as assigned, so
    the room waited out the rest of the grace before a new offer. The page names the agent it saw leave."""
    dispatch = _dispatch(10.0, (RUNNING, 8.0))
    dispatch.state.jobs[0].state.participant_identity = "agent-AJ_dead"
    assert agent_joining(dispatch, NOW)
    assert not agent_joining(dispatch, NOW, gone="agent-AJ_dead")
    assert agent_joining(dispatch, NOW, gone="agent-AJ_other")  # another agent's leaving says nothing of this one
    assert agent_joining(dispatch, NOW, gone="")


async def test_the_page_may_name_the_agent_it_saw_leave_and_nothing_else(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    room, identity, token = session()
    rooms.waiting(room, identity)
    status, _, _ = await ask(client, token, body={"left": "agent-AJ_dead"})
    assert status == 202 and rooms.gone == ["agent-AJ_dead"]
    for bad in ({"left": 7}, {"left": ""}, {"left": "x" * 257}, {"left": "a", "room": "lexvoz-other"}, ["left"]):
        status, body, _ = await ask(client, token, body=bad)
        assert status == 400 and "error" in body, bad
    assert rooms.gone == ["agent-AJ_dead"] and len(rooms.dispatched) == 1  # refused before asking LiveKit
    await ask(client, token)
    assert rooms.gone[-1] is None  # no body: as before


def test_a_job_whose_worker_died_before_its_agent_joined_is_offered_again_while_the_page_waits() -> None:
    """A worker killed a fraction of a second after accepting a room (the soak's worker restart): livekit-server
    keeps that job "running" for good, since it never marks a job whose worker died before it started, and the
    service answered "joining" for a whole minute while the person waited in silence. The page asks
    AGENT_REQUEST_AFTER_S after it began waiting and then every LEXVOZ_AGENT_RETRY_S; a request past the job's
    grace makes a new offer, early enough for its agent to join (a few seconds) before the soak's person, who waits
    no longer than `stuck_after_s`, counts the page as stuck."""
    retry_s = make_settings().agent_retry_s
    asks = [AGENT_REQUEST_AFTER_S + n * retry_s for n in range(20)]
    offered_again = next(t for t in asks if not agent_joining(_dispatch(t, (RUNNING, t)), NOW))
    assert offered_again + AGENT_JOIN_S <= PeopleOptions(web_url="").stuck_after_s
    assert JOB_START_GRACE_S > AGENT_JOIN_S  # a job still starting normally is never offered twice


@pytest.mark.parametrize(
    ("dispatch", "joining", "offered", "unanswered"),
    [
        (_dispatch(2.0), False, True, False),  # offered 2 s ago, a worker may still answer
        # 5 s with no job listed: livekit-server may not list yet a job its worker accepted (up to 5 s after a
        # worker registers); replacing the dispatch would end that job
        (_dispatch(5.0), False, True, False),
        (_dispatch(9.0), False, False, True),  # a registered worker answers at once, listed by now: none was there
        (_dispatch(11.0), False, False, True),  # past even livekit-server's own 10 s wait
        (_dispatch(30.0, (RUNNING, 5.0)), True, False, False),  # accepted 5 s ago, the agent is joining
        (_dispatch(30.0, (PENDING, 5.0)), True, False, False),
        (_dispatch(90.0, (RUNNING, 70.0)), False, False, False),  # "running" 70 s with no agent in the room: lost
        (_dispatch(20.0, (RUNNING, 20.0)), False, False, False),  # its worker died before its agent joined
        (_dispatch(30.0, (FAILED, 5.0)), False, False, False),  # a worker took it: not replaced, only added to
        (_dispatch(30.0, (FAILED, 20.0), (RUNNING, 3.0)), True, False, False),
    ],
    ids=[
        "offer-in-flight",
        "accepted-not-listed",
        "no-answer",
        "offer-failed",
        "accepted",
        "pending",
        "stale-job",
        "never-joined",
        "failed-job",
        "retried",
    ],
)
def test_what_counts_as_an_agent_joining_or_an_offer_still_out(
    dispatch: api.AgentDispatch, joining: bool, offered: bool, unanswered: bool
) -> None:
    assert agent_joining(dispatch, NOW) is joining
    assert offer_pending(dispatch, NOW) is offered
    assert offer_unanswered(dispatch, NOW) is unanswered


async def test_a_dispatch_no_worker_took_is_replaced_not_added_to(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    """Right after livekit-server restarts, a new room's dispatch goes to no worker; the next one deletes it, so a
    worker that answers it late cannot bring a second agent (livekit-server ends a deleted dispatch's jobs)."""
    room, _identity, token = session()
    rooms.views[room] = RoomView(caller_present=True, agent_present=False, unanswered=("AD_first", "AD_second"))
    status, body, _ = await ask(client, token)
    assert (status, body["agent"]) == (202, "requested")
    assert rooms.dispatched == [(room, "lexvoz-test")] and rooms.replaced == [("AD_first", "AD_second")]


# A dead worker's agent: livekit-server lists it until its 15 s ping timeout, with its last sign of life.
DEAD = "agent-AJ_dead"


async def test_an_agent_named_as_left_whose_sign_of_life_is_stale_is_removed_and_replaced(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    """The page saw the agent fall silent; livekit-server would keep it in the room, and the page service would
    answer `present`, for another 5-10 s. Its heartbeat is 11 s old: it is removed and a new agent dispatched."""
    room, identity, token = session()
    rooms.people[room] = [participant(identity, agent=False), participant(DEAD, beat_s_ago=HEARTBEAT_LOST_S + 1)]
    status, body, _ = await ask(client, token, body={"left": DEAD})
    assert (status, body["agent"]) == (202, "requested")
    assert rooms.removed == [(room, DEAD)]
    assert rooms.dispatched == [(room, "lexvoz-test")]


async def test_a_removed_agent_still_gets_a_new_dispatch_only_at_the_usual_pace(
    client: TestClient[Any, Any], rooms: FakeRooms, clock: Clock
) -> None:
    room, identity, token = session()
    rooms.people[room] = [participant(identity, agent=False)]
    assert (await ask(client, token))[0] == 202  # the first agent's dispatch, just now
    rooms.people[room].append(participant(DEAD, beat_s_ago=HEARTBEAT_LOST_S + 1))
    clock.now += 1.0
    status, body, _ = await ask(client, token, body={"left": DEAD})
    assert status == 429 and "espere" in body["error"]
    assert rooms.removed == [(room, DEAD)]  # gone from the room; the next dispatch waits its turn
    clock.now += 5.0
    assert (await ask(client, token, body={"left": DEAD}))[:2] == (202, {"agent": "requested", "retry_after_s": 5.0})
    assert len(rooms.dispatched) == 2 and rooms.removed == [(room, DEAD)]


@pytest.mark.parametrize("beat_s_ago", [0.0, 3.0, HEARTBEAT_LOST_S - 0.5], ids=["just-now", "a-period", "late"])
async def test_a_page_cannot_evict_an_agent_whose_sign_of_life_is_fresh(
    client: TestClient[Any, Any], rooms: FakeRooms, beat_s_ago: float
) -> None:
    room, identity, token = session()
    rooms.people[room] = [participant(identity, agent=False), participant(DEAD, beat_s_ago=beat_s_ago)]
    assert (await ask(client, token, body={"left": DEAD}))[:2] == (200, {"agent": "present", "retry_after_s": 5.0})
    assert rooms.removed == [] and rooms.dispatched == []


async def test_an_agent_that_never_sent_a_sign_of_life_is_never_removed(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    """A worker from before the heartbeat: its agents are judged by livekit-server's timeout alone, as before."""
    room, identity, token = session()
    rooms.people[room] = [participant(identity, agent=False), participant(DEAD)]
    assert (await ask(client, token, body={"left": DEAD}))[:2] == (200, {"agent": "present", "retry_after_s": 5.0})
    assert rooms.removed == []


async def test_a_caller_cannot_remove_a_participant_that_is_not_an_agent(
    client: TestClient[Any, Any], rooms: FakeRooms
) -> None:
    """Not another person, however stale the attribute it set itself; not the caller; not an unnamed agent."""
    room, identity, token = session()
    other = new_identity()
    rooms.people[room] = [
        participant(identity, agent=False, beat_s_ago=60.0),
        participant(other, agent=False, beat_s_ago=60.0),
        participant(DEAD, beat_s_ago=60.0),
    ]
    for left in (other, identity, "agent-AJ_elsewhere"):
        status, body, _ = await ask(client, token, body={"left": left})
        assert (status, body["agent"]) == (200, "present"), left
    await ask(client, token)  # naming nobody
    assert rooms.removed == [] and rooms.dispatched == []
    assert [p.identity for p in rooms.people[room]] == [identity, other, DEAD]


@pytest.mark.parametrize(
    ("value", "age"),
    [
        (str(int(NOW * 1000) - 12_345), 12.345),
        (str(int(NOW * 1000) + 60_000), 0.0),  # a worker clock ahead: fresh, never negative
        ("", None),
        ("soon", None),
        ("-5", None),
        ("1.5e12", None),
        ("١٢٣", None),  # Arabic-Indic digits: str.isdigit says yes, the worker never writes them
        ("9" * 17, None),
    ],
    ids=["stamp", "future", "empty", "word", "negative", "float", "non-ascii-digits", "huge"],
)
def test_how_old_a_sign_of_life_is(value: str, age: float | None) -> None:
    info = participant(DEAD)
    info.attributes[HEARTBEAT_ATTRIBUTE] = value
    measured = heartbeat_age_s(info, NOW)
    assert measured == pytest.approx(age) if age is not None else measured is None


class FakeLiveKitAPI:
    """livekit-api's `LiveKitAPI` as `LiveKitRooms` uses it: the room's participants and dispatches, and the
    calls made. It stands in for both services (`room` and `agent_dispatch`)."""

    def __init__(self, people: list[api.ParticipantInfo], dispatches: list[api.AgentDispatch]) -> None:
        self.room = self.agent_dispatch = self
        self.people = people
        self.dispatches = dispatches
        self.removed: list[tuple[str, str]] = []

    async def list_participants(self, request: api.ListParticipantsRequest) -> api.ListParticipantsResponse:
        return api.ListParticipantsResponse(participants=self.people)

    async def list_dispatch(self, room: str) -> list[api.AgentDispatch]:
        return self.dispatches

    async def remove_participant(self, remove: api.RoomParticipantIdentity) -> api.RemoveParticipantResponse:
        self.removed.append((remove.room, remove.identity))
        return api.RemoveParticipantResponse()


async def test_livekit_rooms_sees_through_a_silent_agent_and_removes_it_through_room_service() -> None:
    """The real `Rooms`: the silent agent neither counts as present nor as joining (its job is the dead one)."""
    job = _dispatch(40.0, (RUNNING, 30.0))
    job.state.jobs[0].state.participant_identity = DEAD
    people = [participant("lexvoz-user-1", agent=False), participant(DEAD, beat_s_ago=HEARTBEAT_LOST_S + 2)]
    fake = FakeLiveKitAPI(people, [job])
    rooms = LiveKitRooms(SETTINGS, clock=lambda: NOW)
    rooms._api = fake  # type: ignore[assignment]  # the one seam: the API client is made on first use

    view = await rooms.view("lexvoz-x", "lexvoz-user-1", "lexvoz-test", DEAD)
    assert view == RoomView(caller_present=True, agent_present=False, silent_agent=DEAD)
    await rooms.remove("lexvoz-x", DEAD)
    assert fake.removed == [("lexvoz-x", DEAD)]

    fresh = await rooms.view("lexvoz-x", "lexvoz-user-1", "lexvoz-test", None)
    assert fresh is not None and fresh.agent_present and fresh.silent_agent is None  # not named: not judged


def test_the_pages_first_request_comes_just_after_an_unanswered_offer_is_replaced() -> None:
    """The page asks first once the service would replace an offer nobody took (a sooner request changes nothing,
    a later one leaves the person waiting longer after a livekit-server restart); the soak's person follows it."""
    page = Path("web/src/agentRequest.ts").read_text(encoding="utf-8")
    after = re.search(r"export const AGENT_REQUEST_AFTER_MS = ([\d_]+);", page)
    assert after
    first_s = int(after.group(1).replace("_", "")) / 1000
    assert OFFER_ANSWER_S < first_s <= OFFER_ANSWER_S + 1
    assert AGENT_REQUEST_AFTER_S == first_s
    lost = re.search(r"export const AGENT_LOST_REQUEST_AFTER_MS = ([\d_]+);", page)
    assert lost and AGENT_LOST_REQUEST_AFTER_S == int(lost.group(1).replace("_", "")) / 1000

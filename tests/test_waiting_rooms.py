"""A worker that registers offers again the rooms whose offer went nowhere while no worker was registered, and
only those: never a room whose dispatch may still bring an agent, never when other workers were serving.

livekit-server is a double here (its rooms, participants and dispatches, and the calls made), so each case is
set up exactly; `tests/e2e/test_waiting_e2e.py` does it with the real livekit-server and worker.
"""

from __future__ import annotations

import logging

import pytest
from livekit import api

from agent.waiting_rooms import AGENT_NAME_ATTRIBUTE, MARGIN_S, Offered, WaitingRooms, left_waiting
from tests.web_app import make_settings

SETTINGS = make_settings()
NAME = "lexvoz-test"  # make_settings' agent name
REGISTERED = 1_800_000_000.0


def dispatch(
    room: str, made_s_before: float, *, job: bool = False, name: str = NAME, id: str = ""
) -> api.AgentDispatch:
    d = api.AgentDispatch(id=id or f"AD_{room}", agent_name=name, room=room)
    d.state.created_at = int((REGISTERED - made_s_before) * 1e9)
    if job:
        d.state.jobs.add().state.status = api.JobStatus.JS_RUNNING
    return d


def person(identity: str = "usuario-1") -> api.ParticipantInfo:
    return api.ParticipantInfo(identity=identity, kind=api.ParticipantInfo.Kind.STANDARD)


def agent(name: str = NAME) -> api.ParticipantInfo:
    return api.ParticipantInfo(
        identity=f"agent-{name}", kind=api.ParticipantInfo.Kind.AGENT, attributes={AGENT_NAME_ATTRIBUTE: name}
    )


class FakeLiveKit:
    """livekit-server's room and dispatch services as `WaitingRooms` calls them, with the calls recorded."""

    def __init__(self) -> None:
        self.room = self.agent_dispatch = self
        self.people: dict[str, list[api.ParticipantInfo]] = {}
        self.dispatches: dict[str, list[api.AgentDispatch]] = {}
        self.gone: set[str] = set()  # dispatch ids someone else deleted already
        self.fail: Exception | None = None
        self.calls: list[tuple[str, str]] = []

    def add(self, room: str, people: list[api.ParticipantInfo], *dispatches: api.AgentDispatch) -> None:
        self.people[room] = people
        self.dispatches[room] = list(dispatches)

    async def list_rooms(self, _request: api.ListRoomsRequest) -> api.ListRoomsResponse:
        if self.fail:
            raise self.fail
        rooms = [api.Room(name=r) for r in self.people]  # livekit-server's count lags a fresh room's people
        return api.ListRoomsResponse(rooms=rooms)

    async def list_participants(self, request: api.ListParticipantsRequest) -> api.ListParticipantsResponse:
        self.calls.append(("list_participants", request.room))
        return api.ListParticipantsResponse(participants=self.people[request.room])

    async def list_dispatch(self, room: str) -> list[api.AgentDispatch]:
        return self.dispatches[room]

    async def delete_dispatch(self, dispatch_id: str, room: str) -> api.AgentDispatch:
        self.calls.append(("delete", dispatch_id))
        if dispatch_id in self.gone:
            raise api.TwirpError(api.TwirpErrorCode.NOT_FOUND, "dispatch ID not found", status=404)
        return api.AgentDispatch(id=dispatch_id)

    async def create_dispatch(self, request: api.CreateAgentDispatchRequest) -> api.AgentDispatch:
        self.calls.append(("create", f"{request.room}:{request.agent_name}"))
        return api.AgentDispatch(id="AD_new", room=request.room, agent_name=request.agent_name)

    @property
    def made(self) -> list[str]:
        return [what for call, what in self.calls if call == "create"]


async def run(lk: FakeLiveKit, **kwargs: int) -> Offered:
    return await WaitingRooms(SETTINGS, connect=lambda: lk, **kwargs).offer_again(REGISTERED)  # type: ignore[arg-type, return-value]


async def test_a_room_whose_offer_ran_before_the_registration_is_offered_again() -> None:
    lk = FakeLiveKit()
    lk.add("lexvoz-a", [person()], dispatch("lexvoz-a", 2.0))
    assert await run(lk) == Offered(rooms=("lexvoz-a",))
    assert [c for c in lk.calls if c[0] != "list_participants"] == [
        ("delete", "AD_lexvoz-a"),  # deleted first: a late answer to the old offer cannot add a second agent
        ("create", f"lexvoz-a:{NAME}"),
    ]


@pytest.mark.parametrize(
    ("dispatches", "why"),
    [
        ([dispatch("r", MARGIN_S / 2)], "made just before the registration: its offer may have found this worker"),
        ([dispatch("r", 2.0, job=True)], "a worker took it"),
        ([dispatch("r", 30.0, id="AD_1"), dispatch("r", 0.2, id="AD_2")], "a newer offer may still bring one"),
        ([dispatch("r", 2.0, name="someone-else")], "not our agent's"),
        ([], "no dispatch of ours: the room is not ours to serve"),
    ],
)
def test_a_dispatch_that_may_still_bring_an_agent_is_never_replaced(
    dispatches: list[api.AgentDispatch], why: str
) -> None:
    assert left_waiting(dispatches, NAME, REGISTERED) == [], why


def test_every_dead_dispatch_of_a_room_is_replaced_together() -> None:
    both = [dispatch("r", 40.0, id="AD_1"), dispatch("r", 20.0, id="AD_2"), dispatch("r", 1.0, name="other")]
    assert left_waiting(both, NAME, REGISTERED) == ["AD_1", "AD_2"]


async def test_nothing_is_touched_while_an_agent_of_ours_serves_any_room() -> None:
    """Then other workers were registered all along: an offer of theirs may be accepted and not yet listed, and
    deleting it would end the job that was bringing the room its agent."""
    lk = FakeLiveKit()
    lk.add("lexvoz-a", [person()], dispatch("lexvoz-a", 2.0))
    lk.add("lexvoz-b", [person("usuario-2"), agent()], dispatch("lexvoz-b", 60.0, job=True))
    offered = await run(lk)
    assert offered.rooms == () and offered.skipped and "agent of ours" in offered.skipped
    assert lk.made == []


async def test_another_teams_agent_or_an_empty_room_changes_nothing() -> None:
    lk = FakeLiveKit()
    lk.add("lexvoz-a", [person(), agent("someone-else")], dispatch("lexvoz-a", 3.0))
    lk.add("lexvoz-b", [agent("someone-else")], dispatch("lexvoz-b", 3.0))  # no person: nobody is waiting
    assert (await run(lk)).rooms == ("lexvoz-a",)
    assert lk.made == [f"lexvoz-a:{NAME}"]


async def test_a_room_another_worker_claimed_first_is_left_to_it() -> None:
    """Workers share one reconnect backoff and register together: the one whose delete succeeds offers the room,
    and a delete told the dispatch is gone makes no second dispatch."""
    lk = FakeLiveKit()
    lk.add("lexvoz-a", [person()], dispatch("lexvoz-a", 2.0))
    lk.add("lexvoz-b", [person("usuario-2")], dispatch("lexvoz-b", 2.0))
    lk.gone.add("AD_lexvoz-a")
    assert (await run(lk)).rooms == ("lexvoz-b",)
    assert lk.made == [f"lexvoz-b:{NAME}"]


async def test_livekit_not_answering_is_logged_and_raises_nothing(caplog: pytest.LogCaptureFixture) -> None:
    lk = FakeLiveKit()
    lk.fail = api.TwirpError(api.TwirpErrorCode.UNAVAILABLE, "down", status=503)
    with caplog.at_level(logging.WARNING, logger="lexvoz.worker"):
        offered = await run(lk)
    assert offered == Offered(skipped="livekit-server did not answer")
    assert "rooms left waiting not checked: LiveKit did not answer" in caplog.text


async def test_a_pass_looks_at_a_bounded_number_of_rooms(caplog: pytest.LogCaptureFixture) -> None:
    lk = FakeLiveKit()
    for i in range(5):
        lk.add(f"lexvoz-{i}", [person()], dispatch(f"lexvoz-{i}", 2.0))
    with caplog.at_level(logging.WARNING, logger="lexvoz.worker"):
        offered = await run(lk, max_rooms=3)
    assert offered.rooms == ("lexvoz-0", "lexvoz-1", "lexvoz-2") and offered.skipped == "2 rooms not looked at"
    assert len([c for c in lk.calls if c[0] == "list_participants"]) == 3
    assert "2 rooms not looked at" in caplog.text


async def test_a_room_offered_again_is_logged_by_name_only(caplog: pytest.LogCaptureFixture) -> None:
    lk = FakeLiveKit()
    lk.add("lexvoz-a", [person()], dispatch("lexvoz-a", 2.0))
    with caplog.at_level(logging.INFO, logger="lexvoz.worker"):
        await run(lk)
    assert "offered again room=lexvoz-a" in caplog.text and "usuario-1" not in caplog.text

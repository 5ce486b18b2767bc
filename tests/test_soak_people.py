"""The soak's simulated person (bench/soak/people.py): what a visit does when its agent is lost mid-question.

The room, the agent and the answers are scripted here; what is tested is the visit's own rule for going on, which
the soak's judgement of each conversation (bench/soak/figures.py) depends on.
"""

from __future__ import annotations

import random
import time
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from livekit import rtc

from bench.soak.faults import Fault
from bench.soak.figures import told_or_recovered
from bench.soak.people import MAX_ASKED_AGAIN, Page, PeopleOptions, Question, replied_without_research
from tests.person import Person

STUCK_AFTER_S = 30.0


class ScriptedPage(Page):
    """A visit whose every step is scripted: an agent is always ready, and each question ends as `endings` say."""

    def __init__(self, http: aiohttp.ClientSession, endings: list[tuple[str | None, str | None]]) -> None:
        opts = PeopleOptions(web_url="http://127.0.0.1:1", questions_per_visit=(1, 1), barge_in_share=0.0)
        super().__init__(0, opts, http, random.Random(1))
        self.endings = endings  # (outcome, told) for each question in turn
        self.agents_waited_for = 0

    async def open(self, stop_at: float) -> bool:
        return True

    async def agent_ready(self) -> str:
        self.agents_waited_for += 1
        return "ok"

    async def ask(self, kind: str, seen: set[str]) -> Question:
        outcome, told = self.endings.pop(0)
        now = time.monotonic()
        question = Question(kind, asked_at=now, outcome=outcome, told=told, ended_at=now if outcome else None)
        self.visit.questions.append(question)
        return question

    async def leave(self) -> None:
        self.visit.left_at = time.monotonic()


async def test_a_question_cut_off_by_a_lost_agent_is_asked_again_of_the_next_agent(
    http: aiohttp.ClientSession,
) -> None:
    """The soak's worker restart killed the agent while a person's last question waited for its search to start;
    the page judged the agent lost by its silence and would have asked for another, but the person, its questions
    all asked, left at that moment: the visit showed neither a Spanish message nor an answer after the fault, and
    counted as not told. A person asks the new agent again, so the visit shows whether the page recovered."""
    page = ScriptedPage(http, [(None, "agent_left"), ("completed", None)])
    fault = Fault("worker_restarted", injected_at=page.visit.opened_at, cleared_at=page.visit.opened_at + 30)
    visit = await page.run(stop_at=time.monotonic() + 60)
    assert [q.told or q.outcome for q in visit.questions] == ["agent_left", "completed"]
    assert page.agents_waited_for == 2  # the person waited for the next agent before asking again
    assert told_or_recovered(visit, [fault], STUCK_AFTER_S)


async def test_a_question_cut_off_by_a_livekit_server_shutdown_is_asked_again_after_the_page_rejoins(
    http: aiohttp.ClientSession,
) -> None:
    """livekit-server shut down while a question waited: the page joins its room again (web/src/App.tsx), so the
    person asks again in the same visit rather than leaving, and the visit shows whether the page recovered."""
    page = ScriptedPage(http, [(None, "rejoin"), ("completed", None)])
    fault = Fault("livekit_restarted", injected_at=page.visit.opened_at, cleared_at=page.visit.opened_at + 3)
    visit = await page.run(stop_at=time.monotonic() + 60)
    assert [q.told or q.outcome for q in visit.questions] == ["rejoin", "completed"]
    assert page.agents_waited_for == 2
    assert told_or_recovered(visit, [fault], STUCK_AFTER_S)


def test_only_a_server_shutdown_makes_the_page_rejoin(http: aiohttp.ClientSession) -> None:
    """livekit-client gives up on SERVER_SHUTDOWN and the page joins again; any other end is the session's end."""
    opts = PeopleOptions(web_url="http://127.0.0.1:1")
    shut = Page(0, opts, http, random.Random(1))
    shut._on_disconnected(rtc.DisconnectReason.SERVER_SHUTDOWN)
    assert (shut.server_shut_down, shut.disconnected, shut.message()) == (True, False, None)
    for reason in (rtc.DisconnectReason.PARTICIPANT_REMOVED, rtc.DisconnectReason.ROOM_DELETED, None):
        ended = Page(0, opts, http, random.Random(1))
        ended._on_disconnected(reason)
        assert (ended.server_shut_down, ended.message()) == (False, "session_ended")


async def test_a_question_the_page_ended_with_a_message_ends_the_visit(http: aiohttp.ClientSession) -> None:
    """What the page said ends the conversation (the session or the voice model gone): the person leaves."""
    page = ScriptedPage(http, [(None, "session_ended"), ("completed", None)])
    page.opts.questions_per_visit = (2, 2)
    visit = await page.run(stop_at=time.monotonic() + 60)
    assert [q.told for q in visit.questions] == ["session_ended"]


async def test_a_question_the_agent_replied_to_without_looking_anything_up_is_repeated(
    http: aiohttp.ClientSession,
) -> None:
    """The model's link dropped while the person was speaking: the agent apologised and asked for the question
    again. A person repeats it (the hour-long soak's person waited 30 s for a search instead, a stuck page the
    product did not have); repeats are counted, and bounded, so an agent that talks past questions still shows."""
    page = ScriptedPage(http, [(None, "replied_without_research"), ("completed", None)])
    fault = Fault("model_dropped", injected_at=page.visit.opened_at, cleared_at=page.visit.opened_at)
    visit = await page.run(stop_at=time.monotonic() + 60)
    assert [q.told or q.outcome for q in visit.questions] == ["replied_without_research", "completed"]
    assert visit.asked_again == 1 and told_or_recovered(visit, [fault], STUCK_AFTER_S)

    talks_past = ScriptedPage(http, [(None, "replied_without_research")] * (MAX_ASKED_AGAIN + 1))
    visit = await talks_past.run(stop_at=time.monotonic() + 60)
    assert visit.asked_again == MAX_ASKED_AGAIN and len(visit.questions) == MAX_ASKED_AGAIN + 1


def test_a_reply_without_research_is_a_whole_new_line_after_the_question() -> None:
    asked = 100.0

    def person(*states: tuple[float, str]) -> Any:  # the page's record of the agent's states, read by Person's rule
        page = SimpleNamespace(agent_states=list(states))
        page.spoke_since = lambda mark: Person.spoke_since(page, mark)  # type: ignore[arg-type]
        return page

    assert replied_without_research(person((101, "speaking"), (103, "listening")), asked)
    assert not replied_without_research(person((99, "speaking"), (101, "listening")), asked)  # the old line, cut
    assert not replied_without_research(person((101, "speaking")), asked)  # still saying it
    assert not replied_without_research(person((100.5, "thinking")), asked)


def an_agent(identity: str) -> Any:
    """An agent as livekit reports it joining (or already in the room when the person connects)."""
    return SimpleNamespace(kind=rtc.ParticipantKind.PARTICIPANT_KIND_AGENT, identity=identity, attributes={})


async def test_an_agent_back_in_the_room_after_a_rejoin_is_not_waited_for_to_speak_again() -> None:
    """The hour-long soak of 2026-12-04: livekit-server restarted, the page joined its room again, and the agent that
    had answered there came back by itself (its own connection reconnected), with its conversation and nothing new
    to say. The person waited for it to speak first and gave up after 30 s: 2 stuck pages the product did not have
    (the page shows that agent listening under the transcript so far). An agent this person heard in this room
    counts as heard; any other agent is waited for, as before."""
    person = Person(session={"room": "lexvoz-x"}, known_agents=frozenset({"agente-a"}))
    person._on_joined(an_agent("agente-a"))
    assert person.greeted
    person._on_joined(an_agent("agente-b"))
    assert not person.greeted
    stranger = Person(session={"room": "lexvoz-x"})  # heard nobody here: waits for the agent's first words
    stranger._on_joined(an_agent("agente-a"))
    assert not stranger.greeted


async def test_the_page_rejoining_its_room_knows_the_agents_that_spoke_there(
    http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the soak's page hands the person of the rejoined room: the agents heard in the old connection, only when
    it is the same room (a refused token gives a fresh room, where nobody has spoken yet)."""
    rooms = iter(["lexvoz-x", "lexvoz-y"])

    async def from_page_service(_url: str, _http: Any, *, resume: str | None = None, **_: Any) -> Person:
        person = Person(session={"room": next(rooms), "resume": "next"})

        async def connect() -> None:
            return None

        person.connect = connect  # type: ignore[method-assign]
        return person

    monkeypatch.setattr(Person, "from_page_service", from_page_service)
    page = Page(0, PeopleOptions(web_url="http://127.0.0.1:1"), http, random.Random(1))
    for expected in (frozenset({"agente-a"}), frozenset()):
        old = Person(session={"room": "lexvoz-x", "resume": "r1"}, spoken_to=True, heard=[("agente-a", "Hola")])
        page.person = old
        assert await page.rejoin(stop_at=time.monotonic() + 10)
        assert page.person is not None and page.person.known_agents == expected

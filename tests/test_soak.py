"""The soak benchmark (bench/soak.py): its fault of the model's sockets, its schedule, and a 3-minute run.

The 3-minute run (marker `soak`) starts the whole stack with two workers, PostgreSQL and toxiproxy, injects every
fault kind at least once while four people talk, and holds the goals a run that short can show: no evidence
lost, nothing the page saw missing from the ledger, every conversation hit by a fault told or recovered, no
page stuck, no worker death beyond the injected ones. Memory and descriptor trends need the 60-minute run.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from livekit import rtc

from bench.soak.faults import KINDS, Fault, schedule
from bench.soak.figures import growth, missed_goals, recoveries, told_or_recovered, visit_story
from bench.soak.people import Page, PeopleOptions, Question, Visit, Wait
from bench.soak.programs import Sample, Watched
from tests import person as person_module
from tests.e2e.conftest import require_livekit_server
from tests.person import AGENT_STATE_ATTRIBUTE, HEARTBEAT_ATTRIBUTE, Person
from tests.postgres_server import why_unavailable as postgres_unavailable
from tests.standin_helpers import REPO_ROOT, RealtimeStandIn

TOOL_QUESTION = {
    "type": "conversation.item.create",
    "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "¿Qué dice el art. 17?"}]},
}


async def _connect(http: aiohttp.ClientSession, standin: RealtimeStandIn) -> aiohttp.ClientWebSocketResponse:
    url = f"ws://127.0.0.1:{standin.port}/v1/realtime?model=gpt-realtime"
    return await http.ws_connect(url, headers={"Authorization": "Bearer test"})


async def test_the_standin_drops_its_model_sockets_mid_answer_with_1011(http: aiohttp.ClientSession) -> None:
    async with RealtimeStandIn(function_call_delay=3.0) as standin:  # an answer that stays open for 3 s
        ws = await _connect(http, standin)
        await ws.send_str(json.dumps(TOOL_QUESTION))
        await ws.send_str(json.dumps({"type": "response.create"}))
        control = f"http://127.0.0.1:{standin.port}/control/drop_connections"
        async with http.post(control, json={"mid_answer": True, "within_s": 10}) as resp:
            assert resp.status == 200
            assert await resp.json() == {"dropped": 1, "mid_answer": True}
        types = []
        async with asyncio.timeout(5):
            while (msg := await ws.receive()).type == aiohttp.WSMsgType.TEXT:
                types.append(json.loads(msg.data)["type"])
        assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == 1011  # the server's close frame
        assert "response.created" in types and "response.done" not in types  # cut, not finished


async def test_a_drop_with_no_answer_streaming_says_so(http: aiohttp.ClientSession) -> None:
    async with RealtimeStandIn() as standin:
        ws = await _connect(http, standin)
        control = f"http://127.0.0.1:{standin.port}/control/drop_connections"
        async with http.post(control, json={"mid_answer": True, "within_s": 0.2}) as resp:
            assert await resp.json() == {"dropped": 1, "mid_answer": False}
        async with http.post(control, json={"within_s": "soon"}) as resp:
            assert resp.status == 400
        async with asyncio.timeout(5):
            while (msg := await ws.receive()).type == aiohttp.WSMsgType.TEXT:
                pass
        assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == 1011


def test_three_minutes_schedule_every_fault_kind() -> None:
    page, ledger = schedule(3, warmup_s=20, tail_s=25)
    kinds = {kind for _, kind in page} | ({"ledger_db_stopped"} if ledger else set())
    assert kinds == set(KINDS)
    assert all(at + 20 <= 180 for at, _ in page)  # each leaves time to see it recover


def test_memory_trends_per_hour_come_only_from_a_life_long_enough_to_show_one() -> None:
    """A program the faults restart every 5 minutes is only seen warming up (livekit-server's rooms coming back
    after its restart): 6 MB in 4 minutes once read as 31 % an hour. Its trend is not extrapolated; the steady
    size of each life is given instead. A program watched for 50 minutes gets its trend per hour."""
    restarted = Watched("restarted")
    for life in range(10):  # each life: 5 minutes, sampled every 10 s, growing 80 -> 86 MB as it warms up
        for i in range(30):
            restarted.samples.append(Sample(at=life * 300 + i * 10, pid=1000 + life, rss_mb=80 + 6 * i / 29, fds=30))
    short = growth(restarted)
    assert short["rss_growth_pct_per_hour"] is None
    assert "restarted by the faults" in short["trend_unmeasured"]
    assert len(short["rss_mb_steady_by_life"]) == 10 and len(set(short["rss_mb_steady_by_life"])) == 1

    steady = Watched("steady")  # 50 minutes of one life, 100 -> 102 MB
    steady.samples = [Sample(at=i * 10, pid=7, rss_mb=100 + 2 * i / 299, fds=20) for i in range(300)]
    long = growth(steady)
    assert long["rss_growth_pct_per_hour"] is not None and 2.0 < long["rss_growth_pct_per_hour"] < 3.0
    assert "trend_unmeasured" not in long


def test_descriptors_are_judged_by_their_level_and_a_leak_misses_the_goal() -> None:
    """A server's descriptors follow the connections open: a count swinging with rooms is flat, whatever its
    last sample says; one descriptor more a minute for an hour is a leak and misses the goal. A program the
    faults restart every 5 minutes gets each life's level instead of a verdict."""
    swinging = Watched("swinging")  # 60 minutes, 25-40 descriptors as people come and go
    swinging.samples = [Sample(at=i * 10, pid=7, rss_mb=80, fds=25 + (i * 7) % 16) for i in range(360)]
    leaking = Watched("leaking")  # the same swing plus one a minute
    leaking.samples = [Sample(at=i * 10, pid=8, rss_mb=80, fds=25 + (i * 7) % 16 + i // 6) for i in range(360)]
    restarted = Watched("restarted")
    for life in range(10):
        restarted.samples += [Sample(at=life * 300 + i * 10, pid=100 + life, rss_mb=80, fds=30) for i in range(30)]
    programs = {w.name: growth(w) for w in (swinging, leaking, restarted)}
    assert programs["swinging"]["fd_flat"] is True and abs(programs["swinging"]["fd_growth"]) <= 3
    assert programs["leaking"]["fd_flat"] is False and programs["leaking"]["fd_growth"] > 30
    assert programs["restarted"]["fd_flat"] is None and programs["restarted"]["fd_steady_by_life"] == [30.0] * 10
    fig = {
        "evidence_lost": 0, "ledger_lost": 0, "stuck_pages": 0, "worker_deaths": 0, "failures_told": 1.0,
        "fault_errors": [], "recovery_p95_s": 5.0, "programs": programs,
        "rss_growth_pct_per_hour": {n: p.get("rss_growth_pct_per_hour") for n, p in programs.items()},
    }  # fmt: skip
    missed = missed_goals(fig, long_run=True)
    assert [m for m in missed if "descriptors" in m] == [
        f"leaking descriptors grow by {programs['leaking']['fd_growth']}"
    ]
    assert missed_goals(fig, long_run=False) == []  # a 3-minute run cannot show a trend


def test_a_conversation_left_waiting_in_silence_is_not_told() -> None:
    fault = [Fault("search_killed", 5.0, 25.0)]
    silent = Visit(index=0, opened_at=0.0, left_at=50.0)
    silent.waits.append(Wait("research outcome", 10.0, 41.0, None))
    assert not told_or_recovered(silent, fault, stuck_after_s=30)
    answered = Visit(index=1, opened_at=0.0, left_at=50.0)
    answered.questions.append(Question("typed", asked_at=20.0, outcome="completed", ended_at=21.0))
    assert told_or_recovered(answered, fault, stuck_after_s=30)
    unexplained = Visit(index=2, opened_at=0.0, left_at=50.0)  # its answer went missing, and nothing was said
    unexplained.questions.append(Question("typed", asked_at=20.0, outcome="discarded", ended_at=21.0))
    assert not told_or_recovered(unexplained, fault, stuck_after_s=30)
    unexplained.told.append((22.0, "session_ended"))
    assert told_or_recovered(unexplained, fault, stuck_after_s=30)


def test_a_visit_judged_untold_is_written_out_with_its_steps_and_no_words() -> None:
    """A conversation counted against `failures_told` must be diagnosable from the results file alone: when its
    fault struck, what each question got and when, what the page said, and when its agent left."""
    fault = Fault("model_dropped", 105.0, 105.5)
    visit = Visit(index=3, opened_at=100.0, room="lexvoz-x", left_at=130.0)
    visit.questions += [
        Question("typed", asked_at=103.0, call_id="c1", started_at=103.4, outcome="completed", ended_at=104.0),
        Question("spoken", asked_at=106.0, told="replied_without_research"),
    ]
    visit.agent_left_at.append(129.0)
    visit.asked_again = 2
    assert visit_story(visit, [fault], t0=100.0) == {
        "room": "lexvoz-x",
        "opened_s": 0.0,
        "left_s": 30.0,
        "faults": [["model_dropped", 5.0, 5.5]],
        "questions": [
            ["typed", 3.0, 3.4, "completed", 4.0],
            ["spoken", 6.0, None, "none:replied_without_research", None],
        ],
        "told": [],
        "agents": 0,
        "agent_left_s": [29.0],
        "asked_again": 2,
        "error": None,
    }


def test_a_recovery_is_the_first_answer_to_a_question_asked_after_clearing_and_keeps_its_steps() -> None:
    """Recovery runs from clearing to the first evidence for a question asked after it, whoever asked; an answer to
    a question asked before clearing is no recovery, and the steps of the answer that counts are kept so a slow
    recovery shows where its time went (the wait before asking, or the research)."""
    faults = [Fault("livekit_restarted", 100.0, 104.0), Fault("ledger_db_stopped", 100.0, 160.0)]
    earlier = Visit(index=0, opened_at=50.0, left_at=120.0)  # asked while the fault lasted: answered, not counted
    earlier.questions.append(Question("typed", asked_at=103.0, outcome="completed", ended_at=105.0))
    late = Visit(index=1, opened_at=90.0, left_at=140.0)
    late.questions.append(Question("spoken", asked_at=112.0, started_at=113.5, outcome="completed", ended_at=114.0))
    newcomer = Visit(index=2, opened_at=101.0, left_at=140.0)
    newcomer.waits += [Wait("agent", 102.0, 106.5, "ok"), Wait("agent listening", 106.5, 109.0, "ok")]
    newcomer.questions.append(Question("typed", asked_at=110.0, started_at=110.4, outcome="failed", ended_at=110.9))
    newcomer.questions.append(Question("typed", asked_at=111.0, started_at=111.2, outcome="completed", ended_at=111.6))
    found = recoveries([earlier, late, newcomer], faults, t0=100.0)
    assert [r.row() for r in found] == [  # the ledger's database is not a fault the page faces
        {
            "kind": "livekit_restarted",
            "cleared_s": 4.0,
            "seconds": 7.6,
            "asked_s": 7.0,
            "started_s": 7.2,
            "question": "typed",
            "new_visit": True,
            "agent_s": 2.5,
            "listening_s": 5.0,
        }
    ]


class _Agent:
    """What the room callbacks read of a remote participant."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self.attributes: dict[str, str] = {}


async def test_the_soaks_person_judges_a_silent_agent_lost_as_the_page_does(
    monkeypatch: pytest.MonkeyPatch, http: aiohttp.ClientSession
) -> None:
    """A worker SIGKILLed leaves its agent listed for 15-20 s; the page treats it as lost once no new sign of life
    has arrived for the limit (web/src/heartbeat.ts), asks for another naming it, and so must the soak's person,
    or the soak counts a stuck page the product does not have."""
    monkeypatch.setattr(person_module, "HEARTBEAT_LOST_S", 0.3)
    person = Person({"url": "", "token": "t", "room": "lexvoz-r", "identity": "lexvoz-u"})
    agent = _Agent("agent-1")
    person.agent_identity = agent.identity
    assert not person.agent_lost  # an agent that never sent a sign of life is never judged by it
    person._on_attributes({HEARTBEAT_ATTRIBUTE: "1"}, agent)  # type: ignore[arg-type]
    assert not person.agent_lost
    # No room event comes from a dead agent: the wait must wake on the page's own timer, not at its bound.
    began = time.monotonic()
    assert await person.wait_for(lambda: person.agent_lost, "silence", 30)
    assert time.monotonic() - began < 10
    person._on_attributes({HEARTBEAT_ATTRIBUTE: "2"}, agent)  # type: ignore[arg-type]  # a late refresh
    assert not person.agent_lost

    page = Page(0, PeopleOptions(web_url="http://127.0.0.1:1"), http, random.Random(1))
    page.person = person
    assert await page.wait("agent listening", lambda: False, within=30) == "agent_left"
    assert len(page.visit.agent_left_at) == 1  # the searches it started count as cut, not lost
    await person.aclose()


class _Room:
    """What `Person` reads of a room: the handlers it registers and the participants it sees."""

    def __init__(self) -> None:
        self.remote_participants: dict[str, _Agent] = {}

    def on(self, *_args: object) -> None:
        pass

    def register_text_stream_handler(self, *_args: object) -> None:
        pass


async def test_a_person_whose_connection_was_replaced_mid_greeting_asks_once_the_agent_spoke_and_listens() -> None:
    """In a cluster run a node restart replaced a person's connection while the agent greeted: the greeting's
    words went to the old connection and never arrived, yet the page showed the agent speak and then listen. The
    soak's person waited for those words for 30 s and counted a stuck page the product did not have; a person
    asks once the agent has spoken and listens again, and still not before it has spoken."""
    room = _Room()
    person = Person({"url": "", "token": "t", "room": "lexvoz-r", "identity": "lexvoz-u"}, room=room)  # type: ignore[arg-type]
    agent = _Agent("agent-1")
    agent.attributes[AGENT_STATE_ATTRIBUTE] = "listening"
    agent.kind = rtc.ParticipantKind.PARTICIPANT_KIND_AGENT  # type: ignore[attr-defined]
    room.remote_participants[agent.identity] = agent
    person._on_joined(agent)  # type: ignore[arg-type]
    person._on_mic_subscribed(None)  # type: ignore[arg-type]
    assert not person.listening()  # joined and listening, but has not greeted yet
    person._on_attributes({AGENT_STATE_ATTRIBUTE: "speaking"}, agent)  # type: ignore[arg-type]
    agent.attributes[AGENT_STATE_ATTRIBUTE] = "speaking"
    assert not person.listening()  # still greeting
    agent.attributes[AGENT_STATE_ATTRIBUTE] = "listening"  # the change event was lost with the old connection
    assert person.listening() and not person.greeted


@pytest.mark.soak
def test_three_minutes_of_faults_lose_nothing_and_leave_no_page_waiting(tmp_path: Path) -> None:
    require_livekit_server()
    if (why := postgres_unavailable()) is not None:
        pytest.skip(why)
    out = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, "bench/soak.py", "--minutes", "3", "--out", str(out), "--keep-logs", str(tmp_path / "log")],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.is_file(), done.stderr[-3000:]
    fig = json.loads(out.read_text(encoding="utf-8"))
    assert set(fig["faults"]) == set(KINDS), fig["faults"]
    assert fig["fault_errors"] == []
    assert fig["questions"] > 0 and fig["answered"] > 0
    assert fig["evidence_lost"] == 0, fig["evidence_lost_examples"]
    assert fig["ledger_lost"] == 0, fig["ledger_lost_examples"]
    assert fig["failures_told"] == 1.0, fig["not_told"]
    assert fig["stuck_pages"] == 0, fig["stuck_examples"]
    assert fig["worker_deaths"] == 0, fig["worker_deaths_detail"]

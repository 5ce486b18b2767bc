"""A person in a LiveKit room, end to end: audio or typed question in, evidence messages out.

Everything is real except the Realtime model (the local stand-in, in rehearsal mode) and the person,
who is a Python participant: it gets its token from the token service like the page does, publishes
a microphone track (silence, with ~1 s bursts of loud tone where a person would speak, which the
stand-in's energy VAD turns into user turns), and records what the agent publishes on
`lexvoz.research`. The assertions are about what a user can see: which messages arrive, from whom,
in which order, with which sources.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from livekit import rtc
from livekit.protocol.agent_pb import agent_session as agent_pb

from agent.ops.ledger.reader import read_room
from tests.person import CHAT_TOPIC, Message, Person

from .conftest import E2EStack

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

MODE_ATTRIBUTE = "lexvoz.mode"

JOIN_TIMEOUT_S = 45.0  # first job on a cold worker: spawn a process, load the VAD, connect the model
ANSWER_TIMEOUT_S = 30.0  # one search with the test delay, plus the audio path, with room to spare


class Participant(Person):
    """A person in one room (`tests/person.py`: token from the token service, microphone, chat), plus the
    lookups these tests assert on."""

    @property
    def evidence(self) -> list[Message]:
        return self.messages

    def agent(self) -> rtc.RemoteParticipant | None:
        return self.room.remote_participants.get(self.agent_identity) if self.agent_identity else None

    async def wait_until_agent_listens(self) -> rtc.RemoteParticipant:
        """The agent has joined, greeted us to the end, and is listening to our microphone.

        Joining and even subscribing to our track happen before the agent's Realtime connection is up,
        and audio sent before that is never heard. The greeting is the first thing the model says, so
        once its transcript has fully arrived and the agent is back to listening, the whole audio
        path is live.
        """
        await self.wait_until_listening(JOIN_TIMEOUT_S)
        agent = self.agent()
        assert agent is not None
        return agent

    def first_of(self, kind: str, call_id: str | None = None, *, exclude: set[str] | None = None) -> Message | None:
        for e in self.messages:
            if e.type == kind and (call_id is None or e.call_id == call_id) and e.call_id not in (exclude or set()):
                return e
        return None

    async def wait_message(
        self,
        kind: str,
        call_id: str | None = None,
        *,
        exclude: set[str] | None = None,
        within: float = ANSWER_TIMEOUT_S,
    ) -> Message:
        label = f"{kind!r} message" + (f" for call {call_id}" if call_id else "")
        return await self.wait_for(lambda: self.first_of(kind, call_id, exclude=exclude), label, within)

    def of_call(self, call_id: str) -> list[str]:
        """The search's own messages; a spoken citation its sources verified also names the call, but is the
        check of the agent's words, not a step of the search."""
        return [e.type for e in self.messages if e.call_id == call_id and e.type != "citation_checked"]


JoinRoom = Callable[[], Awaitable[Participant]]


@pytest.fixture
async def join_room(e2e_stack: E2EStack) -> AsyncIterator[JoinRoom]:
    """Join a fresh room (new session from the token service) and wait until the agent listens."""
    joined: list[Participant] = []

    async def join() -> Participant:
        participant = Participant(await e2e_stack.new_session())
        joined.append(participant)
        await asyncio.wait_for(participant.connect(), 20)
        # The token dispatches the agent; a worker refusing the job (load) would fail here.
        await participant.wait_until_agent_listens()
        return participant

    yield join
    for participant in joined:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(participant.aclose(), 10)


def _assert_from_agent(participant: Participant, *evidence: Message) -> None:
    agent = participant.agent()
    assert agent is not None and agent.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT
    for e in evidence:
        assert e.sender == agent.identity, f"{e.type} came from {e.sender!r}, not the agent {agent.identity!r}"


def _assert_real_sources(completed: Message) -> list[dict[str, str]]:
    sources = completed.body["sources"]
    assert 1 <= len(sources) <= 3, sources
    for source in sources:
        assert source["title"] and source["citation"] and source["excerpt"], source
        assert source["citation"].startswith("Constitución Política de la República de Panamá, artículo "), source
    return sources


async def test_agent_joins_in_rehearsal_mode(join_room: JoinRoom) -> None:
    participant = await join_room()
    agent = participant.agent()
    assert agent is not None
    assert agent.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT
    assert agent.attributes.get(MODE_ATTRIBUTE) == "rehearsal"


async def test_spoken_question_gets_sources_from_the_corpus(join_room: JoinRoom, e2e_stack: E2EStack) -> None:
    participant = await join_room()
    await participant.mic.speak()

    started = await participant.wait_message("started")
    assert started.body["query"] == e2e_stack.question
    completed = await participant.wait_message("completed", started.call_id)

    assert participant.evidence.index(started) < participant.evidence.index(completed)
    assert participant.of_call(started.call_id) == ["started", "completed"]
    assert completed.body["turn"] == started.body["turn"]
    _assert_from_agent(participant, started, completed)
    # the gateway's clock covers the real round trip, test delay included
    assert completed.body["tool_duration_ms"] >= e2e_stack.search_delay_ms
    sources = _assert_real_sources(completed)
    official = [s for s in sources if s["citation"].endswith("artículo 7")]
    assert official, [s["citation"] for s in sources]
    assert "español es el idioma oficial" in official[0]["excerpt"]


async def _barge_in_during_search(participant: Participant) -> tuple[Message, Message, Message]:
    """Ask, wait for the search to start, talk over it. Returns (started, discarded, next completed)."""
    await participant.mic.speak()
    started = await participant.wait_message("started")
    # The search is still running on the server (test delay); speaking now is a barge-in by audio.
    await participant.mic.speak()
    discarded = await participant.wait_message("discarded", started.call_id)
    # The barge-in is itself a question (the stand-in hears the same words again): a new call.
    follow_up = await participant.wait_message("started", exclude={started.call_id})
    completed = await participant.wait_message("completed", follow_up.call_id)
    return started, discarded, completed


async def test_barge_in_discards_the_running_search(join_room: JoinRoom) -> None:
    participant = await join_room()
    started, discarded, follow_up = await _barge_in_during_search(participant)

    # By now the first search's own result has come back from the server too (it started earlier and
    # takes as long), so a leaked `completed` for it would already be here.
    assert participant.of_call(started.call_id) == ["started", "discarded"]
    assert discarded.body["turn"] == started.body["turn"]
    assert follow_up.call_id != started.call_id
    assert follow_up.body["turn"] > started.body["turn"]
    _assert_from_agent(participant, started, discarded, follow_up)
    _assert_real_sources(follow_up)


async def test_barge_in_cancels_the_search_on_the_mcp_server(join_room: JoinRoom, e2e_stack: E2EStack) -> None:
    participant = await join_room()
    log_offset = e2e_stack.search_log.stat().st_size
    await _barge_in_during_search(participant)  # any failure here is a real failure, not the known gap
    # The follow-up search has completed, so the server has long had the cancellation for the first.
    with e2e_stack.search_log.open("rb") as log:
        log.seek(log_offset)
        new_lines = log.read().decode("utf-8", errors="replace")
    assert "tool call cancelled" in new_lines, f"the search server never saw the cancellation:\n{new_lines}"


async def test_two_rooms_at_once_keep_their_evidence_apart(join_room: JoinRoom, e2e_stack: E2EStack) -> None:
    other_question = "¿A qué edad se adquiere la ciudadanía panameña?"
    spoken, typed = await asyncio.gather(join_room(), join_room())
    agent_a, agent_b = spoken.agent(), typed.agent()
    assert agent_a is not None and agent_b is not None
    assert spoken.name != typed.name and agent_a.identity != agent_b.identity  # two rooms, two jobs

    # Both questions in flight at the same time: one spoken, one typed.
    await asyncio.gather(spoken.mic.speak(), typed.room.local_participant.send_text(other_question, topic=CHAT_TOPIC))
    started_a, started_b = await asyncio.gather(spoken.wait_message("started"), typed.wait_message("started"))
    completed_a, completed_b = await asyncio.gather(
        spoken.wait_message("completed", started_a.call_id), typed.wait_message("completed", started_b.call_id)
    )

    assert started_a.body["query"] == e2e_stack.question
    assert started_b.body["query"] == other_question
    _assert_real_sources(completed_a)
    _assert_real_sources(completed_b)
    for room, agent, question in ((spoken, agent_a, e2e_stack.question), (typed, agent_b, other_question)):
        assert {e.sender for e in room.evidence} == {agent.identity}
        assert {e.body["query"] for e in room.evidence if e.type == "started"} == {question}
    assert not {e.call_id for e in spoken.evidence} & {e.call_id for e in typed.evidence}


async def test_typed_chat_question_gets_sources(join_room: JoinRoom, e2e_stack: E2EStack) -> None:
    question = "¿Qué dice la Constitución sobre la libertad de culto? Mi correo es ana@example.com"
    participant = await join_room()
    await participant.room.local_participant.send_text(question, topic=CHAT_TOPIC)

    started = await participant.wait_message("started")
    # the room sees the query exactly as it left the worker: personal data masked
    assert started.body["query"] == question.replace("ana@example.com", "[correo]")
    completed = await participant.wait_message("completed", started.call_id)
    assert participant.of_call(started.call_id) == ["started", "completed"]
    _assert_from_agent(participant, started, completed)
    assert completed.body["tool_duration_ms"] > 0
    citations = [s["citation"] for s in _assert_real_sources(completed)]
    assert any(c.endswith("artículo 35") for c in citations), citations

    # The worker's evidence ledger recorded the call, redacted, with the sources exactly as shown.
    ledger_path = e2e_stack.stack.opts.ledger_path
    assert ledger_path is not None
    room_name = participant.session["room"]
    calls: list[dict[str, Any]] = []
    for _ in range(50):  # the ledger writes in the background; give it a moment
        if ledger_path.exists() and (calls := read_room(ledger_path, room_name)):
            break
        await asyncio.sleep(0.1)
    assert [(c["call_id"], c["outcome"]) for c in calls] == [(started.call_id, "completed")]
    assert "ana@example.com" not in calls[0]["query_redacted"] and "[correo]" in calls[0]["query_redacted"]
    assert [s["citation"] for s in calls[0]["sources"]] == citations
    assert [s["excerpt_sha256"] for s in calls[0]["sources"]] == [
        hashlib.sha256(s["excerpt"].encode()).hexdigest() for s in completed.body["sources"]
    ]
    # and no log line of any process carries the question in clear
    for log in e2e_stack.log_dir.glob("*.log"):
        assert "libertad de culto" not in log.read_text(errors="replace"), log.name


@pytest.mark.parametrize(
    "command",
    [["-m", "livekit.agents", "start", "agent/worker.py", "--dev"], ["-m", "agent", "dev"], ["-m", "agent", "start"]],
    ids=["livekit-cli", "agent-dev", "agent-start"],
)
def test_worker_runs_in_every_documented_form(e2e_stack: E2EStack, command: list[str], tmp_path: Path) -> None:
    """The worker registers with livekit-server however it is started (under another agent name, so it
    never takes the other tests' jobs)."""
    env = {
        **e2e_stack.stack.common_env(),
        "LEXVOZ_AGENT_NAME": "lexvoz-cli-check",
        "LEXVOZ_LEDGER_PATH": str(tmp_path / "ledger.sqlite3"),
    }
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *command], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 90
        while "registered worker" not in log.read_text(errors="replace"):
            assert proc.poll() is None, f"worker exited with {proc.returncode}:\n{log.read_text(errors='replace')}"
            assert time.monotonic() < deadline, f"worker did not register:\n{log.read_text(errors='replace')}"
            time.sleep(0.2)
        assert "lexvoz-cli-check" in log.read_text(errors="replace")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


SESSION_TOPIC = "lk.agent.session"  # livekit-agents' remote-session API over the room (`remote_session.py`)


async def test_the_room_can_neither_drive_nor_watch_the_agent_session(e2e_stack: E2EStack) -> None:
    """livekit-agents hosts a remote-session API on the room unless told not to: it streams every session event
    (chat items, raw tool output, state) to the room and answers requests from any participant, such as the
    agent's instructions and context (`get_agent_info`) or a turn run around the worker's own typed-input path
    (`run_input`). The page needs none of it, and evidence is meant to reach the room only as validated
    `lexvoz.research` messages, so a participant must get nothing on that topic, asked or not."""
    participant = Participant(await e2e_stack.new_session())
    streams: list[str] = []
    participant.room.register_byte_stream_handler(SESSION_TOPIC, lambda _reader, identity: streams.append(identity))
    try:
        await asyncio.wait_for(participant.connect(), 20)
        agent = await participant.wait_until_agent_listens()
        request = agent_pb.AgentSessionMessage(
            request=agent_pb.SessionRequest(request_id="probe", get_agent_info=agent_pb.SessionRequest.GetAgentInfo())
        )
        await participant.room.local_participant.send_bytes(
            request.SerializeToString(), name="probe", topic=SESSION_TOPIC, destination_identities=[agent.identity]
        )
        await participant.ask(typed=e2e_stack.question, within=ANSWER_TIMEOUT_S, exclude=set())
        await asyncio.sleep(2.0)  # an answer to the probe, or a last event, would have arrived by now
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(participant.aclose(), 10)
    assert streams == [], f"{len(streams)} session streams reached the room from {sorted(set(streams))}"

"""The citation check in the worker: sources delivered, the transcript observed unchanged, once per turn, the
correction asked once per turn, the metric's labels bounded and the ledger given no words."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from livekit.agents import ModelSettings
from livekit.agents.types import TimedString
from prometheus_client import REGISTRY

from agent.contract import Source
from agent.mcp.gateway import SearchResult
from agent.ops import metrics
from agent.ops.ledger import LedgerRecord, UnverifiedCitation
from agent.ops.ledger.reader import read_room_citations
from agent.voice.assistant import LexvozAgent
from agent.voice.evidence import EvidencePublisher
from agent.voice.observers import citation_ledger_observer, count_citation
from agent.voice.research import ResearchSession
from agent.voice.spoken import CORRECTION_NOTICE, CitationEvent, SentenceBuffer
from realtime_standin import RealtimeStandIn
from realtime_standin.policy import LegalResearchPolicy, Plan, PolicyContext, SpeakPlan
from tests import test_worker as worker_tests
from tests.fakes import RecordingParticipant
from tests.job_double import USER_IDENTITY, TextReader, chat_handler, messages, until
from tests.mcp_fixture import FakeMcpServer
from tests.test_worker import job_settings, running_job, ship_the_spool

# The worker-wiring fixtures, shared with tests/test_worker.py.
worker = worker_tests.worker
mcp = worker_tests.mcp

CONSTITUTION_74 = "Constitución Política de la República de Panamá, artículo 74"
LAW_12A = "Ley 6 de 2002, artículo 12-A"


class Searcher:
    """A search service that returns the given citations at once, or waits for a new turn (a stale search)."""

    def __init__(self, *citations: str) -> None:
        self.citations = citations
        self.hang = False

    async def search(self, arguments: Any) -> SearchResult:
        if self.hang:
            await asyncio.sleep(3600)
        sources = [Source(title="Fuente", citation=c, excerpt="Texto de la fuente.") for c in self.citations]
        return SearchResult(sources=sources, duration_ms=1.0)

    def query_as_sent(self, arguments: Any) -> str:
        return str(arguments.get("query", ""))


class FakeHandle:
    """A queued reply's speech handle: not played yet until `played`."""

    def __init__(self) -> None:
        self.played = False
        self.interrupted = False

    def done(self) -> bool:
        return self.played or self.interrupted

    def interrupt(self) -> None:
        self.interrupted = True


class FakeSession:
    """What the agent needs of the AgentSession to ask for a correction."""

    def __init__(self) -> None:
        self.replies: list[str] = []
        self.handles: list[FakeHandle] = []

    def generate_reply(self, *, instructions: str) -> Any:
        self.replies.append(instructions)
        self.handles.append(FakeHandle())
        return self.handles[-1]


class Agent(LexvozAgent):
    fake_session = FakeSession()

    @property
    def session(self) -> Any:  # the framework's session exists only inside a running AgentSession
        return self.fake_session


def make(*citations: str, observers: list[Any] | None = None) -> tuple[Agent, ResearchSession, RecordingParticipant]:
    room = RecordingParticipant()
    research = ResearchSession(Searcher(*citations), EvidencePublisher(room), citation_observers=observers)
    agent = Agent(research, greet=False)
    agent.fake_session = FakeSession()
    return agent, research, room


async def pieces(*texts: str) -> AsyncIterator[str]:
    for text in texts:
        yield text


async def speak(agent: LexvozAgent, *texts: str) -> list[str | TimedString]:
    out = [p async for p in agent.transcription_node(pieces(*texts), ModelSettings())]
    await agent.research.spoken.drain()
    return out


def checked(room: RecordingParticipant) -> list[dict[str, Any]]:
    return [m for m in room.messages if m["type"] == "citation_checked"]


async def test_only_sources_the_model_received_count_as_evidence() -> None:
    agent, research, room = make(CONSTITUTION_74)
    await research.run_tool("call_1", {"query": "vacaciones"})
    await speak(agent, "Según el artículo setenta y cuatro de la Constitución, sí. ")
    assert checked(room) == [
        {
            "v": 1,
            "type": "citation_checked",
            "turn": 0,
            "said": "artículo setenta y cuatro de la Constitución",
            "article": "74",
            "norm": "constitucion",
            "verified": True,
            "source": CONSTITUTION_74,
            "call_id": "call_1",
        }
    ]
    # a search the user left behind never reaches the model: its sources verify nothing
    stale, _, stale_room = make(LAW_12A)
    searcher = Searcher(LAW_12A)
    searcher.hang = True
    stale.research._searcher = searcher
    task = asyncio.create_task(stale.research.run_tool("call_2", {"query": "x"}))
    await asyncio.sleep(0.05)
    stale.on_new_user_turn()
    assert (await task).outcome == "discarded"
    await speak(stale, "El artículo 12-A de la Ley 6 de 2002 lo dice.")
    assert [m["verified"] for m in checked(stale_room)] == [False]


async def test_the_transcript_passes_unchanged_and_is_never_held_back() -> None:
    agent, _, _ = make(CONSTITUTION_74)
    timed = TimedString("cuatro ", start_time=0.5, end_time=0.9)
    sent: list[str | TimedString] = ["El artículo setenta y ", timed, "de la Constitución. ", "Nada más"]
    out = [p async for p in agent.transcription_node(pieces(*sent), ModelSettings())]
    assert out == sent and all(a is b for a, b in zip(out, sent, strict=True))  # the same objects, in order

    # the first piece is handed on before the model has produced the second one
    more = asyncio.Event()

    async def slow() -> AsyncIterator[str]:
        yield "Según el artículo 74"
        await more.wait()
        yield " de la Constitución."

    node = agent.transcription_node(slow(), ModelSettings())
    first = await asyncio.wait_for(node.__anext__(), 1)
    assert first == "Según el artículo 74"
    more.set()
    assert [p async for p in node] == [" de la Constitución."]


async def test_a_citation_split_across_pieces_is_checked_when_its_sentence_ends() -> None:
    agent, research, room = make(LAW_12A)
    research.citations.deliver("call_1", [LAW_12A])
    await speak(agent, "La ley seis de dos mil dos, en su artículo doce", " A, lo permite. Y el art. 3 no aplica")
    assert [(m["article"], m["norm"], m["verified"]) for m in checked(room)] == [
        ("12-A", "ley 6 de 2002", True),
        ("3", None, False),  # the remainder, checked when the message ended
    ]


def test_sentences_end_at_their_punctuation_not_at_an_abbreviation() -> None:
    buffer = SentenceBuffer()
    assert buffer.feed("Según el art. 74 de la Ley No. 6 de 2002, sí") == []
    assert buffer.feed(". ¿Algo más? Vea el inciso a. del artículo 3") == [
        "Según el art. 74 de la Ley No. 6 de 2002, sí.",
        "¿Algo más?",
    ]
    assert buffer.flush() == "Vea el inciso a. del artículo 3"


async def test_a_citation_is_checked_once_per_turn() -> None:
    agent, _, room = make(CONSTITUTION_74)
    await speak(agent, "El artículo 99 de la Constitución. ", "Repito: el artículo noventa y nueve de la Constitución.")
    assert len(checked(room)) == 1
    agent.on_new_user_turn()
    await speak(agent, "El artículo 99 de la Constitución.")
    assert [(m["turn"], m["article"]) for m in checked(room)] == [(0, "99"), (1, "99")]


async def test_the_model_is_corrected_once_per_turn_and_only_for_an_unverified_citation() -> None:
    agent, research, _ = make(CONSTITUTION_74)
    research.citations.deliver("call_1", [CONSTITUTION_74])
    await speak(agent, "Según el artículo 74 de la Constitución, sí.")
    assert agent.fake_session.replies == []  # everything said was in the evidence
    await speak(agent, "También el artículo 14 de la Ley 6 de 2002.")
    assert len(agent.fake_session.replies) == 1
    instructions = agent.fake_session.replies[0]
    assert instructions.startswith(CORRECTION_NOTICE) and "el artículo 14 de la Ley 6 de 2002" in instructions
    # the correction's own words (another unverified citation) never ask for a second correction
    await speak(agent, "Retiro esa cita. Quizá sea el artículo 15 de la Ley 6 de 2002.")
    assert len(agent.fake_session.replies) == 1
    agent.on_new_user_turn()
    await speak(agent, "El artículo 16 de la Ley 6 de 2002.")
    assert len(agent.fake_session.replies) == 2


async def test_an_interrupted_message_asks_for_no_correction() -> None:
    agent, _, room = make()
    node = agent.transcription_node(pieces("El artículo 99 de la Constitución. ", "Y más"), ModelSettings())
    await node.__anext__()
    await node.__anext__()  # the first sentence is checked once the next piece is asked for
    await node.aclose()  # the framework stops reading: the user took the turn
    await agent.research.spoken.drain()
    assert [m["verified"] for m in checked(room)] == [False]
    assert agent.fake_session.replies == []


async def test_a_correction_not_yet_spoken_is_dropped_when_the_user_takes_a_new_turn() -> None:
    agent, _, _ = make()
    await speak(agent, "El artículo 99 de la Constitución.")
    await speak(agent, "El artículo 98 de la Constitución.")  # same turn: still one correction
    [handle] = agent.fake_session.handles
    agent.on_new_user_turn()
    assert handle.interrupted
    await speak(agent, "El artículo 97 de la Constitución.")
    agent.fake_session.handles[-1].played = True
    agent.on_new_user_turn()  # a correction already spoken is left alone
    assert not agent.fake_session.handles[-1].interrupted


def _count(norm: str, verified: str) -> float:
    return REGISTRY.get_sample_value("voice_citations_total", {"norm": norm, "verified": verified}) or 0.0


@pytest.mark.parametrize(
    ("norm", "label"),
    [("constitucion", "constitucion"), ("ley 6 de 2002", "ley"), ("decreto 3 de 2010", "other"), (None, "none")],
)
def test_the_metric_counts_by_a_bounded_norm_label(norm: str | None, label: str) -> None:
    for verified in ("true", "false"):  # every label exists before the first citation
        assert REGISTRY.get_sample_value("voice_citations_total", {"norm": label, "verified": verified}) is not None
    before = _count(label, "false")
    count_citation(CitationEvent(turn=1, article="74", norm=norm, verified=False))
    assert _count(label, "false") == before + 1
    assert metrics.citation_norm_label(norm) in metrics.CITATION_NORMS


async def test_the_ledger_keeps_an_unverified_citation_without_the_words_said() -> None:
    class Ledger:
        def __init__(self) -> None:
            self.records: list[LedgerRecord] = []

        async def start(self) -> None: ...

        def record(self, entry: LedgerRecord) -> None:
            self.records.append(entry)

        async def close(self, timeout: float = 5.0) -> None: ...  # noqa: ASYNC109

    ledger = Ledger()
    observer = citation_ledger_observer(ledger, room="sala-1", session_id="job-1")
    agent, research, _ = make(CONSTITUTION_74, observers=[observer])
    research.citations.deliver("call_1", [CONSTITUTION_74])
    agent.on_new_user_turn()
    await speak(
        agent, "Mi vecino Juan Pérez leyó el artículo 74 de la Constitución y el artículo 80 de la Ley 6 de 2002."
    )
    assert len(ledger.records) == 1  # the verified one is not an audit finding
    record = ledger.records[0]
    assert isinstance(record, UnverifiedCitation)
    assert (record.room, record.session_id, record.turn, record.article, record.norm) == (
        "sala-1",
        "job-1",
        1,
        "80",
        "ley 6 de 2002",
    )
    assert "Juan" not in repr(record) and "vecino" not in repr(record)


class CitesOutsideItsSources(LegalResearchPolicy):
    """The stand-in's rehearsal script, except that it answers a search with an article no source held."""

    def decide(self, ctx: PolicyContext) -> Plan:
        plan = super().decide(ctx)
        items = [i for i in ctx.items if i.get("type") in ("function_call_output", "message")]
        if items and items[-1].get("type") == "function_call_output":
            return SpeakPlan("Según el artículo 999 de la Constitución, sí se puede.")
        return plan


async def test_the_worker_keeps_an_unverified_citation_in_the_ledger_and_corrects_the_model(
    worker: Any, http: aiohttp.ClientSession, mcp: FakeMcpServer, tmp_path: Path
) -> None:
    async with RealtimeStandIn(speed=50.0, ms_per_char=5, policy=CitesOutsideItsSources()) as standin:
        settings = job_settings(standin.base_url, mcp.url, tmp_path)
        async with running_job(worker, settings, http) as (conversation, _job):
            room = conversation.room
            chat_handler(room)(TextReader("pregunta escrita"), USER_IDENTITY)
            await until(room, lambda: any(m["type"] == "citation_checked" for m in messages(room)))
            correction = await standin.wait_for_client_event(
                "response.create", lambda e: CORRECTION_NOTICE in str(e["response"].get("instructions")), timeout=10
            )
            assert "el artículo 999 de la Constitución" in correction["response"]["instructions"]
            room_name = room.name
    assert [m for m in messages(room) if m["type"] == "citation_checked"] == [
        {
            "v": 1,
            "type": "citation_checked",
            "turn": 1,
            "said": "artículo 999 de la Constitución",
            "article": "999",
            "norm": "constitucion",
            "verified": False,
            "source": None,
            "call_id": None,
        }
    ]
    assert await ship_the_spool(settings) >= 1  # the job spooled; the worker process writes it to the store
    assert [(c["turn"], c["article"], c["norm"]) for c in read_room_citations(settings.ledger_path, room_name)] == [
        (1, "999", "constitucion")
    ]

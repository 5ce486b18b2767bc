"""Metrics, traces and the ledger, observed through a scripted research session on the real gateway."""

from __future__ import annotations

import asyncio
import hashlib
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from agent.mcp.gateway import GatewayOptions, McpGateway
from agent.ops import metrics
from agent.ops.ledger import EvidenceLedger
from agent.ops.ledger.cli import ledger_main
from agent.ops.ledger.reader import read_room
from agent.ops.telemetry import setup_tracing
from agent.voice.evidence import EvidencePublisher
from agent.voice.observers import count_tool_call, ledger_observer
from agent.voice.research import ResearchSession, ToolFailure
from tests.fakes import RecordingParticipant
from tests.mcp_fixture import FakeMcpServer, synthetic_source

SECRET_QUERY = "mi cédula es 8-123-4567 y me botaron"


@pytest.fixture
def mcp(server: FakeMcpServer) -> FakeMcpServer:
    return server


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def scripted_session(mcp: FakeMcpServer, session: ResearchSession) -> None:
    """One completed, one duplicate, one failed (isError), one discarded search."""
    await session.run_tool("c1", {"query": SECRET_QUERY})
    await session.run_tool("c1", {"query": SECRET_QUERY})
    mcp.behaviour.is_error = True
    with pytest.raises(ToolFailure):
        await session.run_tool("c2", {"query": "segunda"})
    mcp.behaviour.is_error = False
    mcp.behaviour.delay_s = 3
    third = mcp.next_call()
    task = asyncio.create_task(session.run_tool("c3", {"query": "tercera"}))
    await asyncio.wait_for(third.started.wait(), 5)  # running on the server: the new turn must discard it
    session.new_user_turn()
    await task


async def test_metrics_endpoint_counts_a_scripted_session(mcp: FakeMcpServer) -> None:
    port = metrics.start_metrics_server(0)
    metrics.mcp_circuit_breaker_state.set(0)  # the gauge is the process's: an earlier test's gateway may have left it
    before = scrape(port)
    gw = McpGateway(GatewayOptions(url=mcp.url, call_timeout_s=5, retry_delay_s=0.01))
    session = ResearchSession(gw, EvidencePublisher(RecordingParticipant()), observers=[count_tool_call])
    try:
        await scripted_session(mcp, session)
    finally:
        await gw.aclose()
    after = scrape(port)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    tool = "search_panama_law"
    assert delta("voice_mcp_tool_calls_total", tool=tool, outcome="completed") == 1
    assert delta("voice_mcp_tool_calls_total", tool=tool, outcome="duplicate") == 1
    assert delta("voice_mcp_tool_calls_total", tool=tool, outcome="failed") == 1
    assert delta("voice_mcp_tool_calls_total", tool=tool, outcome="discarded") == 1
    assert delta("voice_mcp_requests_total") == 3  # the duplicate never reached the server
    assert delta("voice_mcp_request_errors_total", kind="tool_error") == 1
    assert delta("voice_mcp_latency_ms_count") == 2  # completed + failed; the cancelled one has no round trip
    assert after[("voice_mcp_circuit_breaker_state", ())] == 0  # one failed call does not open the breaker


async def test_breaker_gauge_follows_the_breaker(mcp: FakeMcpServer) -> None:
    gw = McpGateway(GatewayOptions(url=mcp.url, call_timeout_s=5, retry_delay_s=0.0))
    mcp.behaviour.is_error = True
    try:
        for _ in range(3):
            with pytest.raises(Exception):  # noqa: B017 - any failure counts
                await gw.search({"query": "x"})
        port = metrics.start_metrics_server(0)
        assert scrape(port)[("voice_mcp_circuit_breaker_state", ())] == 1
    finally:
        await gw.aclose()
        metrics.mcp_circuit_breaker_state.set(0)


async def test_spans_carry_no_query_text_and_no_credentials(mcp: FakeMcpServer) -> None:
    exporter = InMemorySpanExporter()

    class _S:
        otlp_endpoint = None

    provider = setup_tracing(_S(), span_processors=[SimpleSpanProcessor(exporter)])
    assert provider is not None
    mcp.behaviour.token = "tok-en"
    gw = McpGateway(GatewayOptions(url=mcp.url, token="tok-en", call_timeout_s=5))
    session = ResearchSession(gw, EvidencePublisher(RecordingParticipant()))
    try:
        await session.run_tool("t1", {"query": SECRET_QUERY})
    finally:
        await gw.aclose()
        provider.force_flush()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"voice.mcp.connect", "voice.mcp.tool_call"} <= spans.keys()
    connect = spans["voice.mcp.connect"]
    assert connect.attributes["voice.mcp.tool_count"] == 1
    assert connect.attributes["voice.mcp.endpoint"] == mcp.url
    call = spans["voice.mcp.tool_call"]
    assert call.attributes["voice.mcp.outcome"] == "completed"
    assert call.attributes["voice.mcp.tool"] == "search_panama_law"
    everything = repr([(s.name, dict(s.attributes or {}), [e.attributes for e in s.events]) for s in spans.values()])
    assert "8-123-4567" not in everything and "botaron" not in everything and "tok-en" not in everything


async def test_ledger_reconstructs_what_was_researched_and_shown(
    mcp: FakeMcpServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp.behaviour.results = [synthetic_source(1), synthetic_source(2)]
    path = tmp_path / "ledger.sqlite3"
    ledger = EvidenceLedger(path)
    await ledger.start()
    gw = McpGateway(GatewayOptions(url=mcp.url, call_timeout_s=5, retry_delay_s=0.01))
    session = ResearchSession(
        gw,
        EvidencePublisher(RecordingParticipant()),
        observers=[ledger_observer(ledger, room="sala-1", session_id="job-1")],
    )
    try:
        await scripted_session(mcp, session)
    finally:
        await gw.aclose()
        await ledger.close()
    calls = read_room(path, "sala-1")
    assert [(c["call_id"], c["outcome"]) for c in calls] == [
        ("c1", "completed"),
        ("c1", "duplicate"),
        ("c2", "failed"),
        ("c3", "discarded"),
    ]
    first = calls[0]
    assert "8-123-4567" not in first["query_redacted"] and "[cédula]" in first["query_redacted"]
    assert [s["citation"] for s in first["sources"]] == [
        synthetic_source(1)["citation"],
        synthetic_source(2)["citation"],
    ]
    shown = synthetic_source(1)["excerpt"].encode()
    assert first["sources"][0]["excerpt_sha256"] == hashlib.sha256(shown).hexdigest()
    assert calls[2]["reason"] == "tool_error"

    assert ledger_main(["show", "--room", "sala-1", "--path", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Ley Sintética de Prueba, artículo 1" in text and "8-123-4567" not in text

"""Reconstruction: a completed call keeps what the user read and which server (and index) answered.

Driven through the real gateway and research session against a real MCP SDK server, so the server's
name and version come from the actual handshake.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import types

from agent.contract import Source
from agent.mcp.gateway import GatewayOptions, McpGateway
from agent.ops.ledger import EvidenceLedger, LedgerEntry
from agent.ops.ledger.cli import ledger_main
from agent.ops.ledger.reader import read_room
from agent.voice.evidence import EvidencePublisher
from agent.voice.observers import ledger_observer
from agent.voice.research import ResearchSession, ToolEvent
from tests.fakes import RecordingParticipant
from tests.mcp_fixture import FakeMcpServer, synthetic_source


async def test_a_completed_call_keeps_the_sources_as_shown_and_the_server(
    server: FakeMcpServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.behaviour.results = [synthetic_source(1), synthetic_source(2)]
    path = tmp_path / "ledger.sqlite3"
    ledger = EvidenceLedger(path)
    await ledger.start()
    gw = McpGateway(GatewayOptions(url=server.url, call_timeout_s=5, retry_delay_s=0.01))
    assert gw.server_info is None  # nothing known before the handshake
    session = ResearchSession(
        gw,
        EvidencePublisher(RecordingParticipant()),
        observers=[ledger_observer(ledger, room="sala-1", session_id="job-1", server=lambda: gw.server_info)],
    )
    try:
        await session.run_tool("c1", {"query": "¿qué dice el artículo 1?"})
        info = gw.server_info
    finally:
        await gw.aclose()
        await ledger.close()
    assert info is not None and info.name == "lexvoz-test-search"
    (call,) = read_room(path, "sala-1")
    assert (call["server_name"], call["server_version"], call["index_version"]) == (info.name, info.version, None)
    assert call["outcome"] == "completed" and call["duration_ms"] > 0
    shown = [Source.model_validate(s) for s in (synthetic_source(1), synthetic_source(2))]
    assert [(s["title"], s["citation"], s["excerpt"]) for s in call["sources"]] == [
        (s.title, s.citation, s.excerpt) for s in shown
    ]
    assert ledger_main(["show", "--room", "sala-1", "--path", str(path)]) == 0
    text = capsys.readouterr().out
    assert f"«{shown[0].excerpt}»" in text and f"server {info.name}" in text


class _Recorder:
    def __init__(self) -> None:
        self.entries: list[LedgerEntry] = []

    async def start(self) -> None: ...

    def record(self, entry: LedgerEntry) -> None:
        self.entries.append(entry)

    async def close(self, timeout: float = 5.0) -> None: ...  # noqa: ASYNC109


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (types.Implementation(name="panama-law", version="0.1.0"), ("panama-law", "0.1.0", "0.1.0")),
        (types.Implementation(name="lexlatam", version="2.4"), ("lexlatam", "2.4", None)),
        (None, (None, None, None)),
    ],
)
def test_the_index_version_is_recorded_only_for_the_embedded_server(
    info: types.Implementation | None, expected: tuple[str | None, ...]
) -> None:
    recorder = _Recorder()
    observe = ledger_observer(recorder, room="r", session_id="s", server=lambda: info)
    observe(ToolEvent("c1", 1, "consulta", "failed", 3.0, reason="timeout"))
    (e,) = recorder.entries
    assert (e.server_name, e.server_version, e.index_version) == expected
    assert (e.outcome, e.reason, e.duration_ms) == ("failed", "timeout", 3.0)

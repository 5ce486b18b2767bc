"""Shared pieces for the ledger tests: entries with the shapes a conversation produces."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from agent.ops.ledger import EvidenceLedger, LedgerEntry, LedgerSource

QUERY = "Mi cédula es 8-123-4567, ¿qué dice el artículo 72 de la Constitución?"
EXCERPT = "Artículo 72. Se protege la maternidad de la mujer trabajadora…"


def entry(room: str = "sala-1", turn: int = 1, **kw: object) -> LedgerEntry:
    base: dict[str, object] = {
        "room": room,
        "session_id": "sess-1",
        "turn": turn,
        "call_id": f"call-{turn}",
        "tool": "search_panama_law",
        "query": QUERY,
        "outcome": "completed",
        "duration_ms": 12.5,
        "sources": (LedgerSource("Constitución Política, art. 72", None, EXCERPT, "Constitución"),),
        "server_name": "panama-law",
        "server_version": "0.1.0",
        "index_version": "0.1.0",
        "ts": datetime(2025, 3, 3, 10, 0, turn % 60, tzinfo=UTC),
    }
    base.update(kw)
    return LedgerEntry(**base)  # type: ignore[arg-type]


async def write(location: str | Path, *entries: LedgerEntry, flush_s: float = 10) -> EvidenceLedger:
    ledger = EvidenceLedger(location)
    await ledger.start()
    for e in entries:
        ledger.record(e)
    await ledger.close(timeout=flush_s)
    return ledger

"""Observers of research events: the metrics counters and the evidence ledger.

They hang off `ResearchSession` so the tool body stays free of bookkeeping; each one must be cheap
and must never raise into the conversation (the session also guards against that).
"""

from __future__ import annotations

from collections.abc import Callable

from agent.contract import TOOL_NAME
from agent.ops import metrics
from agent.ops.ledger import EvidenceLedger, LedgerEntry, sources_from
from agent.voice.research import ToolEvent


def count_tool_call(event: ToolEvent) -> None:
    metrics.mcp_tool_calls_total.labels(tool=TOOL_NAME, outcome=event.outcome).inc()


def ledger_observer(ledger: EvidenceLedger, *, room: str, session_id: str) -> Callable[[ToolEvent], None]:
    """Records every invocation; the ledger itself redacts and hashes the query and excerpts."""

    def _record(event: ToolEvent) -> None:
        ledger.record(
            LedgerEntry(
                room=room,
                session_id=session_id,
                turn=event.turn,
                call_id=event.call_id,
                tool=TOOL_NAME,
                query=event.query,
                outcome=event.outcome,
                duration_ms=round(event.duration_ms, 3),
                reason=event.reason,
                sources=sources_from(event.sources),
            )
        )

    return _record

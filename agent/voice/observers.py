"""Observers of research events: the metrics counters and the evidence ledger.

They hang off `ResearchSession` so the tool body stays free of bookkeeping; each one must be cheap
and must never raise into the conversation (the session also guards against that).
"""

from __future__ import annotations

from collections.abc import Callable

from mcp import types

from agent.contract import TOOL_NAME
from agent.ops import metrics
from agent.ops.ledger import Ledger, LedgerEntry, UnverifiedCitation, sources_from
from agent.voice.research import ToolEvent
from agent.voice.spoken import CitationEvent

# The name the embedded search server (panama_law/) gives itself in its MCP handshake. Its serverInfo
# version is the version of the program that built and serves the index, so it is recorded as the index's
# version; any other server's index is not ours to name, and stays null.
EMBEDDED_SERVER_NAME = "panama-law"

ServerInfo = Callable[[], types.Implementation | None]


def count_tool_call(event: ToolEvent) -> None:
    metrics.mcp_tool_calls_total.labels(tool=TOOL_NAME, outcome=event.outcome).inc()


def count_citation(event: CitationEvent) -> None:
    label = metrics.citation_norm_label(event.norm)
    metrics.citations_total.labels(norm=label, verified="true" if event.verified else "false").inc()


def ledger_observer(
    ledger: Ledger, *, room: str, session_id: str, server: ServerInfo | None = None
) -> Callable[[ToolEvent], None]:
    """Records every invocation with the server that answered (`server()`: its handshake, if any).

    The ledger itself redacts and hashes the query and excerpts.
    """

    def _record(event: ToolEvent) -> None:
        info = server() if server is not None else None
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
                server_name=info.name if info is not None else None,
                server_version=info.version if info is not None else None,
                index_version=info.version if info is not None and info.name == EMBEDDED_SERVER_NAME else None,
            )
        )

    return _record


def citation_ledger_observer(ledger: Ledger, *, room: str, session_id: str) -> Callable[[CitationEvent], None]:
    """Keeps each citation the agent spoke that no delivered source held: article, norm key and turn only."""

    def _record(event: CitationEvent) -> None:
        if event.verified:
            return
        ledger.record(
            UnverifiedCitation(
                room=room, session_id=session_id, turn=event.turn, article=event.article, norm=event.norm
            )
        )

    return _record

"""The only deletions the ledger allows: the retention purge and forgetting one room.

Why a controlled path: the ledger is append-only so that nobody can quietly rewrite what a user was
shown, yet retention (`LEXVOZ_LEDGER_RETENTION_DAYS`) and a person's request to be forgotten require
erasing. Each erasure opens the stores' gate (a row in `ledger_erasure_gate`, seen only by its own
transaction), deletes, closes the gate and appends a `ledger_events` row saying what it removed, all in
one transaction: either the evidence is gone and the erasure is recorded, or nothing changed.

Afterwards the freed space is cleaned so the text is not left behind: SQLite overwrites deleted content
(`secure_delete`) and its WAL is checkpointed and truncated; PostgreSQL tables are vacuumed when the
role may do so (otherwise PostgreSQL's autovacuum reclaims them later).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import ColumnElement, Table, delete, insert, select

from agent.ops.ledger.entry import format_ts
from agent.ops.ledger.schema import erasure_gate, ledger_events, sources, tool_calls, unverified_citations
from agent.ops.ledger.store import LedgerStore

__all__ = ["Erasure", "forget_room", "purge_older_than"]

logger = logging.getLogger("lexvoz.ledger")


@dataclass(frozen=True, slots=True)
class Erasure:
    """What one purge or forget removed; also what its `ledger_events` row says."""

    kind: Literal["purge", "forget"]
    ts: str
    room: str | None
    cutoff: str | None
    calls_removed: int
    sources_removed: int
    citations_removed: int = 0


def purge_older_than(store: LedgerStore, days: int, *, now: datetime | None = None) -> Erasure:
    """Erase every tool call and unverified citation recorded more than `days` days before `now`."""
    if days < 1:
        raise ValueError("the retention must be at least one day")
    cutoff = format_ts((now or datetime.now(UTC)) - timedelta(days=days))
    return _erase(store, "purge", lambda t: t.c.ts < cutoff, room=None, cutoff=cutoff)


def forget_room(store: LedgerStore, room: str) -> Erasure:
    """Erase every tool call of `room` with its sources, and its unverified citations; the erasure is recorded."""
    if not room:
        raise ValueError("a room name is required")
    return _erase(store, "forget", lambda t: t.c.room == room, room=room, cutoff=None)


def _erase(
    store: LedgerStore,
    kind: Literal["purge", "forget"],
    which: Callable[[Table], ColumnElement[bool]],
    *,
    room: str | None,
    cutoff: str | None,
) -> Erasure:
    token = uuid.uuid4().hex
    ts = format_ts(datetime.now(UTC))
    with store.engine.begin() as conn:
        conn.execute(insert(erasure_gate).values(token=token))
        calls = select(tool_calls.c.id).where(which(tool_calls))
        sources_removed = conn.execute(delete(sources).where(sources.c.call_row.in_(calls))).rowcount
        calls_removed = conn.execute(delete(tool_calls).where(which(tool_calls))).rowcount
        cited = conn.execute(delete(unverified_citations).where(which(unverified_citations))).rowcount
        conn.execute(delete(erasure_gate).where(erasure_gate.c.token == token))
        erasure = Erasure(kind, ts, room, cutoff, int(calls_removed), int(sources_removed), int(cited))
        conn.execute(
            insert(ledger_events).values(
                ts=ts,
                kind=kind,
                room=room,
                cutoff=cutoff,
                calls_removed=erasure.calls_removed,
                sources_removed=erasure.sources_removed,
                citations_removed=erasure.citations_removed,
            )
        )
    _reclaim(store)
    logger.info(
        "ledger %s removed %d tool calls, %d sources and %d unverified citations",
        kind,
        erasure.calls_removed,
        erasure.sources_removed,
        erasure.citations_removed,
    )
    return erasure


def _reclaim(store: LedgerStore) -> None:
    """Leave no copy of the erased text in the store's free space or log."""
    try:
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if store.is_sqlite:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            else:
                conn.exec_driver_sql("VACUUM tool_calls, sources, unverified_citations")
    except Exception as exc:  # the erasure is committed; cleaning up is best effort
        logger.warning("ledger space not reclaimed after erasure", extra={"error": type(exc).__name__})

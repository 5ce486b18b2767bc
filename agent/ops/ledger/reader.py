"""Reading the ledger back: one room's calls as its user saw them (and the citations it heard that no source
held), or every call, or every unverified citation, in a time range.

Why read-only: an auditor's look must not change what is audited, so a SQLite file is opened with
`mode=ro` and a PostgreSQL session as read-only, and neither is migrated by a reader (a store on an
older schema is named as such). Rows come back as plain dicts, ready for the CLI's escaping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, Table, select

from agent.ops.ledger.entry import format_ts
from agent.ops.ledger.schema import ledger_events, sources, tool_calls, unverified_citations
from agent.ops.ledger.store import LedgerStore

__all__ = ["read_citations_range", "read_range", "read_room", "read_room_citations", "room_erasures"]

_CALL_COLUMNS = (
    tool_calls.c.id,
    tool_calls.c.ts,
    tool_calls.c.room,
    tool_calls.c.session_id,
    tool_calls.c.turn,
    tool_calls.c.call_id,
    tool_calls.c.tool,
    tool_calls.c.query_redacted,
    tool_calls.c.query_digest,
    tool_calls.c.outcome,
    tool_calls.c.duration_ms,
    tool_calls.c.reason,
    tool_calls.c.server_name,
    tool_calls.c.server_version,
    tool_calls.c.index_version,
)
_SOURCE_COLUMNS = (
    sources.c.position,
    sources.c.title,
    sources.c.citation,
    sources.c.official_source_url,
    sources.c.excerpt,
    sources.c.excerpt_sha256,
)
_PAGE = 500


def _with_sources(conn: Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Attach each call's sources (in the order shown); drops the internal row id."""
    ids = [r["id"] for r in rows]
    by_call: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
    if ids:
        query = (
            select(sources.c.call_row, *_SOURCE_COLUMNS)
            .where(sources.c.call_row.in_(ids))
            .order_by(sources.c.call_row, sources.c.position)
        )
        for s in conn.execute(query).mappings():
            item = dict(s)
            by_call[item.pop("call_row")].append(item)
    for r in rows:
        r["sources"] = by_call[r.pop("id")]
    return rows


def _calls(conn: Connection, query: Select[Any]) -> list[dict[str, Any]]:
    return _with_sources(conn, [dict(r) for r in conn.execute(query).mappings()])


def read_room(location: str | Path, room: str) -> list[dict[str, Any]]:
    """Every tool call of `room` in the order it was recorded, each with its sources."""
    with LedgerStore.open(location, readonly=True) as store:
        if store.empty:
            return []
        with store.engine.connect() as conn:
            return _calls(conn, select(*_CALL_COLUMNS).where(tool_calls.c.room == room).order_by(tool_calls.c.id))


def read_room_citations(location: str | Path, room: str) -> list[dict[str, Any]]:
    """The articles the agent named in `room` that no delivered source held, in the order they were said."""
    with LedgerStore.open(location, readonly=True) as store:
        if store.empty:
            return []
        with store.engine.connect() as conn:
            c = unverified_citations.c
            query = select(c.ts, c.session_id, c.turn, c.article, c.norm).where(c.room == room).order_by(c.id)
            return [dict(r) for r in conn.execute(query).mappings()]


def room_erasures(location: str | Path, room: str) -> list[dict[str, Any]]:
    """The `forget` events for `room`: why a room may show no calls."""
    with LedgerStore.open(location, readonly=True) as store:
        if store.empty:
            return []
        with store.engine.connect() as conn:
            query = (
                select(
                    ledger_events.c.ts,
                    ledger_events.c.kind,
                    ledger_events.c.calls_removed,
                    ledger_events.c.citations_removed,
                )
                .where(ledger_events.c.kind == "forget", ledger_events.c.room == room)
                .order_by(ledger_events.c.id)
            )
            return [dict(r) for r in conn.execute(query).mappings()]


def _pages(
    location: str | Path,
    table: Table,
    columns: Sequence[ColumnElement[Any]],
    since: datetime,
    until: datetime,
    finish: Callable[[Connection, list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
) -> Iterator[dict[str, Any]]:
    """`table`'s rows with `since <= ts < until`, oldest first, read `_PAGE` at a time after the last (ts, id)
    seen, so memory stays flat; `finish` completes a page on the same connection (a call's sources)."""
    low, high = format_ts(since), format_ts(until)
    ts_col, id_col = table.c.ts, table.c.id
    with LedgerStore.open(location, readonly=True) as store:
        if store.empty:
            return
        after: tuple[str, int] | None = None
        while True:
            with store.engine.connect() as conn:
                query = select(*columns).where(ts_col >= low, ts_col < high)
                if after is not None:
                    ts, row_id = after
                    query = query.where((ts_col > ts) | ((ts_col == ts) & (id_col > row_id)))
                rows = [dict(r) for r in conn.execute(query.order_by(ts_col, id_col).limit(_PAGE)).mappings()]
                if not rows:
                    return
                after = (rows[-1]["ts"], rows[-1]["id"])
                page = finish(conn, rows) if finish is not None else rows
            yield from page
            if len(page) < _PAGE:
                return


def read_range(location: str | Path, since: datetime, until: datetime) -> Iterator[dict[str, Any]]:
    """Every tool call with `since <= ts < until`, oldest first, with its sources, read in pages."""
    return _pages(location, tool_calls, _CALL_COLUMNS, since, until, _with_sources)


def read_citations_range(location: str | Path, since: datetime, until: datetime) -> Iterator[dict[str, Any]]:
    """Every unverified citation with `since <= ts < until`, oldest first, in pages: what an audit of a period
    needs beside its calls (which article of which norm the agent named with no source holding it, where, when)."""
    c = unverified_citations.c
    return _pages(
        location, unverified_citations, (c.id, c.ts, c.room, c.session_id, c.turn, c.article, c.norm), since, until
    )

"""What one ledger entry holds, and how its user text is made safe to keep.

Why here, apart from the storage: the rules for what may be kept about a conversation (the question cut
to the tool's limit, redacted, with a keyed digest; each excerpt redacted as shown plus a sha256 of the
exact text) must be the same whatever store the entry lands in, and a caller must not be able to forget
them, so entries carry the ORIGINAL text and only this module turns it into what is stored.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agent.contract import MAX_QUERY_CHARS, OUTCOMES, FailureReason, Outcome
from agent.ops.digest import query_digest
from agent.ops.redact import redact

__all__ = [
    "LedgerEntry",
    "LedgerRecord",
    "LedgerSource",
    "StoredRow",
    "UnverifiedCitation",
    "excerpt_sha256",
    "format_ts",
    "sources_from",
    "stored_excerpt",
    "stored_query",
    "stored_row",
]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def format_ts(ts: datetime) -> str:
    """The one text form of a time in the ledger: UTC, milliseconds, `Z` (sorts as it reads)."""
    if ts.tzinfo is None:
        raise ValueError("ledger times must be timezone-aware")
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class LedgerSource:
    """One source exactly as the room was shown it (original text: the ledger redacts the excerpt)."""

    citation: str
    official_source_url: str | None
    excerpt: str
    title: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """One tool invocation. `query` and each excerpt are the ORIGINAL text: the ledger redacts
    and hashes them itself, so a caller cannot forget to.

    `server_name`/`server_version` are what the MCP server said in its handshake; `index_version` is
    the embedded search index's version when the server is ours and says it, otherwise None.
    """

    room: str
    session_id: str
    turn: int
    call_id: str
    tool: str
    query: str
    outcome: Outcome
    duration_ms: float
    reason: FailureReason | None = None
    sources: tuple[LedgerSource, ...] = ()
    server_name: str | None = None
    server_version: str | None = None
    index_version: str | None = None
    ts: datetime = field(default_factory=_utcnow)
    entry_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown ledger outcome {self.outcome!r}")
        if self.ts.tzinfo is None:
            raise ValueError("ledger entry time must be timezone-aware")


# What an unverified citation may hold: an article as sources write it ("74", "12-A") and a norm's key
# ("constitucion", "ley 6 de 2002"). Anything else (a sentence, a name) is refused, so the spoken words can
# never reach the ledger through these fields.
_ARTICLE = re.compile(r"[0-9]{1,4}(?:-[A-Z])?")
_NORM_KEY = re.compile(r"[a-z0-9]+(?: [a-z0-9]+){0,7}")


@dataclass(frozen=True, slots=True, kw_only=True)
class UnverifiedCitation:
    """An article the agent named while speaking that no source delivered to it in the conversation held.

    Kept so an audit shows what the user heard that the evidence did not support: which article of which norm,
    in which turn, and when. Never the words said around it: only the article and the norm's key.
    """

    room: str
    session_id: str
    turn: int
    article: str
    norm: str | None
    ts: datetime = field(default_factory=_utcnow)
    entry_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        if not _ARTICLE.fullmatch(self.article):
            raise ValueError("an unverified citation's article must be a number with an optional letter")
        if self.norm is not None and (len(self.norm) > 80 or not _NORM_KEY.fullmatch(self.norm)):
            raise ValueError("an unverified citation's norm must be a norm key")
        if self.ts.tzinfo is None:
            raise ValueError("ledger entry time must be timezone-aware")


LedgerRecord = LedgerEntry | UnverifiedCitation
"""Anything a conversation hands the ledger."""


def sources_from(sources: Iterable[Any]) -> tuple[LedgerSource, ...]:
    """Ledger sources from `agent.contract.Source` objects (anything with title/citation/url/excerpt)."""
    return tuple(
        LedgerSource(
            citation=s.citation,
            official_source_url=s.official_source_url,
            excerpt=s.excerpt,
            title=getattr(s, "title", None),
        )
        for s in sources
    )


def stored_query(query: str) -> tuple[str, str]:
    """(redacted text, digest) of the query as the ledger keeps it: cut to the tool's limit first.

    Cutting first bounds the redaction work and the row size whatever a caller sent; the digest covers the
    same cut text, so it still joins the row to the log lines and spans about that question.
    """
    cut = query[:MAX_QUERY_CHARS]
    return redact(cut), query_digest(cut)


def stored_excerpt(excerpt: str) -> str:
    """The excerpt as kept for reconstruction: the shown text with personal identifiers masked.

    Legal texts rarely carry any, but a hosted search service may return case law that names people; the
    sha256 beside it still proves which exact text was shown.
    """
    return redact(excerpt)


def excerpt_sha256(excerpt: str) -> str:
    """sha256 of the excerpt's UTF-8 bytes, unnormalized: it must match what the caller saw."""
    return hashlib.sha256(excerpt.encode("utf-8")).hexdigest()


StoredRow = dict[str, Any]
"""One entry as the store keeps it (question redacted with its digest, excerpts redacted with their sha256):
`{"kind": "call" | "citation", "values": {column: value}, "sources": [{column: value}]}`, JSON-safe."""


def stored_row(e: LedgerRecord) -> StoredRow:
    """The entry as the store keeps it: the one place where an entry's text is turned into what may be kept."""
    if isinstance(e, UnverifiedCitation):
        values = {
            "entry_id": e.entry_id,
            "ts": format_ts(e.ts),
            "room": e.room,
            "session_id": e.session_id,
            "turn": e.turn,
            "article": e.article,
            "norm": e.norm,
        }
        return {"kind": "citation", "values": values, "sources": []}
    query_redacted, digest = stored_query(e.query)
    values = {
        "entry_id": e.entry_id,
        "ts": format_ts(e.ts),
        "room": e.room,
        "session_id": e.session_id,
        "turn": e.turn,
        "call_id": e.call_id,
        "tool": e.tool,
        "query_redacted": query_redacted,
        "query_digest": digest,
        "outcome": e.outcome,
        "duration_ms": float(e.duration_ms),
        "reason": e.reason,
        "server_name": e.server_name,
        "server_version": e.server_version,
        "index_version": e.index_version,
    }
    sources = [
        {
            "position": i,
            "citation": s.citation,
            "official_source_url": s.official_source_url,
            "excerpt_sha256": excerpt_sha256(s.excerpt),
            "title": s.title,
            "excerpt": stored_excerpt(s.excerpt),
        }
        for i, s in enumerate(e.sources, start=1)
    ]
    return {"kind": "call", "values": values, "sources": sources}

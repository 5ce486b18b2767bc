"""Split articles into passages: sentences and numbered items, merged into short windows.

Articles run paragraphs and numbered items together on one line; a long article about many things would otherwise
match every query weakly. Scoring passages and keeping each article's best one both sharpens retrieval and gives the
excerpt: the passage that matched, not the article's first 750 characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Sentence ends, or the start of a numbered item ("1.", "2)") or lettered item ("a.", "b)") after a colon/semicolon.
_BOUNDARY = re.compile(r"(?<=[.;:])\s+(?=(?:\d{1,2}[.)]\s|[a-z][.)]\s|[A-ZÁÉÍÓÚÑ¿«\"]))")
TARGET_CHARS = 320
MAX_CHARS = 600


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int


def sentences(text: str) -> list[Span]:
    """Character spans of the sentences / items of `text`, covering it without gaps."""
    spans: list[Span] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        if match.start() > start:
            spans.append(Span(start, match.start()))
        start = match.end()
    if start < len(text):
        spans.append(Span(start, len(text)))
    return _split_long(text, _attach_markers(text, spans))


_MARKER_ONLY = re.compile(r"(?:\d{1,2}|[a-z])[.)]")


def _attach_markers(text: str, spans: list[Span]) -> list[Span]:
    """Join a bare item number ("3.") to the item it numbers: "1. Sancionar las Leyes." splits after "1." (a
    sentence end before a capital), which would leave each number at the tail of the previous passage."""
    out: list[Span] = []
    pending: int | None = None
    for span in spans:
        if _MARKER_ONLY.fullmatch(text[span.start : span.end].strip()):
            pending = span.start if pending is None else pending
            continue
        out.append(Span(pending, span.end) if pending is not None else span)
        pending = None
    if pending is not None:
        out.append(Span(pending, len(text)))
    return out


def _split_long(text: str, spans: list[Span]) -> list[Span]:
    """Cut any span longer than MAX_CHARS at commas or spaces so a passage stays focused."""
    out: list[Span] = []
    for span in spans:
        start = span.start
        while span.end - start > MAX_CHARS:
            window = text[start : start + MAX_CHARS]
            cut = max(window.rfind(", "), window.rfind("; "))
            if cut < MAX_CHARS // 3:
                cut = window.rfind(" ")
            if cut <= 0:
                cut = MAX_CHARS
            out.append(Span(start, start + cut + 1))
            start = start + cut + 1
            while start < span.end and text[start] == " ":
                start += 1
        if span.end > start:
            out.append(Span(start, span.end))
    return out


def passages(text: str) -> list[Span]:
    """Windows of consecutive sentences up to about TARGET_CHARS, each sentence in exactly one window."""
    sents = sentences(text)
    windows: list[Span] = []
    current: Span | None = None
    for sent in sents:
        if current is None:
            current = sent
        elif sent.end - current.start <= TARGET_CHARS:
            current = Span(current.start, sent.end)
        else:
            windows.append(current)
            current = sent
    if current is not None:
        windows.append(current)
    return windows


_ITEM_START = re.compile(r"(?:\d{1,2}|[a-z])[.)]\s")


def list_intro(text: str, start: int) -> str:
    """The sentence ending in ":" that introduces the numbered list a passage at `start` belongs to, or "".

    Passages split long lists item by item; the items need their lead-in ("Son funciones del Presidente:") to mean
    anything in an embedding. The nearest lead-in before the passage wins; empty when the passage does not start
    with an item or no lead-in precedes it."""
    if not _ITEM_START.match(text, start):
        return ""
    for sent in reversed([s for s in sentences(text) if s.end <= start]):
        chunk = text[sent.start : sent.end].rstrip()
        if chunk.endswith(":"):
            return chunk + " "
    return ""

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
    return _split_long(text, spans)


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

"""The data model shared by every importer and the index: a norm (law, code, the Constitution) and its articles.

A citation must name the norm and the article exactly as a lawyer writes it ("Ley 6 de 2002, artículo 12-A"), so an
article keeps its number and suffix as published, not its position; and the Título/Capítulo path it sits under is
kept as its context, because "artículo 3" of a code means little without it.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .contract import MAX_META_CHARS, MAX_URL_CHARS
from .text import fold

MAX_NAME_CHARS = 200


class NormError(ValueError):
    """A norm's name, metadata or articles are not acceptable; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Article:
    """One article of one norm. `number` is the numeric part; `suffix` keeps "-A", " bis" etc. as published."""

    norm: str
    number: int
    text: str
    headings: tuple[str, ...] = ()
    suffix: str = ""

    @property
    def label(self) -> str:
        return f"{self.number}{self.suffix}"

    @property
    def citation(self) -> str:
        return f"{self.norm}, artículo {self.label}"

    @property
    def key(self) -> str:
        """The citation folded (case, accents, spacing), so gold citations in eval files match loosely."""
        return citation_key(self.citation)

    @property
    def titulo(self) -> str:
        """The outermost heading (the Constitution's Título)."""
        return self.headings[0] if self.headings else ""

    @property
    def capitulo(self) -> str | None:
        """The second heading level (the Constitution's Capítulo), if any."""
        return self.headings[1] if len(self.headings) > 1 else None

    @property
    def path(self) -> str:
        """The heading path as shown under the citation: "Título III · Capítulo 2 · Del trabajo"."""
        return " · ".join(self.headings)


@dataclass(frozen=True, slots=True)
class NormInfo:
    """A norm's name and the metadata a source shows when known: publication date, Gaceta Oficial, official link."""

    name: str
    kind: str = "text"
    date: str | None = None
    gaceta: str | None = None
    url: str | None = None
    source_sha256: str = ""
    article_count: int = 0
    extra: dict[str, str] = field(default_factory=dict)


def citation_key(citation: str) -> str:
    return " ".join(fold(citation).replace("art.", "articulo").split())


def name_key(name: str) -> str:
    """Two names with the same key are the same norm to a reader (case, accents and spacing aside)."""
    return " ".join(fold(name).split())


def check_name(name: str) -> str:
    clean = " ".join(name.split())
    if not clean:
        raise NormError("the norm name is empty")
    if len(clean) > MAX_NAME_CHARS:
        raise NormError(f"the norm name is longer than {MAX_NAME_CHARS} characters")
    if any(ord(ch) < 32 for ch in clean) or "," in clean:
        raise NormError(f"the norm name {clean!r} may not contain commas or control characters")
    return clean


def check_date(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    try:
        return dt.date.fromisoformat(value.strip()).isoformat()
    except ValueError as exc:
        raise NormError(f"date {value!r} is not YYYY-MM-DD") from exc


def check_gaceta(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    clean = " ".join(value.split())
    if len(clean) > MAX_META_CHARS:
        raise NormError(f"gaceta is longer than {MAX_META_CHARS} characters")
    return clean


def check_url(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    clean = value.strip()
    parts = urlsplit(clean)
    if parts.scheme not in ("http", "https") or not parts.hostname or len(clean) > MAX_URL_CHARS:
        raise NormError(f"url {clean!r} is not an http(s) link")
    if parts.username or parts.password or "\\" in clean or re.search(r"\s", clean):
        raise NormError(f"url {clean!r} is not a plain http(s) link")
    return clean


def check_articles(norm: str, articles: list[Article]) -> list[Article]:
    """Refuse a norm with no articles, an empty article or one article number twice."""
    if not articles:
        raise NormError(f"no articles found in {norm!r}")
    seen: set[str] = set()
    for article in articles:
        if not article.text.strip():
            raise NormError(f"{norm}: artículo {article.label} has no text")
        key = label_key(article.number, article.suffix)
        if key in seen:
            raise NormError(f"{norm}: artículo {article.label} appears twice")
        seen.add(key)
    return articles


_LABEL = re.compile(r"^\s*(\d{1,5})\s*(?:[°º])?\s*(?:-\s*([A-Za-z])|\s*(bis|ter|qu[aá]ter|quinquies))?\s*$", re.I)


def label_key(number: int, suffix: str) -> str:
    """One key for an article label however it is written: (12, "-A") and "12 a" agree, as `check_articles` does."""
    return " ".join(fold(f"{number}{suffix}").replace("-", " ").split())


def parse_label(label: str) -> tuple[int, str]:
    """ "12" → (12, ""), "12-A" → (12, "-A"), "12 bis" → (12, " bis"); anything else is a NormError."""
    match = _LABEL.match(label)
    if not match:
        raise NormError(f"article number {label!r} is not like 12, 12-A or 12 bis")
    letter, latin = match.group(2), match.group(3)
    suffix = f"-{letter.upper()}" if letter else f" {latin.lower()}" if latin else ""
    return int(match.group(1)), suffix

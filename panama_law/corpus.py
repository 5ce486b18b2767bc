"""The Constitution as data: fetch or read the pinned JSON, verify it, and parse it into articles.

The legal text is never committed to the repository; it is downloaded from a pinned commit and checked against a
known sha256, or imported from a local copy. Anything that does not look like the expected file is refused before
an index is touched, so a bad download can never replace a good index.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import httpx

from .norms import Article

SOURCE_URL = (
    "https://raw.githubusercontent.com/Jakisundays/act-panama-api/"
    "0f229b2fb3b39158d1c2ed8df0cdd8bd62e419e2/constitucion_panama.json"
)
SOURCE_SHA256 = "d9c1aeb48449c9c170d6309529430c3c77fdd34ac71114b3f784c33f78e0ac3b"
DOCUMENT_NAME = "Constitución Política de la República de Panamá"
MAX_SOURCE_BYTES = 20 * 1024 * 1024

_ARTICLE_KEY = re.compile(r"^articulo-(\d{1,4})$")
_CHAPTERS_KEY = "capitulos"


class CorpusError(ValueError):
    """The source file is not the one we expect (checksum, shape or content); the message says which."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verify_checksum(data: bytes, expected: str | None) -> None:
    """Refuse bytes whose sha256 differs from `expected` (skipped only when no checksum is pinned)."""
    if expected is None:
        return
    actual = sha256_hex(data)
    if actual != expected.lower():
        raise CorpusError(f"checksum mismatch: expected sha256 {expected.lower()}, got {actual}")


def download(url: str = SOURCE_URL, *, timeout_s: float = 30.0, max_bytes: int = MAX_SOURCE_BYTES) -> bytes:
    """Fetch the source file; bounded in size so a wrong URL cannot fill memory."""
    try:
        with httpx.Client(timeout=timeout_s, follow_redirects=True) as client:
            with client.stream("GET", url) as response:
                response.raise_for_status()
                chunks: list[bytes] = []
                total = 0
                for chunk in response.iter_bytes():
                    total += len(chunk)
                    if total > max_bytes:
                        raise CorpusError(f"download larger than {max_bytes} bytes; refusing it")
                    chunks.append(chunk)
    except httpx.HTTPError as exc:
        raise CorpusError(f"download failed: {exc}") from exc
    return b"".join(chunks)


def parse(data: bytes) -> list[Article]:
    """Parse the nested Título → optional Capítulo → `articulo-N` JSON into articles sorted by number."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusError(f"malformed source file: not UTF-8 JSON ({exc})") from exc
    if not isinstance(doc, dict) or not doc:
        raise CorpusError("malformed source file: expected a non-empty object of Títulos")
    articles: dict[int, Article] = {}
    for titulo, body in doc.items():
        if not isinstance(body, dict):
            raise CorpusError(f"malformed source file: Título {titulo!r} is not an object")
        _collect(articles, _clean_heading(titulo), None, body)
    if not articles:
        raise CorpusError("malformed source file: no articles found")
    return [articles[n] for n in sorted(articles)]


def _collect(out: dict[int, Article], titulo: str, capitulo: str | None, body: dict[str, Any]) -> None:
    for key, value in body.items():
        match = _ARTICLE_KEY.match(key.strip().lower())
        if match:
            if not isinstance(value, str) or not value.strip():
                raise CorpusError(f"malformed source file: {key} has no text")
            number = int(match.group(1))
            if number in out:
                raise CorpusError(f"malformed source file: article {number} appears twice")
            headings = (titulo, capitulo) if capitulo else (titulo,)
            out[number] = Article(norm=DOCUMENT_NAME, number=number, headings=headings, text=_clean_text(value))
        elif isinstance(value, dict):
            if key.strip().lower() == _CHAPTERS_KEY:
                _collect(out, titulo, capitulo, value)
            elif capitulo is None:
                _collect(out, titulo, _clean_heading(key), value)
            else:
                raise CorpusError(f"malformed source file: unexpected nesting under {capitulo!r}")
        else:
            raise CorpusError(f"malformed source file: unexpected key {key!r}")


def _clean_heading(text: str) -> str:
    return " ".join(text.split())


def _clean_text(text: str) -> str:
    return " ".join(text.split())

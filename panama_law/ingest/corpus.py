"""The Constitution as data: fetch or read the pinned JSON, verify it, and parse it into articles.

The legal text is never committed to the repository; it is downloaded from a pinned commit and checked against a
known sha256, or imported from a local copy. Anything that does not look like the expected file is refused before
an index is touched, so a bad download can never replace a good index.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from typing import Any

import httpx

from ..norms import Article
from ..settings import SOURCE_URL

DOCUMENT_NAME = "Constitución Política de la República de Panamá"
MAX_SOURCE_BYTES = 20 * 1024 * 1024
# Short on purpose: without network a first run must say so within seconds, not after a minute of silence. The
# connect timeout covers a host that drops packets; the read timeout (between two chunks, not for the whole file)
# covers a server or proxy that accepts the connection and never answers.
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 4.0
PROGRESS_EVERY_S = 1.0

log = logging.getLogger(__name__)

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


def download(
    url: str = SOURCE_URL,
    *,
    timeout_s: float = READ_TIMEOUT_S,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    max_bytes: int = MAX_SOURCE_BYTES,
) -> bytes:
    """Fetch the source file; bounded in size so a wrong URL cannot fill memory, and in time so no network fails fast.

    Progress goes to the log (bytes and percent, about once a second, and always the last line), since a first run
    downloads before it can serve anything and a slow link must not look hung. The program builds the index from
    these bytes next (`build.download_and_build`), which takes longer than the download, so the last line says so.
    `timeout_s` bounds each wait for data, `connect_timeout_s` the connection.
    """
    timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
    try:
        with httpx.Client(timeout=timeout, follow_redirects=True) as client:
            with client.stream("GET", url) as response:
                response.raise_for_status()
                progress = _Progress(url, _content_length(response))
                chunks: list[bytes] = []
                total = 0
                for chunk in response.iter_bytes():
                    total += len(chunk)
                    if total > max_bytes:
                        raise CorpusError(f"download larger than {max_bytes} bytes; refusing it")
                    chunks.append(chunk)
                    progress.update(response.num_bytes_downloaded)
                progress.finish(response.num_bytes_downloaded)
    except httpx.HTTPError as exc:
        raise CorpusError(f"download failed: {_describe(exc)}") from exc
    return b"".join(chunks)


def _content_length(response: httpx.Response) -> int | None:
    """Bytes on the wire, when the server says (compared with `num_bytes_downloaded`, also bytes on the wire)."""
    try:
        length = int(response.headers.get("content-length", ""))
    except ValueError:
        return None
    return length if length > 0 else None


def _describe(exc: httpx.HTTPError) -> str:
    """The error in words a person can act on: httpx's timeouts say only "timed out", or nothing at all."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "no connection to the server (connect timed out)"
    if isinstance(exc, httpx.ReadTimeout):
        return "the server accepted the connection but did not answer in time (read timed out)"
    if isinstance(exc, httpx.HTTPStatusError):  # httpx's own text adds a second line with a link
        return f"HTTP {exc.response.status_code} {exc.response.reason_phrase} from {exc.request.url}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{n / 1000:.0f} kB"


class _Progress:
    """Log lines for one download: where from, then done/total (percent), at most about once a second."""

    def __init__(self, url: str, total: int | None) -> None:
        self.total = total
        self.last = time.monotonic()
        log.info("downloading %s (%s)", url, _size(total) if total else "size not announced")

    def _amount(self, done: int) -> str:
        if not self.total:
            return _size(done)
        return f"{_size(done)} of {_size(self.total)} ({min(100, done * 100 // self.total)}%)"

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            log.info("downloaded %s", self._amount(done))

    def finish(self, done: int) -> None:
        log.info("downloaded %s; building the search index …", self._amount(done))


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

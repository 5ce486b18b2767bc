"""Text lines of a published PDF (Gaceta Oficial style), cleaned for the article splitter.

A PDF's text layer is laid out for print: every page repeats a running header and footer ("Gaceta Oficial
Digital, lunes 12 de enero de 2015 ... 3"), page numbers stand alone, and words are hyphenated across lines. Left
in, a header would be glued into whichever article spans the page break and hyphenated halves would never match a
query. A scanned PDF has no text layer at all, which is refused rather than indexed as nothing.
"""

from __future__ import annotations

import io
import logging
import re
from collections import Counter

from ..norms import NormError
from .splitter import is_heading

# Lines that are only a page number: "3", "- 3 -", "Página 3", "Página 3 de 40", "Pág. 3", "3/40".
_PAGE_NUMBER = re.compile(
    r"^\s*(?:[-–—]\s*)?(?:p[aá]g(?:ina|\.)?\s*)?\d{1,4}(?:\s*(?:de|/)\s*\d{1,4})?(?:\s*[-–—])?\s*$", re.I
)
_EDGE_LINES = 3  # running headers and footers sit within the first / last few lines of a page
_MIN_CHARS_PER_PAGE = 40  # below this on average, the PDF is an image scan


def _repeat_key(line: str) -> str:
    return re.sub(r"\d+", "#", " ".join(line.lower().split()))


def page_texts(data: bytes) -> list[str]:
    """The text layer of each page; a NormError for an unreadable, encrypted or image-only PDF."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed-but-readable files warn per object
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise NormError("the PDF is encrypted; export an unprotected copy first")
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise NormError(f"the PDF is unreadable ({exc})") from exc
    if not pages:
        raise NormError("the PDF has no pages")
    if sum(len(p.strip()) for p in pages) < _MIN_CHARS_PER_PAGE * len(pages):
        raise NormError("the PDF has no text layer (a scanned image?); run OCR on it first")
    return pages


def clean_lines(pages: list[str]) -> list[str]:
    """All pages' lines without running headers/footers and page numbers, hyphenation undone."""
    split = [[ln.strip() for ln in p.splitlines() if ln.strip()] for p in pages]
    edges: Counter[str] = Counter()
    for lines in split:
        edge = set(lines[:_EDGE_LINES] + lines[-_EDGE_LINES:])
        edges.update({_repeat_key(ln) for ln in edge})
    # A line that recurs at the edge of at least half the pages (and of two or more) is running matter; digits
    # count as equal (page and issue numbers change), so an article or Título heading is never taken for one.
    repeated = {key for key, n in edges.items() if len(split) >= 2 and n >= max(2, len(split) / 2)}
    out: list[str] = []
    for lines in split:
        count = len(lines)
        for i, line in enumerate(lines):
            at_edge = i < _EDGE_LINES or i >= count - _EDGE_LINES
            if at_edge and not is_heading(line) and (_repeat_key(line) in repeated or _PAGE_NUMBER.match(line)):
                continue
            out.append(line)
    return dehyphenate(out)


def dehyphenate(lines: list[str]) -> list[str]:
    """Join "constitu-" + "cional ..." into "constitucional ..."; a hyphen before a capital or digit is kept."""
    out: list[str] = []
    for line in lines:
        if out and re.search(r"[a-záéíóúñü]-$", out[-1]) and re.match(r"[a-záéíóúñü]", line):
            out[-1] = out[-1][:-1] + line  # the whole line: its start is mid-sentence, never a heading
            continue
        out.append(line)
    return out


def pdf_lines(data: bytes) -> list[str]:
    return clean_lines(page_texts(data))

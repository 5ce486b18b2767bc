"""Where model-written glosses are kept: the cache of paid replies and the worksheet a team reads and edits.

Kept apart from `gloss_writer`, which asks the model: these are plain files, read back at every import and at every
start of a server that writes glosses, whatever endpoint wrote them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..norms import Article, NormError, label_key, parse_label
from . import glosses

CACHE_FILE = "gloss_cache.jsonl"


class GlossCache:
    """Append-only JSON lines {"key", "glosses"}: each reply is on disk before the next request is sent.

    A line torn by a crash (the last one, unterminated or not JSON) is skipped on reading: that article is simply
    asked again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, tuple[str, ...]] = {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                row = json.loads(line)
                self.entries[str(row["key"])] = tuple(str(g) for g in row["glosses"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue

    def get(self, key: str) -> tuple[str, ...] | None:
        return self.entries.get(key)

    def put(self, key: str, texts: tuple[str, ...]) -> None:
        line = json.dumps({"key": key, "glosses": list(texts)}, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            if fh.tell() and not self._ends_with_newline():
                fh.write("\n")  # a torn last line stays on its own, skipped when read
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self.entries[key] = texts

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"


def kept_from(worksheet: Path, articles: Sequence[Article]) -> dict[int, tuple[str, ...]]:
    """A worksheet already there is the team's: the glosses it gives an article whose text it was written from is
    still the article's text (or that carries no text: written by hand) are kept, by position, and not asked for
    again; an article it gives none, a new article and an amended one are written. NormError naming the line for a
    malformed worksheet, which is left as it is."""
    if not worksheet.is_file():
        return {}
    given = glosses.read(worksheet)
    texts: dict[str, str] = {}
    for line in worksheet.read_text(encoding="utf-8").splitlines():
        row = json.loads(line) if line.strip() else None
        if isinstance(row, dict) and isinstance(row.get("text"), str):
            texts[label_key(*parse_label(str(row["article"])))] = row["text"]
    out: dict[int, tuple[str, ...]] = {}
    for pos, article in enumerate(articles):
        key = label_key(article.number, article.suffix)
        if given.get(key) and texts.get(key, article.text) == article.text:
            out[pos] = given[key]
    return out


def worksheet_rows(articles: Sequence[Article], glossed: dict[int, tuple[str, ...]]) -> list[dict[str, Any]]:
    """The rows `python -m panama_law glosses NAME` prints and `import --glosses` reads."""
    return [
        {"article": a.label, "headings": list(a.headings), "text": a.text, "glosses": list(glossed.get(i, ()))}
        for i, a in enumerate(articles)
    ]


def write_worksheet(path: Path, articles: Sequence[Article], glossed: dict[int, tuple[str, ...]]) -> None:
    """Written whole to a temporary file and renamed over `path`, so a team never finds half a worksheet."""
    tmp = path.with_name(f".{path.name}.tmp")
    lines = [json.dumps(row, ensure_ascii=False) for row in worksheet_rows(articles, glossed)]
    try:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise NormError(f"cannot write the glosses worksheet {path.name}: {exc.strerror or exc}") from exc

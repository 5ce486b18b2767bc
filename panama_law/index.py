"""Build and load the on-disk index: one SQLite file holding articles, passages and their embeddings.

Everything search needs is precomputed at build time (passage and article embeddings) and stored in one file, so
replacing the index is a single atomic `os.replace` of a file built beside it: a failed or refused build never
leaves a half-written or mixed index behind, and a running server keeps reading the old file until it restarts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import embedding
from .corpus import Article, sha256_hex
from .passages import passages

log = logging.getLogger(__name__)

INDEX_FILE = "panama_law.sqlite3"
SCHEMA_VERSION = 1


class IndexLoadError(RuntimeError):
    """The index file is missing, from another schema version, or unreadable."""


@dataclass(frozen=True, slots=True)
class Passage:
    article: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class LoadedIndex:
    articles: list[Article]
    passages: list[Passage]
    passage_vectors: np.ndarray
    article_vectors: np.ndarray
    source_sha256: str
    built_at: float


def index_path(data_dir: Path) -> Path:
    return data_dir / INDEX_FILE


def article_embedding_text(article: Article) -> str:
    """What the article-level vector sees: chapter context first, then the text."""
    context = article.capitulo or article.titulo
    return f"{_plain_heading(context)}. {article.text}"


def passage_embedding_text(article: Article, span: Passage) -> str:
    return article.text[span.start : span.end]


def _plain_heading(heading: str) -> str:
    """Drop the 'TÍTULO III -' / 'Capítulo 2°:' numbering, which only adds noise to an embedding."""
    for sep in (" - ", ": "):
        if sep in heading:
            return heading.split(sep, 1)[1]
    return heading


def build(articles: list[Article], data_dir: Path, source_bytes: bytes) -> Path:
    """Write a complete index for `articles` and atomically put it in place; returns its path."""
    started = time.perf_counter()
    data_dir.mkdir(parents=True, exist_ok=True)
    spans = [Passage(a.number, s.start, s.end) for a in articles for s in passages(a.text)]
    by_number = {a.number: a for a in articles}
    passage_vecs = embedding.encode([passage_embedding_text(by_number[p.article], p) for p in spans])
    article_vecs = embedding.encode([article_embedding_text(a) for a in articles])

    fd, tmp_name = tempfile.mkstemp(prefix=".panama_law-", suffix=".tmp", dir=data_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with contextlib.closing(sqlite3.connect(tmp)) as db:
            db.executescript(
                """
                CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE articles (number INTEGER PRIMARY KEY, titulo TEXT NOT NULL, capitulo TEXT,
                                       text TEXT NOT NULL);
                CREATE TABLE passages (id INTEGER PRIMARY KEY, article INTEGER NOT NULL REFERENCES articles(number),
                                       start INTEGER NOT NULL, end INTEGER NOT NULL);
                CREATE TABLE vectors (name TEXT PRIMARY KEY, rows INTEGER NOT NULL, dim INTEGER NOT NULL,
                                      data BLOB NOT NULL);
                """
            )
            db.executemany(
                "INSERT INTO articles VALUES (?, ?, ?, ?)",
                [(a.number, a.titulo, a.capitulo, a.text) for a in articles],
            )
            db.executemany(
                "INSERT INTO passages VALUES (?, ?, ?, ?)",
                [(i, p.article, p.start, p.end) for i, p in enumerate(spans)],
            )
            for name, vecs in (("passages", passage_vecs), ("articles", article_vecs)):
                db.execute(
                    "INSERT INTO vectors VALUES (?, ?, ?, ?)",
                    (name, vecs.shape[0], vecs.shape[1], np.ascontiguousarray(vecs, dtype=np.float32).tobytes()),
                )
            meta = {
                "schema_version": str(SCHEMA_VERSION),
                "source_sha256": sha256_hex(source_bytes),
                "built_at": str(time.time()),
                "article_count": str(len(articles)),
                "passage_count": str(len(spans)),
            }
            db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
            db.commit()
        final = index_path(data_dir)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    log.info(
        "index built: %d articles, %d passages in %.1f s",
        len(articles),
        len(spans),
        time.perf_counter() - started,
    )
    return final


def load(data_dir: Path) -> LoadedIndex:
    """Read the whole index into memory (it is small: a few MB), failing clearly if it is absent or stale."""
    path = index_path(data_dir)
    if not path.is_file():
        raise IndexLoadError(f"no index at {path}; run `python -m panama_law download` or `import PATH` first")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("schema_version") != str(SCHEMA_VERSION):
                raise IndexLoadError(f"index at {path} has schema {meta.get('schema_version')!r}; rebuild it")
            articles = [
                Article(number=n, titulo=t, capitulo=c, text=x)
                for n, t, c, x in db.execute("SELECT number, titulo, capitulo, text FROM articles ORDER BY number")
            ]
            spans = [
                Passage(article=a, start=s, end=e)
                for a, s, e in db.execute("SELECT article, start, end FROM passages ORDER BY id")
            ]
            vectors = {
                name: np.frombuffer(data, dtype=np.float32).reshape(rows, dim).copy()
                for name, rows, dim, data in db.execute("SELECT name, rows, dim, data FROM vectors")
            }
    except sqlite3.Error as exc:
        raise IndexLoadError(f"index at {path} is unreadable: {exc}") from exc
    return LoadedIndex(
        articles=articles,
        passages=spans,
        passage_vectors=vectors["passages"],
        article_vectors=vectors["articles"],
        source_sha256=meta["source_sha256"],
        built_at=float(meta["built_at"]),
    )


def describe(data_dir: Path) -> str:
    """One-line JSON summary of an index, for the CLI."""
    idx = load(data_dir)
    return json.dumps(
        {"articles": len(idx.articles), "passages": len(idx.passages), "source_sha256": idx.source_sha256}
    )

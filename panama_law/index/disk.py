"""The on-disk index and how it is read: one SQLite file holding every norm, its articles, passages and embeddings.

Format 2 keeps norms apart (a `norms` table; articles, passages and vectors belong to one norm), so a norm can be
added, replaced or removed without re-embedding the others (`panama_law.index.store` writes it). Format 1 held only the
Constitution; it is still read as is (as the one norm it holds) and converted on the next write, so upgrading the
server never forces a rebuild before it can serve.

Every write gives the index a new generation (`meta.generation`, "SEQ-RANDOM"): a running server reloads a changed
file on its own and says which generation it serves, on `/healthz` and in a small record per server in the data dir
(`panama_law.serve.served`), which is how `import` and `remove` learn when a running server has taken their change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import embedding
from ..ingest.corpus import DOCUMENT_NAME
from ..norms import Article, NormInfo

log = logging.getLogger(__name__)

INDEX_FILE = "panama_law.sqlite3"
SCHEMA_VERSION = 2
LEGACY_SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE norms (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, date TEXT, gaceta TEXT,
                    url TEXT, source_sha256 TEXT NOT NULL, imported_at REAL NOT NULL);
CREATE TABLE articles (id INTEGER PRIMARY KEY, norm INTEGER NOT NULL REFERENCES norms(id) ON DELETE CASCADE,
                       number INTEGER NOT NULL, suffix TEXT NOT NULL, headings TEXT NOT NULL, text TEXT NOT NULL);
CREATE TABLE passages (id INTEGER PRIMARY KEY, article INTEGER NOT NULL REFERENCES articles(id) ON DELETE CASCADE,
                       start INTEGER NOT NULL, end INTEGER NOT NULL);
CREATE TABLE vectors (norm INTEGER NOT NULL REFERENCES norms(id) ON DELETE CASCADE, name TEXT NOT NULL,
                      rows INTEGER NOT NULL, dim INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (norm, name));
"""
# Added to format 2 without a version change: an index written before glosses existed simply has none, and the
# next write adds the table.
GLOSS_SCHEMA = """
CREATE TABLE IF NOT EXISTS glosses (id INTEGER PRIMARY KEY,
                                    article INTEGER NOT NULL REFERENCES articles(id) ON DELETE CASCADE,
                                    text TEXT NOT NULL);
"""


class IndexLoadError(RuntimeError):
    """The index file is missing, from an unknown schema version, or unreadable."""


class FileIdentity(NamedTuple):
    """Which file sits at the index path: a write swaps in a new file (`os.replace`), so any write changes this."""

    device: int
    inode: int
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Passage:
    """A span of one article's text; `article` is the article's position in `LoadedIndex.articles`."""

    article: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Gloss:
    """A caller's wording of what an article settles (`glosses`); `article` is the article's position."""

    article: int
    text: str


@dataclass(frozen=True, slots=True)
class LoadedIndex:
    articles: list[Article]
    passages: list[Passage]
    passage_vectors: np.ndarray
    article_vectors: np.ndarray
    norms: list[NormInfo]
    built_at: float
    glosses: list[Gloss] = field(default_factory=list)
    gloss_vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, embedding.DIM), np.float32))
    # Which write produced this content ("SEQ-RANDOM"; "0-BUILT_AT" for an index written before generations).
    generation: str = ""
    # The file it was read from, as it was just before reading (None when not read from a file by `load`).
    identity: FileIdentity | None = None

    @property
    def source_sha256(self) -> str | None:
        """The Constitution's source checksum (it alone has a pinned one); None when it is not indexed."""
        return next((n.source_sha256 for n in self.norms if n.name == DOCUMENT_NAME), None)

    def norm(self, name: str) -> NormInfo | None:
        return next((n for n in self.norms if n.name == name), None)


def index_path(data_dir: Path) -> Path:
    return data_dir / INDEX_FILE


def file_identity(data_dir: Path) -> FileIdentity | None:
    """The identity of the index file now, None when there is none: a cheap stat, so a server can poll it."""
    try:
        st = os.stat(index_path(data_dir))
    except OSError:
        return None
    return FileIdentity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def generation_of(meta: dict[str, str]) -> str:
    """The generation recorded in an index's meta table; an index written before generations gets a stable stand-in
    from its build time, sequence 0, which every later write outranks."""
    return meta.get("generation") or f"0-{meta.get('built_at', '0')}"


def generation_seq(generation: str) -> int:
    """The write count a generation starts with (0 when it has none): a later write of the same index has a higher
    one, so a server serving a later generation serves an earlier change too."""
    head = generation.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def current_generation(data_dir: Path) -> str | None:
    """The generation of the index file now (None when there is none), read without loading anything else."""
    path = index_path(data_dir)
    if not path.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return generation_of(dict(db.execute("SELECT key, value FROM meta").fetchall()))
    except sqlite3.Error as exc:
        raise IndexLoadError(f"index at {path} is unreadable: {exc}") from exc


def article_embedding_text(article: Article) -> str:
    """What the article-level vector sees: the innermost heading first, then the text."""
    context = article.headings[-1] if article.headings else ""
    return f"{plain_heading(context)}. {article.text}" if context else article.text


def plain_heading(heading: str) -> str:
    """Drop the 'TÍTULO III -' / 'Capítulo 2°:' / 'Título I.' numbering, which only adds noise to an embedding."""
    for sep in (" - ", ": ", ". "):
        if sep in heading:
            return heading.split(sep, 1)[1]
    return heading


def embed_articles(articles: list[Article], spans: list[Passage]) -> tuple[np.ndarray, np.ndarray]:
    """Passage and article vectors for one norm (`spans` index into `articles`)."""
    passage_vecs = embedding.encode([articles[p.article].text[p.start : p.end] for p in spans])
    article_vecs = embedding.encode([article_embedding_text(a) for a in articles])
    return passage_vecs, article_vecs


def embed_glosses(texts: list[str]) -> np.ndarray:
    return embedding.encode(texts)


def _has_glosses(db: sqlite3.Connection) -> bool:
    """Whether the file has the glosses table (an index written before glosses existed has not)."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'glosses'").fetchone() is not None


def _norm_articles(db: sqlite3.Connection, name: str, norm_id: int | None = None) -> list[tuple[int, Article]]:
    """One norm's articles in stored order, each with its row id; by id when known, else by the norm's name."""
    where, key = ("a.norm = ?", norm_id) if norm_id is not None else ("n.name = ?", name)
    return [
        (art_id, Article(name, number, text, tuple(json.loads(headings)), suffix))
        for art_id, number, suffix, headings, text in db.execute(
            "SELECT a.id, a.number, a.suffix, a.headings, a.text FROM articles a JOIN norms n ON n.id = a.norm "
            f"WHERE {where} ORDER BY a.id",
            (key,),
        )
    ]


def norm_articles(data_dir: Path, name: str) -> list[Article]:
    """One norm's articles as stored, without loading any vectors (empty if it is not indexed)."""
    path = index_path(data_dir)
    if not path.is_file():
        return []
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return [article for _, article in _norm_articles(db, name)]
    except (sqlite3.Error, ValueError) as exc:
        raise IndexLoadError(f"index at {path} is unreadable: {exc}") from exc


def norm_glosses(data_dir: Path, name: str) -> dict[int, tuple[str, ...]]:
    """One norm's glosses as stored, by article position within the norm; empty if it has none or is absent."""
    path = index_path(data_dir)
    if not path.is_file():
        return {}
    out: dict[int, list[str]] = {}
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            if not _has_glosses(db):
                return {}
            positions = {art_id: pos for pos, (art_id, _) in enumerate(_norm_articles(db, name))}
            for art_id, text in db.execute(
                "SELECT g.article, g.text FROM glosses g JOIN articles a ON a.id = g.article "
                "JOIN norms n ON n.id = a.norm WHERE n.name = ? ORDER BY g.id",
                (name,),
            ):
                out.setdefault(positions[art_id], []).append(text)
    except sqlite3.Error as exc:
        raise IndexLoadError(f"index at {path} is unreadable: {exc}") from exc
    return {pos: tuple(texts) for pos, texts in out.items()}


def schema_version(db: sqlite3.Connection) -> str | None:
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def _vector(data: bytes, rows: int, dim: int) -> np.ndarray:
    return np.frombuffer(data, dtype=np.float32).reshape(rows, dim).copy()


def _load_v2(db: sqlite3.Connection, meta: dict[str, str]) -> LoadedIndex:
    norms: list[NormInfo] = []
    articles: list[Article] = []
    spans: list[Passage] = []
    pvecs: list[np.ndarray] = []
    avecs: list[np.ndarray] = []
    glosses: list[Gloss] = []
    gvecs: list[np.ndarray] = []
    has_glosses = _has_glosses(db)
    rows = db.execute("SELECT id, name, kind, date, gaceta, url, source_sha256 FROM norms ORDER BY id").fetchall()
    for norm_id, name, kind, date, gaceta, url, sha in rows:
        first = len(articles)
        article_pos: dict[int, int] = {}
        for art_id, article in _norm_articles(db, name, norm_id):
            article_pos[art_id] = len(articles)
            articles.append(article)
        for art_id, start, end in db.execute(
            "SELECT p.article, p.start, p.end FROM passages p JOIN articles a ON a.id = p.article "
            "WHERE a.norm = ? ORDER BY p.id",
            (norm_id,),
        ):
            spans.append(Passage(article_pos[art_id], start, end))
        vecs = {
            vname: _vector(data, r, d)
            for vname, r, d, data in db.execute("SELECT name, rows, dim, data FROM vectors WHERE norm = ?", (norm_id,))
        }
        pvecs.append(vecs["passages"])
        avecs.append(vecs["articles"])
        if has_glosses and "glosses" in vecs:
            glosses += [
                Gloss(article_pos[art_id], text)
                for art_id, text in db.execute(
                    "SELECT g.article, g.text FROM glosses g JOIN articles a ON a.id = g.article "
                    "WHERE a.norm = ? ORDER BY g.id",
                    (norm_id,),
                )
            ]
            gvecs.append(vecs["glosses"])
        count = len(articles) - first
        norms.append(NormInfo(name, kind, date, gaceta, url, sha, article_count=count))
    dim = embedding.DIM
    return LoadedIndex(
        articles=articles,
        passages=spans,
        passage_vectors=np.vstack(pvecs) if pvecs else np.zeros((0, dim), np.float32),
        article_vectors=np.vstack(avecs) if avecs else np.zeros((0, dim), np.float32),
        norms=norms,
        built_at=float(meta.get("built_at", "0")),
        glosses=glosses,
        gloss_vectors=np.vstack(gvecs) if gvecs else np.zeros((0, dim), np.float32),
    )


def load_v1(db: sqlite3.Connection, meta: dict[str, str]) -> LoadedIndex:
    """A format-1 index: the Constitution alone, articles keyed by number."""
    articles: list[Article] = []
    pos: dict[int, int] = {}
    for n, t, c, x in db.execute("SELECT number, titulo, capitulo, text FROM articles ORDER BY number"):
        pos[n] = len(articles)
        articles.append(Article(DOCUMENT_NAME, n, x, (t, c) if c else (t,)))
    spans = [Passage(pos[a], s, e) for a, s, e in db.execute("SELECT article, start, end FROM passages ORDER BY id")]
    vecs = {name: _vector(data, r, d) for name, r, d, data in db.execute("SELECT name, rows, dim, data FROM vectors")}
    info = NormInfo(DOCUMENT_NAME, "constitution", source_sha256=meta["source_sha256"], article_count=len(articles))
    return LoadedIndex(articles, spans, vecs["passages"], vecs["articles"], [info], float(meta["built_at"]))


def read(db: sqlite3.Connection, path: Path) -> LoadedIndex:
    """Either format from an open connection (the store reads a format-1 file this way to convert it)."""
    version = schema_version(db)
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    if version == str(SCHEMA_VERSION):
        return dataclasses.replace(_load_v2(db, meta), generation=generation_of(meta))
    if version == str(LEGACY_SCHEMA_VERSION):
        log.info("index at %s is format 1 (the Constitution only): read as is, converted on the next import", path)
        return dataclasses.replace(load_v1(db, meta), generation=generation_of(meta))
    raise IndexLoadError(f"index at {path} has schema {version!r}; rebuild it (`python -m panama_law import PATH`)")


def load(data_dir: Path) -> LoadedIndex:
    """Read the whole index into memory, failing clearly if it is absent, unknown or unreadable."""
    path = index_path(data_dir)
    # Stat first: should a write swap in a newer file before the read opens it, the identity is the older one, so a
    # server comparing identities loads once more rather than missing the change.
    identity = file_identity(data_dir)
    if identity is None:
        raise IndexLoadError(f"no index at {path}; run `python -m panama_law download` or `import PATH` first")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return dataclasses.replace(read(db, path), identity=identity)
    except (sqlite3.Error, KeyError, ValueError) as exc:
        raise IndexLoadError(f"index at {path} is unreadable: {exc}") from exc


def list_norms(data_dir: Path) -> list[NormInfo]:
    """The norms in the index with their article counts, without loading articles or vectors."""
    path = index_path(data_dir)
    if not path.is_file():
        raise IndexLoadError(f"no index at {path}; run `python -m panama_law download` or `import PATH` first")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            version = schema_version(db)
            if version == str(LEGACY_SCHEMA_VERSION):
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
                (count,) = db.execute("SELECT COUNT(*) FROM articles").fetchone()
                return [
                    NormInfo(DOCUMENT_NAME, "constitution", source_sha256=meta["source_sha256"], article_count=count)
                ]
            if version != str(SCHEMA_VERSION):
                raise IndexLoadError(f"index at {path} has schema {version!r}; rebuild it")
            rows = db.execute(
                "SELECT n.name, n.kind, n.date, n.gaceta, n.url, n.source_sha256, COUNT(a.id) FROM norms n "
                "LEFT JOIN articles a ON a.norm = n.id GROUP BY n.id ORDER BY n.id"
            ).fetchall()
    except (sqlite3.Error, KeyError) as exc:
        raise IndexLoadError(f"index at {path} is unreadable: {exc}") from exc
    return [
        NormInfo(name, kind, date, gaceta, url, sha, article_count=count)
        for name, kind, date, gaceta, url, sha, count in rows
    ]

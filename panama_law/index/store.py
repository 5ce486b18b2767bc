"""Writing the index: add or replace norms, remove one, all or nothing.

Every write copies the current index beside itself, changes the copy and swaps it in with `os.replace`, so a
refused or failed import leaves the existing index byte for byte as it was, and a running server, which reloads a
changed file on its own (`panama_law.server`), reads either the old file or the new one, never a half-written one.
Each write gives the copy the next generation (`index.generation_of`), by which a server says what it serves. Only
the norms being written are embedded; the others' rows and vectors are copied. A format-1 index (the Constitution
alone) is converted into the copy on the first write. Writes to one data dir take turns (an exclusive lock on the
data dir), so two imports at once are written one after the other and neither norm is lost.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..ingest import glosses
from ..ingest.corpus import DOCUMENT_NAME
from ..ingest.sources import ParsedNorm
from ..norms import Article, NormError, NormInfo, name_key
from . import disk as index
from .passages import passages

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _write_turn(data_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the data dir itself for the block: a second writer waits, then copies the first
    one's result rather than the index both started from (which would lose the first one's change). The lock is on
    the directory, so no lock file is left beside the index, and the system releases it if the process dies; where
    there is no `fcntl` (Windows), writes are not serialized."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - POSIX everywhere this runs
        yield
        return
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def _rewrite(data_dir: Path) -> Iterator[sqlite3.Connection]:
    """A writable copy of the index (format 2, created or converted as needed), swapped in if the block succeeds."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with _write_turn(data_dir), _copy_and_swap(data_dir) as db:
        yield db


@contextlib.contextmanager
def _copy_and_swap(data_dir: Path) -> Iterator[sqlite3.Connection]:
    final = index.index_path(data_dir)
    fd, tmp_name = tempfile.mkstemp(prefix=".panama_law-", suffix=".tmp", dir=data_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        legacy: index.LoadedIndex | None = None
        with contextlib.closing(sqlite3.connect(tmp)) as db:
            if final.is_file():
                try:
                    with contextlib.closing(sqlite3.connect(f"file:{final}?mode=ro", uri=True)) as old:
                        if index.schema_version(old) == str(index.SCHEMA_VERSION):
                            old.backup(db)
                        else:
                            legacy = index.read(old, final)  # format 1, or an IndexLoadError for anything else
                except (sqlite3.Error, KeyError) as exc:
                    raise index.IndexLoadError(f"index at {final} is unreadable ({exc}); move it away first") from exc
            if index.schema_version(db) is None:
                db.executescript(index.SCHEMA)
            db.executescript(index.GLOSS_SCHEMA)
            db.execute("PRAGMA foreign_keys = ON")
            if legacy is not None:
                _insert_loaded(db, legacy)
            yield db
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(index.SCHEMA_VERSION),))
            db.execute("INSERT OR REPLACE INTO meta VALUES ('built_at', ?)", (str(time.time()),))
            db.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (_next_generation(db),))
            db.commit()
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _next_generation(db: sqlite3.Connection) -> str:
    """One more than the copied index's sequence, and a random part, so two indexes written apart from each other
    (another data dir, a concurrent write) never share a generation."""
    row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    previous = index.generation_seq(str(row[0])) if row else 0
    return f"{previous + 1}-{secrets.token_hex(4)}"


def _write_norm(
    db: sqlite3.Connection,
    info: NormInfo,
    articles: list[Article],
    spans: list[index.Passage],
    passage_vecs: np.ndarray,
    article_vecs: np.ndarray,
    glossed: dict[int, tuple[str, ...]] | None = None,
) -> None:
    cur = db.execute(
        "INSERT INTO norms (name, kind, date, gaceta, url, source_sha256, imported_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (info.name, info.kind, info.date, info.gaceta, info.url, info.source_sha256, time.time()),
    )
    norm_id = cur.lastrowid
    ids: list[int] = []
    for a in articles:
        row = db.execute(
            "INSERT INTO articles (norm, number, suffix, headings, text) VALUES (?, ?, ?, ?, ?)",
            (norm_id, a.number, a.suffix, json.dumps(list(a.headings), ensure_ascii=False), a.text),
        )
        ids.append(int(row.lastrowid or 0))
    db.executemany(
        "INSERT INTO passages (article, start, end) VALUES (?, ?, ?)", [(ids[p.article], p.start, p.end) for p in spans]
    )
    for name, vecs in (("passages", passage_vecs), ("articles", article_vecs)):
        _put_vectors(db, int(norm_id or 0), name, vecs)
    if glossed:
        _write_glosses(db, int(norm_id or 0), ids, glossed)


def _put_vectors(db: sqlite3.Connection, norm_id: int, name: str, vecs: np.ndarray) -> None:
    db.execute(
        "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?)",
        (norm_id, name, vecs.shape[0], vecs.shape[1], np.ascontiguousarray(vecs, dtype=np.float32).tobytes()),
    )


def _write_glosses(
    db: sqlite3.Connection, norm_id: int, article_ids: list[int], glossed: dict[int, tuple[str, ...]]
) -> None:
    """A norm's glosses (by article position) and their vectors, replacing any it had."""
    db.execute("DELETE FROM glosses WHERE article IN (SELECT id FROM articles WHERE norm = ?)", (norm_id,))
    db.execute("DELETE FROM vectors WHERE norm = ? AND name = 'glosses'", (norm_id,))
    rows = [(article_ids[pos], text) for pos in sorted(glossed) for text in glossed[pos]]
    if not rows:
        return
    db.executemany("INSERT INTO glosses (article, text) VALUES (?, ?)", rows)
    _put_vectors(db, norm_id, "glosses", index.embed_glosses([text for _, text in rows]))


def _insert_loaded(db: sqlite3.Connection, loaded: index.LoadedIndex) -> None:
    """Copy an in-memory (format-1) index into a fresh format-2 database, vectors and all."""
    for info in loaded.norms:
        positions = [i for i, a in enumerate(loaded.articles) if a.norm == info.name]
        remap = {old: new for new, old in enumerate(positions)}
        chosen = [i for i, p in enumerate(loaded.passages) if p.article in remap]
        spans = [
            index.Passage(remap[loaded.passages[i].article], loaded.passages[i].start, loaded.passages[i].end)
            for i in chosen
        ]
        _write_norm(
            db,
            info,
            [loaded.articles[i] for i in positions],
            spans,
            loaded.passage_vectors[chosen],
            loaded.article_vectors[positions],
        )


def _existing(db: sqlite3.Connection) -> dict[str, tuple[str, str]]:
    """name → (name_key, source_sha256) of the norms already in the copy."""
    return {name: (name_key(name), sha) for name, sha in db.execute("SELECT name, source_sha256 FROM norms")}


def check_collisions(norms: list[ParsedNorm], existing: list[str]) -> None:
    """A new name that a reader could not tell from an existing one (case, accents, spacing) is refused, as is
    the Constitution's name on anything but its JSON: replacing a norm takes its exact name."""
    for parsed in norms:
        name = parsed.info.name
        if name_key(name) == name_key(DOCUMENT_NAME) and parsed.info.kind != "constitution":
            raise NormError(f"norm name {name!r} is the Constitution's; import the Constitution JSON to replace it")
        clash = next((e for e in existing if e != name and name_key(e) == name_key(name)), None)
        if clash:
            raise NormError(f"norm name {name!r} collides with the indexed norm {clash!r}; use its exact name")


def put_norms(data_dir: Path, norms: list[ParsedNorm]) -> Path:
    """Add each norm, replacing any norm of the same name, keeping the others; embeds only these norms."""
    started = time.perf_counter()
    prepared = []
    for parsed in norms:
        spans = [index.Passage(i, s.start, s.end) for i, a in enumerate(parsed.articles) for s in passages(a.text)]
        prepared.append((parsed, spans))
    with _rewrite(data_dir) as db:
        check_collisions(norms, list(_existing(db)))
        vectors = [index.embed_articles(parsed.articles, spans) for parsed, spans in prepared]
        for (parsed, spans), (pvecs, avecs) in zip(prepared, vectors, strict=True):
            db.execute("DELETE FROM norms WHERE name = ?", (parsed.info.name,))
            _write_norm(db, parsed.info, parsed.articles, spans, pvecs, avecs, parsed.glosses)
    for parsed, spans in prepared:
        log.info("norm indexed: %d articles, %d passages", len(parsed.articles), len(spans))
    log.info("index written in %.1f s", time.perf_counter() - started)
    return index.index_path(data_dir)


def is_current(data_dir: Path, info: NormInfo, glossed: dict[int, tuple[str, ...]] | None = None) -> bool:
    """Whether the index already holds this norm from the same bytes with the same metadata and glosses."""
    try:
        held = next((n for n in index.list_norms(data_dir) if n.name == info.name), None)
    except index.IndexLoadError:
        return False
    return (
        held is not None
        and (held.source_sha256, held.date, held.gaceta, held.url)
        == (info.source_sha256, info.date, info.gaceta, info.url)
        and _holds_glosses(data_dir, info.name, glossed or {})
    )


def _holds_glosses(data_dir: Path, name: str, glossed: dict[int, tuple[str, ...]]) -> bool:
    return glosses.digest(index.norm_glosses(data_dir, name)) == glosses.digest(glossed)


def refresh_glosses(data_dir: Path, name: str, glossed: dict[int, tuple[str, ...]]) -> bool:
    """Give an indexed norm these glosses if it holds others (an index built before they shipped or changed),
    embedding only the glosses; False when it already had them or the norm is not indexed."""
    if _holds_glosses(data_dir, name, glossed):
        return False
    with _rewrite(data_dir) as db:
        row = db.execute("SELECT id FROM norms WHERE name = ?", (name,)).fetchone()
        if row is None:
            return False
        ids = [int(r[0]) for r in db.execute("SELECT id FROM articles WHERE norm = ? ORDER BY id", (row[0],))]
        kept = {p: g for p, g in glossed.items() if p < len(ids)}
        _write_glosses(db, int(row[0]), ids, kept)
    dropped = len(glossed) - len(kept)
    if dropped:  # the norm was re-imported shorter since its articles were read: say so rather than lose them quietly
        log.warning("norm glosses refreshed without %d articles' glosses: the norm changed meanwhile", dropped)
    log.info("norm glosses refreshed: %d", sum(len(g) for g in kept.values()))
    return True


def remove_norm(data_dir: Path, name: str) -> None:
    """Remove one norm by its exact name; a NormError naming the indexed norms if there is none of that name."""
    with _rewrite(data_dir) as db:
        names = list(_existing(db))
        if name not in names:
            raise NormError(f"no norm named {name!r} in the index (indexed: {', '.join(names) or 'none'})")
        db.execute("DELETE FROM norms WHERE name = ?", (name,))

"""From source bytes to an index on disk: verify, parse, build atomically. Shared by `download`, `import`, `serve`.

Verification and parsing happen before anything is written, and the index itself is written beside the old one
and swapped in with os.replace, so a refused or failed build leaves an existing index exactly as it was.
"""

from __future__ import annotations

import logging
from pathlib import Path

from . import corpus, index
from .search import Searcher
from .settings import ServerSettings

log = logging.getLogger(__name__)


def build_from_bytes(data: bytes, data_dir: Path, expected_sha256: str | None) -> Path:
    corpus.verify_checksum(data, expected_sha256)
    articles = corpus.parse(data)
    return index.build(articles, data_dir, data)


def import_file(path: Path, data_dir: Path, expected_sha256: str | None) -> Path:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise corpus.CorpusError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return build_from_bytes(data, data_dir, expected_sha256)


def download_and_build(url: str, data_dir: Path, expected_sha256: str) -> Path:
    return build_from_bytes(corpus.download(url), data_dir, expected_sha256)


def ensure_index(settings: ServerSettings) -> None:
    """Build the index on first run: from the configured local source if any, else by download."""
    if index.index_path(settings.data_dir).is_file():
        return
    if settings.source is not None:
        log.info("no index yet; importing the configured source file")
        import_file(settings.source, settings.data_dir, settings.source_sha256)
    else:
        log.info("no index yet; downloading the pinned source")
        download_and_build(settings.source_url, settings.data_dir, settings.source_sha256)


def load_searcher(settings: ServerSettings) -> Searcher:
    """Ensure, load and warm up: the first query should be as fast as the rest."""
    from . import embedding

    ensure_index(settings)
    searcher = Searcher(index.load(settings.data_dir))
    embedding.warm_up()
    searcher.search("derechos fundamentales")
    return searcher

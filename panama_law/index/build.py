"""From source files to an index on disk: verify, parse, write atomically. Shared by `download`, `import`, `serve`.

Verification and parsing happen before anything is written, and every write goes to a copy swapped in with
os.replace (`panama_law.index.store`), so a refused or failed import leaves an existing index exactly as it was.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..ingest import corpus, glosses
from ..ingest.sources import GLOSSES_SIDECAR, ImportOptions, ParsedNorm, is_norm_file, read_norms
from ..norms import NormError, NormInfo
from ..settings import ServerSettings
from . import disk as index
from . import store

log = logging.getLogger(__name__)


def build_from_bytes(data: bytes, data_dir: Path, expected_sha256: str | None) -> Path:
    """The Constitution JSON's bytes into the index (replacing only the Constitution)."""
    corpus.verify_checksum(data, expected_sha256)
    articles = corpus.parse(data)
    info = NormInfo(corpus.DOCUMENT_NAME, "constitution", source_sha256=corpus.sha256_hex(data))
    return store.put_norms(data_dir, [ParsedNorm(info, articles, glosses.constitution(articles))])


def import_norms(path: Path, data_dir: Path, options: ImportOptions | None = None) -> list[NormInfo]:
    """Parse `path` (any supported format) and add its norms, replacing same-named ones; returns what was written."""
    parsed = read_norms(path, options)
    store.put_norms(data_dir, parsed)
    return [
        NormInfo(p.info.name, p.info.kind, p.info.date, p.info.gaceta, p.info.url, article_count=len(p.articles))
        for p in parsed
    ]


def import_file(path: Path, data_dir: Path, expected_sha256: str | None) -> Path:
    """The Constitution JSON (or any norm file) at `path` into the index; kept for the first-run build."""
    import_norms(path, data_dir, ImportOptions(expected_sha256=expected_sha256))
    return index.index_path(data_dir)


def download_and_build(url: str, data_dir: Path, expected_sha256: str) -> Path:
    return build_from_bytes(corpus.download(url), data_dir, expected_sha256)


@dataclass(frozen=True, slots=True)
class FolderOutcome:
    """One file of a norms folder: what it became, or why it was refused (one line)."""

    file: str
    norms: tuple[str, ...] = ()
    unchanged: bool = False
    error: str | None = None


def import_folder(folder: Path, data_dir: Path) -> list[FolderOutcome]:
    """Import every norm file in `folder` (sidecars give the metadata); a file already indexed from the same bytes
    and metadata is skipped, and a bad file is reported and skipped, leaving the index as it was for it."""
    if not folder.is_dir():
        raise corpus.CorpusError(f"norms folder {folder} is not a directory")
    outcomes: list[FolderOutcome] = []
    for path in sorted(p for p in folder.iterdir() if is_norm_file(p)):
        try:
            parsed = read_norms(path, ImportOptions(expected_sha256=None))
            names = tuple(p.info.name for p in parsed)
            if all(store.is_current(data_dir, p.info, p.glosses) for p in parsed):
                outcomes.append(FolderOutcome(path.name, names, unchanged=True))
                continue
            store.put_norms(data_dir, parsed)
            outcomes.append(FolderOutcome(path.name, names))
        except (ValueError, OSError, index.IndexLoadError) as exc:
            outcomes.append(FolderOutcome(path.name, error=str(exc)))
    return outcomes


def _glossable(path: Path, options: ImportOptions) -> ParsedNorm:
    """The one norm in `path`, read without any glosses file; refused if it has glosses of its own."""
    parsed = read_norms(path, options, with_glosses=False)
    if len(parsed) != 1:
        raise NormError(f"{path.name} holds {len(parsed)} norms; --write-glosses writes one norm's worksheet")
    (norm,) = parsed
    if norm.info.kind == "constitution":
        raise NormError("the Constitution's glosses ship with the package; --write-glosses is for other norms")
    if norm.glosses:
        raise NormError(f"{path.name} carries glosses on its lines; edit those, or drop them to have them written")
    return norm


def sidecar_for(path: Path) -> Path:
    return path.with_name(path.name.rsplit(".", 1)[0] + GLOSSES_SIDECAR)


def write_glosses(jobs: list[tuple[ParsedNorm, Path]], settings: ServerSettings, yes: bool) -> None:
    """Each norm's glosses from the cache or the model, into its worksheet; nothing is imported here.

    The estimate is shown and confirmed before the first request; a failure raises GlossError with the replies
    paid for so far kept in the cache."""
    from ..ingest import gloss_writer as gw

    cache = gw.GlossCache(settings.data_dir / gw.CACHE_FILE)
    pricing = gw.Pricing(settings.gloss_model, settings.gloss_price_in, settings.gloss_price_out)
    plan = gw.plan((a for norm, _ in jobs for a in norm.articles), cache, pricing)
    client = None
    if plan.missing:
        client = gw.client_from_env(settings.gloss_timeout_s)
        gw.confirm(plan.summary(), yes)
    else:
        print(f"glosses: all {plan.total} articles are cached; nothing to pay", flush=True)
    for norm, out in jobs:
        glossed = gw.write(norm.articles, cache, client, settings.gloss_model)
        gw.write_worksheet(out, norm.articles, glossed)
        print(f"glosses worksheet for {norm.info.name}: {out}", flush=True)


def write_file_glosses(
    path: Path, options: ImportOptions, settings: ServerSettings, out: Path | None, yes: bool
) -> Path:
    """`import FILE --write-glosses`: the worksheet written (beside the file unless `out` is given); its path."""
    target = out or sidecar_for(path)
    write_glosses([(_glossable(path, options), target)], settings, yes)
    return target


def write_folder_glosses(folder: Path, settings: ServerSettings, yes: bool) -> None:
    """`import FOLDER --write-glosses`: a NAME.glosses.jsonl for each norm file without one. A file that already
    has one keeps it (a team's edits are never overwritten), and a file that cannot be read is left for the
    import to report."""
    if not folder.is_dir():
        raise corpus.CorpusError(f"norms folder {folder} is not a directory")
    jobs: list[tuple[ParsedNorm, Path]] = []
    for path in sorted(p for p in folder.iterdir() if is_norm_file(p)):
        if sidecar_for(path).exists():
            continue
        try:
            jobs.append((_glossable(path, ImportOptions(expected_sha256=None)), sidecar_for(path)))
        except (ValueError, OSError) as exc:
            print(f"{path.name}: no glosses written ({exc})", flush=True)
    if jobs:
        write_glosses(jobs, settings, yes)


def log_outcomes(outcomes: list[FolderOutcome]) -> None:
    for o in outcomes:
        if o.error:
            log.error("norms folder: %s refused: %s", o.file, o.error)
        else:
            log.info("norms folder: %s %s (%s)", o.file, "unchanged" if o.unchanged else "imported", ", ".join(o.norms))


def ensure_index(settings: ServerSettings) -> None:
    """Build the index on first run (from the configured local source if any, else by download), then bring in
    the operator's norms folder if one is configured."""
    if not index.index_path(settings.data_dir).is_file():
        if settings.source is not None:
            log.info("no index yet; importing the configured source file")
            import_file(settings.source, settings.data_dir, settings.source_sha256)
        else:
            log.info("no index yet; downloading the pinned source")
            download_and_build(settings.source_url, settings.data_dir, settings.source_sha256)
    refresh_constitution_glosses(settings.data_dir)
    if settings.norms_dir is not None:
        log_outcomes(import_folder(settings.norms_dir, settings.data_dir))


def refresh_constitution_glosses(data_dir: Path) -> None:
    """An index built before the packaged glosses shipped (or changed) gets them, without re-embedding articles.

    Not fatal: an index the server cannot write (a read-only mount) is served as it is, without them."""
    articles = index.norm_articles(data_dir, corpus.DOCUMENT_NAME)  # no vectors: the server loads them next
    if not articles:
        return
    try:
        store.refresh_glosses(data_dir, corpus.DOCUMENT_NAME, glosses.constitution(articles))
    except (OSError, sqlite3.Error) as exc:
        log.warning("could not add the Constitution's glosses to the index (%s); serving it without them", exc)

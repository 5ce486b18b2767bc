"""From source files to an index on disk: verify, parse, write atomically. Shared by `download`, `import`, `serve`.

Verification and parsing happen before anything is written, and every write goes to a copy swapped in with
os.replace (`panama_law.index.store`), so a refused or failed import leaves an existing index exactly as it was.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..ingest import corpus, glosses
from ..ingest.sources import GLOSSES_SIDECAR, ImportOptions, ParsedNorm, is_norm_file, read_norms
from ..norms import Article, NormError, NormInfo
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


WrittenGlosses = Callable[[Sequence[Article]], dict[int, tuple[str, ...]]]
"""A norm's articles → the glosses a model wrote for them (`gloss_writer.from_cache`), by position."""


@dataclass(frozen=True, slots=True)
class FolderOutcome:
    """One file of a norms folder: what it became, or why it was refused (one line)."""

    file: str
    norms: tuple[str, ...] = ()
    unchanged: bool = False
    error: str | None = None


def import_folder(folder: Path, data_dir: Path, written: WrittenGlosses | None = None) -> list[FolderOutcome]:
    """Import every norm file in `folder` (sidecars give the metadata); a file already indexed from the same bytes
    and metadata is skipped, and a bad file is reported and skipped, leaving the index as it was for it. With
    `written`, a norm with no glosses of its own (no NAME.glosses.jsonl, none on its lines) takes the model-written
    glosses it returns."""
    if not folder.is_dir():
        raise corpus.CorpusError(f"norms folder {folder} is not a directory")
    outcomes: list[FolderOutcome] = []
    for path in sorted(p for p in folder.iterdir() if is_norm_file(p)):
        try:
            parsed = read_norms(path, ImportOptions(expected_sha256=None))
            if written is not None and not sidecar_for(path).exists():
                parsed = [
                    replace(p, glosses=written(p.articles)) if p.info.kind != "constitution" and not p.glosses else p
                    for p in parsed
                ]
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


def write_glosses(
    jobs: list[tuple[ParsedNorm, Path]],
    settings: ServerSettings,
    yes: bool,
    *,
    unattended: bool = False,
    keep_edits: bool = True,
    say: Callable[[str], None] | None = None,
) -> None:
    """Each norm's glosses from the cache or the model, into its worksheet; nothing is imported here. With
    `keep_edits`, a worksheet already there keeps what it gives unchanged articles (`gloss_store.kept_from`) and
    is left untouched when that is every article.

    The estimate is shown and confirmed before the first request (`yes` confirms it). A run nobody confirmed at a
    terminal (`yes`, or `unattended` for the server) is held to PANAMA_LAW_GLOSS_MAX_COST, before and during the
    run. A failure raises GlossError with the replies paid for so far kept in the cache."""
    from ..ingest import gloss_requests as gr
    from ..ingest import gloss_store as gs
    from ..ingest import gloss_writer as gw

    cache = gs.GlossCache(settings.data_dir / gs.CACHE_FILE)
    pricing = gw.Pricing(settings.gloss_model, settings.gloss_price_in, settings.gloss_price_out)
    kept = [gs.kept_from(out, norm.articles) if keep_edits else {} for norm, out in jobs]
    plan = gw.plan(
        ((a, pos in held) for (norm, _), held in zip(jobs, kept, strict=True) for pos, a in enumerate(norm.articles)),
        cache,
        pricing,
    )
    run = gw.Run(
        None,
        plan,
        max_cost=settings.gloss_max_cost if yes or unattended else None,
        concurrency=settings.gloss_concurrency,
    )
    if say is not None:
        run.say = say
    if plan.missing:
        client = gr.client_from_env(settings.gloss_timeout_s)
        if run.max_cost is not None:
            gw.check_ceiling(plan, run.max_cost)
        if unattended:
            run.say(plan.summary())
        else:
            gw.confirm(plan.summary(), yes)
        run.client = client
    else:
        run.say(f"glosses: all {plan.total} articles have them (cached or kept from the worksheet); nothing to pay")
    try:
        for (norm, out), held in zip(jobs, kept, strict=True):
            if len(held) == len(norm.articles):
                run.say(f"glosses worksheet for {norm.info.name}: {out}, kept as it is")
                continue
            glossed = gr.write(norm.articles, cache, run, held)
            out.parent.mkdir(parents=True, exist_ok=True)
            gs.write_worksheet(out, norm.articles, glossed)
            run.say(f"glosses worksheet for {norm.info.name}: {out}")
    finally:
        run.finish()


def write_file_glosses(
    path: Path, options: ImportOptions, settings: ServerSettings, out: Path | None, yes: bool
) -> Path:
    """`import FILE --write-glosses`: the worksheet written (beside the file unless `out` is given); its path."""
    target = out or sidecar_for(path)
    write_glosses([(_glossable(path, options), target)], settings, yes)
    return target


def write_folder_glosses(folder: Path, settings: ServerSettings, yes: bool) -> None:
    """`import FOLDER --write-glosses`: a NAME.glosses.jsonl for each norm file, its existing one keeping what it
    gives unchanged articles (a team's edits are never overwritten); a file that cannot be read is left for the
    import to report."""
    if not folder.is_dir():
        raise corpus.CorpusError(f"norms folder {folder} is not a directory")
    jobs: list[tuple[ParsedNorm, Path]] = []
    for path in sorted(p for p in folder.iterdir() if is_norm_file(p)):
        try:
            jobs.append((_glossable(path, ImportOptions(expected_sha256=None)), sidecar_for(path)))
        except (ValueError, OSError) as exc:
            print(f"{path.name}: no glosses written ({exc})", flush=True)
    if jobs:
        write_glosses(jobs, settings, yes)


SERVER_WORKSHEETS = "glosses"
"""The data dir's folder where the server leaves the worksheets it wrote (the norms folder may be mounted
read-only): a team reads one there and, to edit it, puts it beside its law as NAME.glosses.jsonl."""


def cached_glosses(settings: ServerSettings) -> WrittenGlosses:
    """The model-written glosses the cache holds, for the norms folder's import: free, no request is sent."""
    from ..ingest import gloss_store as gs
    from ..ingest import gloss_writer as gw

    cache = gs.GlossCache(settings.data_dir / gs.CACHE_FILE)
    return lambda articles: gw.from_cache(articles, cache, settings.gloss_model)


def _log_line(line: str) -> None:
    log.info("norms folder: %s", line)


def gloss_norms_folder(settings: ServerSettings) -> bool:
    """The server's job with PANAMA_LAW_WRITE_GLOSSES, once its norms folder is imported and served: write the
    glosses the cache lacks for the folder's norms that have none of their own, then import those norms again with
    them (the running server reloads the changed index by itself). Never asks: the estimate is logged and held to
    PANAMA_LAW_GLOSS_MAX_COST. The glosses are the cache's, as the start's import reads them, so the worksheets
    in the data dir are written whole, for the team to read. A failure is one logged line and the norms stay
    served as they are. True if the index was brought up to date with new glosses."""
    from ..ingest import gloss_store as gs
    from ..ingest import gloss_writer as gw

    folder = settings.norms_dir
    if folder is None or not folder.is_dir():
        return False
    jobs: list[tuple[ParsedNorm, Path]] = []
    for path in sorted(p for p in folder.iterdir() if is_norm_file(p)):
        if sidecar_for(path).exists():  # the team's own glosses
            continue
        try:
            norm = _glossable(path, ImportOptions(expected_sha256=None))
        except (ValueError, OSError):
            continue  # refused at the start's import, which logged why; or glosses of its own
        jobs.append((norm, settings.data_dir / SERVER_WORKSHEETS / sidecar_for(path).name))
    cache = gs.GlossCache(settings.data_dir / gs.CACHE_FILE)
    pricing = gw.Pricing(settings.gloss_model, settings.gloss_price_in, settings.gloss_price_out)
    if not gw.plan(((a, False) for norm, _ in jobs for a in norm.articles), cache, pricing).missing:
        return False  # the start's import took them all from the cache
    try:
        write_glosses(jobs, settings, False, unattended=True, keep_edits=False, say=_log_line)
    except (ValueError, OSError) as exc:  # GlossError, NormError, a worksheet that cannot be written
        log.error("norms folder: glosses not written (%s); its norms are served without them", exc)
        return False
    log_outcomes(import_folder(folder, settings.data_dir, cached_glosses(settings)))
    return True


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
        written = cached_glosses(settings) if settings.write_glosses else None
        log_outcomes(import_folder(settings.norms_dir, settings.data_dir, written))


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
